// Package spantest builds span.Span values from spans written with their names
// as strings, for tests of the packages that read spans.
package spantest

import "github.com/tierscope/tierscope/internal/span"

// Named is a span with its names as strings; "" is an unknown name.
type Named struct {
	ID, ParentID    uint64
	Service         string
	Kind            span.Kind
	Start, End      int64
	Error, Database bool
	// Peer and Endpoint are the callee's name and the address a CLIENT span
	// called (span.Span's Peer and Endpoint).
	Peer, Endpoint                         string
	Transaction, Version, Machine, Process string
}

// Span interns n's names into names.
func (n Named) Span(names *span.Names) span.Span {
	return span.Span{
		ID: n.ID, ParentID: n.ParentID, Start: n.Start, End: n.End, Kind: n.Kind, Error: n.Error, Database: n.Database,
		Service: names.Optional(n.Service), Peer: names.Optional(n.Peer), Endpoint: names.Optional(n.Endpoint),
		Transaction: names.Optional(n.Transaction), Version: names.Optional(n.Version),
		Machine: names.Optional(n.Machine), Process: names.Optional(n.Process),
		Instance: -1, Host: -1, Name: -1, Caller: -1, CallerAddress: -1, Op: -1, OpClass: -1, Thread: -1, Identity: -1, Parent: -1,
	}
}

// Spans interns the names of every span into names.
func Spans(names *span.Names, named ...Named) []span.Span {
	out := make([]span.Span, len(named))
	for i, n := range named {
		out[i] = n.Span(names)
	}
	return out
}
