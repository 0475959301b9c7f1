package perfmodelexporter

import (
	"fmt"
	"strings"
	"testing"
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
	for i := range maxLinkAddresses + 5 {
		b.learn("x", "y", fmt.Sprintf("10.1.0.%d:80", i))
	}
	for i := range maxBookLinks + 5 {
		b.learn(fmt.Sprint("c", i), "d", "10.2.0.1:80")
	}
	if len(b.addresses("x", "y")) != maxLinkAddresses || len(b.links) != maxBookLinks || b.overflow != 5+5+3 {
		t.Errorf("bounds: %d addresses, %d links, overflow %d", len(b.addresses("x", "y")), len(b.links), b.overflow)
	}

	// A link without configuration takes the discovered address; the
	// configured one wins; none at all names the links seen.
	var xc ExperimentsConfig
	lt, err := xc.linkTarget("app->db", "db", b.addresses("app", "db"), b.names())
	if err != nil || lt.host != "10.0.0.6" || lt.port != 5432 || lt.proto != "tcp" {
		t.Errorf("discovered: %+v, %v", lt, err)
	}
	xc.Links = map[string]ExperimentLink{"app->db": {Address: "10.9.9.9:6543"}}
	if lt, err := xc.linkTarget("app->db", "db", b.addresses("app", "db"), nil); err != nil || lt.host != "10.9.9.9" {
		t.Errorf("configured: %+v, %v", lt, err)
	}
	if _, err := xc.linkTarget("web->nowhere", "nowhere", nil, []string{"app->db"}); err == nil || !strings.Contains(err.Error(), "links seen: app->db") {
		t.Errorf("unknown link: %v", err)
	}
}
