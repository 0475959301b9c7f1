// Package endpoint holds what the components' HTTP APIs decide from their
// listen address.
package endpoint

import (
	"net"
	"net/netip"
)

// IsLoopback reports whether endpoint (host:port) listens on loopback only:
// an API that can change a host (the injector's, the exporter's experiments)
// may run without authentication only there.
func IsLoopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}
