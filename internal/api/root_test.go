package api

import "testing"

func TestRoot(t *testing.T) {
	for path, want := range map[string]string{
		"": "", "/": "", "/api/v1": "", "/api/v1/": "", "/api/v1//": "",
		"/proxy/tierscope/api/v1/": "/proxy/tierscope", "/proxy/": "/proxy", "/api/v10": "/api/v10",
	} {
		if got := Root(path); got != want {
			t.Errorf("Root(%q) = %q, want %q", path, got, want)
		}
	}
	if !(len(PathHealth) > len(VersionPrefix) && PathHealth[:len(VersionPrefix)] == VersionPrefix) {
		t.Errorf("PathHealth %q does not begin with %q", PathHealth, VersionPrefix)
	}
}
