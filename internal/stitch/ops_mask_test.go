package stitch

import "testing"

// httpOp builds in a reused buffer what maskPath builds anew, for every path
// shape, and hands back the same operation on the next call.
func TestHTTPOpIsMaskPath(t *testing.T) {
	var j joiner
	paths := []string{"/", "//", "/a", "a/", "/a/", "/api/products/1234", "/api/products/1234/", "/x/0",
		"/orders/abcdefghijklmnopqrstuvwxyz", "/orders/abcdefghijklmnopqrstuvwx", "v2", "/v2/items//3", "/é/9é"}
	for round := 0; round < 2; round++ {
		for _, p := range paths {
			if got, want := j.httpOp(p), "http "+maskPath(p); got != want {
				t.Errorf("httpOp(%q) = %q, want %q", p, got, want)
			}
		}
	}
	if got := (*joiner)(nil).httpOp("/a/1"); got != "http /a/*" {
		t.Errorf("nil joiner: %q", got)
	}
}
