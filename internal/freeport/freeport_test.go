package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestTCPNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := TCP()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
