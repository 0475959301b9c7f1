package stitch

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TestCallerAddressConventions reads a SERVER span's caller socket in the
// current and legacy conventions, the socket's peer before client.* (which a
// proxy may have rewritten).
func TestCallerAddressConventions(t *testing.T) {
	for _, tc := range []struct {
		attrs         map[string]any
		address, conn string
	}{
		{map[string]any{"network.peer.address": "10.0.0.7", "network.peer.port": int64(41000), "client.address": "203.0.113.9"}, "10.0.0.7", "10.0.0.7:41000"},
		{map[string]any{"net.sock.peer.addr": "10.0.0.8", "net.sock.peer.port": int64(41001)}, "10.0.0.8", "10.0.0.8:41001"},
		{map[string]any{"client.address": "10.0.0.9", "client.port": int64(41002)}, "10.0.0.9", "10.0.0.9:41002"},
		{map[string]any{"net.peer.ip": "10.0.0.10", "net.peer.port": int64(41003)}, "10.0.0.10", "10.0.0.10:41003"},
		{map[string]any{"network.peer.address": "10.0.0.11"}, "10.0.0.11", ""},
		{map[string]any{"server.address": "db", "server.port": int64(5432)}, "", ""},
	} {
		m := pcommon.NewMap()
		if err := m.FromRaw(tc.attrs); err != nil {
			t.Fatal(err)
		}
		var a spanAttrs
		readAttrs(m, &a, nil)
		address, conn := callerAddress(&a, nil)
		if address != tc.address || conn != tc.conn {
			t.Errorf("%v: got %q, %q; want %q, %q", tc.attrs, address, conn, tc.address, tc.conn)
		}
	}
}
