package perfmodelexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
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

// The connection inventory teaches the link book the links between named
// services, weighted by their open connections; links with an unnamed end
// or no port are not learned.
func TestInventoryTeachesLinkAddresses(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	md, dps := gaugeOf("h1", "tierscope.link.connections")
	add := func(src, dst, addr string, port, n int64) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(loadStart))
		dp.SetIntValue(n)
		a := dp.Attributes()
		if src != "" {
			a.PutStr("tierscope.source.service", src)
		}
		if dst != "" {
			a.PutStr("tierscope.destination.service", dst)
		}
		a.PutStr("destination.address", addr)
		a.PutInt("destination.port", port)
	}
	add("app", "db", "10.0.0.6", 5432, 2)
	add("app", "db", "10.0.0.7", 5432, 5)
	add("app", "cache", "fd00::7", 6379, 1)
	add("", "db", "10.0.0.6", 5432, 9)      // caller unknown
	add("app", "", "10.0.0.9", 8080, 9)     // callee unknown
	add("batch", "db", "10.0.0.6", 0, 3)    // no port
	add("batch", "db", "10.0.0.6", 5432, 0) // no open connection
	require.NoError(t, te.ConsumeMetrics(context.Background(), md))

	te.mu.Lock()
	defer te.mu.Unlock()
	require.Equal(t, []string{"10.0.0.7:5432", "10.0.0.6:5432"}, te.links.addresses("app", "db"))
	require.Equal(t, []string{"[fd00::7]:6379"}, te.links.addresses("app", "cache"))
	require.Equal(t, []string{"app->cache", "app->db"}, te.links.names())
	var xc ExperimentsConfig
	lt, err := xc.linkTarget("app->cache", "cache", te.links.addresses("app", "cache"), nil)
	require.NoError(t, err)
	require.Equal(t, "fd00::7", lt.host)
	require.EqualValues(t, 6379, lt.port)
}
