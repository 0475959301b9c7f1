package endpoint

import "testing"

func TestIsLoopback(t *testing.T) {
	for ep, want := range map[string]bool{
		"127.0.0.1:8790": true, "localhost:1": true, "[::1]:80": true, "127.9.9.9:0": true,
		"0.0.0.0:8790": false, "10.0.0.4:18777": false, ":8790": false, "127.0.0.1": false, "example.com:80": false,
	} {
		if got := IsLoopback(ep); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", ep, got, want)
		}
	}
}
