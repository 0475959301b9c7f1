package ingest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLinkBookDiscoversAddresses(t *testing.T) {
	b := newLinkBook()
	for range 3 {
		b.learn("app", "db", "10.0.0.6:5432")
	}
	b.learn("app", "db", "10.0.0.7:5432")
	b.learn("worker", "db", "10.0.0.10:5432")
	b.learn("web", "queue", "msg:q/notify") // not a host:port
	b.learn("web", "web", "127.0.0.1:80")   // not a link
	if got := b.addresses("app", "db"); len(got) != 2 || got[0] != "10.0.0.6:5432" {
		t.Errorf("app->db: %v, want the most called first", got)
	}
	if got := b.names(); strings.Join(got, ",") != "app->db,worker->db" {
		t.Errorf("links %v", got)
	}
	// Bounded: addresses per link, then links.
	for i := range MaxLinkAddresses + 5 {
		b.learn("x", "y", fmt.Sprintf("10.1.0.%d:80", i))
	}
	for i := range maxBookLinks + 5 {
		b.learn(fmt.Sprint("c", i), "d", "10.2.0.1:80")
	}
	if len(b.addresses("x", "y")) != MaxLinkAddresses || len(b.links) != maxBookLinks || b.overflow != 5+5+3 {
		t.Errorf("bounds: %d addresses, %d links, overflow %d", len(b.addresses("x", "y")), len(b.links), b.overflow)
	}
	// How a link experiment picks among them is internal/coordinator's
	// TestLinkTarget.
}

// The calls per request are bounded: transactions past the bound are
// counted as overflow.
func TestLinkCallsPerRequestBounded(t *testing.T) {
	b := newLinkBook()
	for i := range maxCallTransactions + 3 {
		if tx := fmt.Sprint("tx", i); b.countRequest("a", tx) {
			b.countServer("a", tx)
			b.countCall("a", "b", "10.0.0.1:80", tx)
		}
	}
	require.Len(t, b.requests, maxCallTransactions)
	require.Len(t, b.callsPerRequest("a", "b"), maxCallTransactions)
	require.EqualValues(t, 3, b.overflow)
}
