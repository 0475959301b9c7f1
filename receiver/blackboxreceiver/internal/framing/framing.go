// Package framing cuts the two byte streams of a connection into calls: a
// request and its response, with the capture times of their first and last
// bytes. It frames HTTP/1.x exactly (start line, headers, Content-Length and
// chunked bodies, pipelining, HEAD, 1xx, 204 and 304, bodies delimited by the
// close of the connection) and any other request/response protocol
// generically: a change of direction ends a message.
//
// Framers are pure and bounded: headers longer than MaxHeader, chunk lines
// longer than maxLine and more than MaxPipeline outstanding requests are
// malformations, counted; the framer then drops bytes until a packet starts
// with something that looks like the start of a message (resynchronisation),
// which is also how a connection picked up in the middle is joined. Bodies
// are counted, never buffered.
package framing

// Dir is a direction: Request (client to server) or Response.
type Dir uint8

const (
	Request  Dir = 0
	Response Dir = 1
)

// Protocol is how a connection is framed.
type Protocol uint8

const (
	// Auto frames as HTTP when the first request bytes look like HTTP/1.x, else
	// generically.
	Auto Protocol = iota
	HTTP
	Generic
)

func (p Protocol) String() string {
	switch p {
	case HTTP:
		return "http"
	case Generic:
		return "generic"
	}
	return "auto"
}

// ParseProtocol maps a name to a Protocol.
func ParseProtocol(s string) (Protocol, bool) {
	switch s {
	case "auto", "":
		return Auto, true
	case "http":
		return HTTP, true
	case "generic":
		return Generic, true
	}
	return 0, false
}

// Call is one request and its response. Times are capture times in
// nanoseconds: of the first and last byte of each message.
type Call struct {
	Protocol                             Protocol
	ReqStart, ReqEnd, RespStart, RespEnd int64
	ReqBytes, RespBytes                  int64
	// HTTP only.
	Method, Target string
	Status         int
	// Gap is set when bytes of this call were lost by the capture; its framing
	// held (a gap inside a body of known length) but the bytes are missing.
	Gap bool
}

// Stats counts framing events; shared by the framers of one capture.
type Stats struct {
	Calls          uint64
	Malformed      uint64 // messages that could not be parsed (the framer resynchronised)
	Resyncs        uint64 // times a framer found a message start after losing sync
	SyncLost       uint64 // gaps that made a framer lose sync
	Unanswered     uint64 // requests whose connection ended before the response
	LostCalls      uint64 // responses to requests whose start was lost: not reported
	Unsolicited    uint64 // responses (or server-first messages) with no request
	PipelineDrops  uint64 // requests dropped because MaxPipeline were outstanding
	UpgradedConns  uint64 // HTTP connections switched to another protocol (101)
	SkippedBytes   uint64 // bytes dropped while out of sync
	GenericTimeout uint64 // generic calls ended by quiet rather than by the next request
}

// Limits bound a framer.
type Limits struct {
	MaxHeader   int   // bytes of an HTTP start line and headers (default 32 KiB)
	MaxPipeline int   // outstanding HTTP requests per connection (default 64)
	MaxTarget   int   // bytes of the request target kept (default 512)
	Quiet       int64 // ns of silence that ends a generic response (default 200 ms)
}

func (l Limits) withDefaults() Limits {
	if l.MaxHeader <= 0 {
		l.MaxHeader = 32 << 10
	}
	if l.MaxPipeline <= 0 {
		l.MaxPipeline = 64
	}
	if l.MaxTarget <= 0 {
		l.MaxTarget = 512
	}
	if l.Quiet <= 0 {
		l.Quiet = 200e6
	}
	return l
}

// Framer frames one connection. Its methods are called in capture order.
type Framer interface {
	// Data gives bytes of one direction, captured at t; a Data call starts at a
	// packet boundary.
	Data(dir Dir, t int64, b []byte)
	// Gap reports n bytes of one direction lost by the capture.
	Gap(dir Dir, n int64)
	// Tick lets a framer end messages that only silence delimits.
	Tick(now int64)
	// Close ends the connection at t.
	Close(t int64)
}

// New returns a framer for protocol p that passes each finished call to emit.
func New(p Protocol, lim Limits, st *Stats, emit func(Call)) Framer {
	lim = lim.withDefaults()
	switch p {
	case HTTP:
		return newHTTP(lim, st, emit)
	case Generic:
		return newGeneric(lim, st, emit)
	}
	return &auto{lim: lim, st: st, emit: emit}
}

// auto decides on the first request bytes.
type auto struct {
	lim   Limits
	st    *Stats
	emit  func(Call)
	inner Framer
}

func (a *auto) Data(dir Dir, t int64, b []byte) {
	if a.inner == nil {
		switch {
		case dir == Request && looksLikeRequest(b):
			a.inner = newHTTP(a.lim, a.st, a.emit)
		case dir == Response && looksLikeResponse(b):
			a.inner = newHTTP(a.lim, a.st, a.emit) // picked up mid-stream
		case dir == Response:
			// Server-first bytes (a greeting, the tail of a response picked up
			// mid-stream) decide nothing: wait for the client.
			a.st.Unsolicited++
			return
		case len(b) < 8 && isTokenPrefix(b):
			// Too short to tell; HTTP will resynchronise if it was not.
			a.inner = newHTTP(a.lim, a.st, a.emit)
		default:
			a.inner = newGeneric(a.lim, a.st, a.emit)
		}
	}
	a.inner.Data(dir, t, b)
}

func (a *auto) Gap(dir Dir, n int64) {
	if a.inner != nil {
		a.inner.Gap(dir, n)
	}
}

func (a *auto) Tick(now int64) {
	if a.inner != nil {
		a.inner.Tick(now)
	}
}

func (a *auto) Close(t int64) {
	if a.inner != nil {
		a.inner.Close(t)
	}
}

func isTokenPrefix(b []byte) bool {
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return len(b) > 0
}

// generic frames by direction changes: a request is everything the client
// sends until the server answers; the response is everything the server sends
// until the client sends again (or the connection closes, or it is quiet for
// Limits.Quiet).
type generic struct {
	lim  Limits
	st   *Stats
	emit func(Call)

	state Dir // meaningful when open
	open  bool
	c     Call
}

func newGeneric(lim Limits, st *Stats, emit func(Call)) *generic {
	return &generic{lim: lim, st: st, emit: emit}
}

func (g *generic) Data(dir Dir, t int64, b []byte) {
	switch {
	case dir == Request:
		if g.open && g.state == Response {
			g.finish()
		}
		if !g.open {
			g.open, g.state = true, Request
			g.c = Call{Protocol: Generic, ReqStart: t}
		}
		g.c.ReqEnd = t
		g.c.ReqBytes += int64(len(b))
	case !g.open:
		g.st.Unsolicited++ // a greeting, or a response whose request was missed
	default:
		if g.state == Request {
			g.state = Response
			g.c.RespStart = t
		}
		g.c.RespEnd = t
		g.c.RespBytes += int64(len(b))
	}
}

func (g *generic) finish() {
	g.st.Calls++
	g.emit(g.c)
	g.open = false
}

func (g *generic) Gap(dir Dir, n int64) {
	if g.open {
		g.c.Gap = true
		if dir == Request && g.state == Request {
			g.c.ReqBytes += n
		} else if dir == Response && g.state == Response {
			g.c.RespBytes += n
		}
	}
}

func (g *generic) Tick(now int64) {
	if g.open && g.state == Response && now-g.c.RespEnd >= g.lim.Quiet {
		g.st.GenericTimeout++
		g.finish()
	}
}

func (g *generic) Close(int64) {
	if !g.open {
		return
	}
	if g.state == Response {
		g.finish()
		return
	}
	g.st.Unanswered++
	g.open = false
}
