package framing

import (
	"bytes"
	"strconv"
)

// maxLine bounds a chunk-size or trailer line.
const maxLine = 4096

// Parser states of one direction.
const (
	stStart      = iota // at a message boundary
	stHeader            // in the start line and headers
	stBody              // in a body of known length
	stChunkSize         // in a chunk-size line
	stChunkData         // in a chunk
	stChunkEnd          // in the CRLF after a chunk
	stTrailer           // in the trailer section
	stUntilClose        // in a body that the close of the connection ends
	stSkip              // lost sync: waiting for a packet that starts a message
	stDead              // the connection switched protocols: ignore it
)

// httpMsg is the message being parsed in one direction.
type httpMsg struct {
	state     int
	buf       []byte // start line and headers, or the current chunk/trailer line
	remaining int64  // body or chunk bytes still to come
	start     int64
	last      int64
	bytes     int64
	gap       bool
	// request: method and target; response: status and the request it answers.
	method, target string
	status         int
	head           bool
	interim        bool // a 1xx response: the final one follows
	upgrade        bool
}

type pendingReq struct {
	start, end     int64
	bytes          int64
	method, target string
	gap            bool
}

type httpFramer struct {
	lim     Limits
	st      *Stats
	emit    func(Call)
	dir     [2]httpMsg
	pending []pendingReq
	// respFor is the request the response in progress answers, popped from
	// pending when the response starts.
	respFor    pendingReq
	hasRespFor bool
	// respLost is set when the response stream lost sync: at resynchronisation
	// the responses of the requests before the newest were lost with it.
	respLost bool
}

func newHTTP(lim Limits, st *Stats, emit func(Call)) *httpFramer {
	return &httpFramer{lim: lim, st: st, emit: emit}
}

func (h *httpFramer) Data(dir Dir, t int64, b []byte) {
	m := &h.dir[dir]
	switch m.state {
	case stDead:
		return
	case stSkip:
		if !h.startsMessage(dir, b) {
			h.st.SkippedBytes += uint64(len(b))
			return
		}
		h.st.Resyncs++
		m.state = stStart
		if dir == Response && h.respLost {
			h.respLost = false
			if n := len(h.pending); n > 1 {
				h.st.Unanswered += uint64(n - 1)
				h.pending = h.pending[n-1:]
			}
		}
	}
	for len(b) > 0 && m.state != stSkip && m.state != stDead {
		b = h.step(dir, t, b)
	}
	if m.state == stSkip {
		h.st.SkippedBytes += uint64(len(b))
	}
}

func (h *httpFramer) startsMessage(dir Dir, b []byte) bool {
	if dir == Request {
		return looksLikeRequest(b)
	}
	return looksLikeResponse(b)
}

// step consumes a prefix of b in the current state and returns the rest.
func (h *httpFramer) step(dir Dir, t int64, b []byte) []byte {
	m := &h.dir[dir]
	switch m.state {
	case stStart:
		return h.stepStart(dir, m, t, b)
	case stHeader:
		return h.stepHeader(dir, m, t, b)
	case stBody, stChunkData:
		return h.stepData(dir, m, t, b)
	case stChunkEnd:
		return h.stepChunkEnd(dir, m, t, b)
	case stChunkSize, stTrailer:
		return h.stepLine(dir, m, t, b)
	case stUntilClose:
		h.touch(m, t, len(b))
		return nil
	}
	return nil
}

// stepStart begins a message at time t, after skipping one empty line
// between messages.
func (h *httpFramer) stepStart(dir Dir, m *httpMsg, t int64, b []byte) []byte {
	if m.buf == nil && len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
		return b[1:] // tolerated empty line between messages
	}
	*m = httpMsg{state: stHeader, start: t, buf: m.buf[:0]}
	if dir == Response {
		h.responseStarts()
	}
	return b
}

// stepHeader buffers the head of a message up to its blank line, then parses
// it; a head over the limit or that does not parse makes the stream malformed.
// A message whose body is empty is done here.
func (h *httpFramer) stepHeader(dir Dir, m *httpMsg, t int64, b []byte) []byte {
	old := len(m.buf)
	m.buf = append(m.buf, b...)
	end := headerEnd(m.buf, max(0, old-3))
	if end < 0 {
		if len(m.buf) > h.lim.MaxHeader {
			h.malformed(dir)
			return nil
		}
		h.touch(m, t, len(b))
		return nil
	}
	used := end - old
	m.buf = m.buf[:end]
	h.touch(m, t, used)
	rest := b[used:]
	if len(m.buf) > h.lim.MaxHeader || !h.parseHead(dir, m) {
		h.malformed(dir)
		return nil
	}
	m.buf = m.buf[:0]
	if m.state != stBody || m.remaining == 0 {
		if m.state == stBody {
			h.done(dir)
		}
		return rest
	}
	return rest
}

// stepData consumes body or chunk bytes up to what remains of them; the
// message is done at the body's end, and a chunk's end expects its CRLF.
func (h *httpFramer) stepData(dir Dir, m *httpMsg, t int64, b []byte) []byte {
	n := min(int64(len(b)), m.remaining)
	m.remaining -= n
	h.touch(m, t, int(n))
	if m.remaining == 0 {
		if m.state == stBody {
			h.done(dir)
		} else {
			m.state = stChunkEnd
		}
	}
	return b[n:]
}

// stepChunkEnd consumes the CRLF (or a bare LF) after the chunk data.
func (h *httpFramer) stepChunkEnd(dir Dir, m *httpMsg, t int64, b []byte) []byte {
	i := 0
	for i < len(b) && b[i] == '\r' {
		i++
	}
	if i < len(b) {
		if b[i] != '\n' {
			h.malformed(dir)
			return nil
		}
		i++
		m.state = stChunkSize
	}
	h.touch(m, t, i)
	return b[i:]
}

// stepLine buffers a chunk-size or trailer line up to its LF, then acts on
// it: a chunk size starts the chunk's data (0 the trailer), and an empty
// trailer line ends the message. Over-long or bad lines are malformed.
func (h *httpFramer) stepLine(dir Dir, m *httpMsg, t int64, b []byte) []byte {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		m.buf = append(m.buf, b...)
		h.touch(m, t, len(b))
		if len(m.buf) > maxLine {
			h.malformed(dir)
		}
		return nil
	}
	m.buf = append(m.buf, b[:nl]...)
	h.touch(m, t, nl+1)
	line := bytes.TrimRight(m.buf, "\r")
	m.buf = m.buf[:0]
	if len(line) > maxLine {
		h.malformed(dir)
		return nil
	}
	if m.state == stTrailer {
		if len(line) == 0 {
			h.done(dir)
		}
		return b[nl+1:]
	}
	size, ok := parseChunkSize(line)
	if !ok {
		h.malformed(dir)
		return nil
	}
	if size == 0 {
		m.state = stTrailer
	} else {
		m.state, m.remaining = stChunkData, size
	}
	return b[nl+1:]
}

func (h *httpFramer) touch(m *httpMsg, t int64, n int) {
	m.last = t
	m.bytes += int64(n)
}

// headerEnd returns the index just past the empty line that ends the header
// section of b, searching from from, or -1.
func headerEnd(b []byte, from int) int {
	for i := bytes.IndexByte(b[from:], '\n'); i >= 0; {
		j := from + i
		switch {
		case j+1 < len(b) && b[j+1] == '\n':
			return j + 2
		case j+2 < len(b) && b[j+1] == '\r' && b[j+2] == '\n':
			return j + 3
		}
		from = j + 1
		i = bytes.IndexByte(b[from:], '\n')
	}
	return -1
}

func parseChunkSize(line []byte) (int64, bool) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || len(line) > 15 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(line), 16, 64)
	return n, err == nil && n >= 0
}

// parseHead parses the start line and headers in m.buf and sets the body state.
func (h *httpFramer) parseHead(dir Dir, m *httpMsg) bool {
	lines := m.buf
	nl := bytes.IndexByte(lines, '\n')
	if nl < 0 {
		return false
	}
	first := bytes.TrimRight(lines[:nl], "\r")
	var chunked, hasLength bool
	var length int64
	rest := lines[nl+1:]
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		line := bytes.TrimRight(rest[:nl], "\r")
		rest = rest[nl+1:]
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return false
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (hasLength && n != length) {
				return false
			}
			length, hasLength = n, true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if containsFold(value, "chunked") {
				chunked = true
			}
		}
	}
	if dir == Request {
		method, target, ok := parseRequestLine(first)
		if !ok {
			return false
		}
		m.method = method
		if len(target) > h.lim.MaxTarget {
			target = target[:h.lim.MaxTarget]
		}
		m.target = target
		m.head = method == "HEAD"
		switch {
		case chunked:
			m.state = stChunkSize
		default:
			m.state, m.remaining = stBody, length
		}
		return true
	}
	status, ok := parseStatusLine(first)
	if !ok {
		return false
	}
	m.status = status
	head := h.hasRespFor && h.respFor.method == "HEAD"
	switch {
	case status == 101:
		m.upgrade = true
		m.state, m.remaining = stBody, 0
	case status >= 100 && status < 200:
		m.interim = true
		m.state, m.remaining = stBody, 0
	case head || status == 204 || status == 304:
		m.state, m.remaining = stBody, 0
	case chunked:
		m.state = stChunkSize
	case hasLength:
		m.state, m.remaining = stBody, length
	default:
		m.state = stUntilClose
	}
	return true
}

func containsFold(v []byte, word string) bool {
	return bytes.Contains(bytes.ToLower(v), []byte(word))
}

// parseRequestLine parses "METHOD target HTTP/1.x".
func parseRequestLine(l []byte) (method, target string, ok bool) {
	sp := bytes.IndexByte(l, ' ')
	if sp <= 0 || sp > 20 || !isTokenPrefix(l[:sp]) {
		return "", "", false
	}
	rest := l[sp+1:]
	sp2 := bytes.LastIndexByte(rest, ' ')
	if sp2 <= 0 {
		return "", "", false
	}
	if v := rest[sp2+1:]; !bytes.HasPrefix(v, []byte("HTTP/1.")) || len(v) != 8 {
		return "", "", false
	}
	return string(l[:sp]), string(rest[:sp2]), true
}

// parseStatusLine parses "HTTP/1.x NNN reason".
func parseStatusLine(l []byte) (int, bool) {
	if len(l) < 12 || !bytes.HasPrefix(l, []byte("HTTP/1.")) || l[8] != ' ' {
		return 0, false
	}
	code := l[9:12]
	if len(l) > 12 && l[12] != ' ' {
		return 0, false
	}
	n := 0
	for _, c := range code {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 100 && n <= 999
}

var methods = [][]byte{
	[]byte("GET "), []byte("POST "), []byte("PUT "), []byte("DELETE "), []byte("HEAD "),
	[]byte("OPTIONS "), []byte("PATCH "), []byte("CONNECT "), []byte("TRACE "),
}

// looksLikeRequest reports whether b starts like an HTTP/1.x request.
func looksLikeRequest(b []byte) bool {
	for _, m := range methods {
		if bytes.HasPrefix(b, m) {
			return true
		}
	}
	return false
}

func looksLikeResponse(b []byte) bool { return bytes.HasPrefix(b, []byte("HTTP/1.")) }

// responseStarts pairs the response that starts with the oldest outstanding
// request.
func (h *httpFramer) responseStarts() {
	if h.hasRespFor {
		return // an interim response's request, still waiting for the final one
	}
	if len(h.pending) == 0 {
		return
	}
	h.respFor, h.hasRespFor = h.pending[0], true
	h.pending = h.pending[1:]
}

// done ends the message in progress in dir.
func (h *httpFramer) done(dir Dir) {
	m := &h.dir[dir]
	if dir == Request {
		if len(h.pending) >= h.lim.MaxPipeline {
			h.st.PipelineDrops++
			h.pending = h.pending[1:]
		}
		h.pending = append(h.pending, pendingReq{start: m.start, end: m.last, bytes: m.bytes, method: m.method, target: m.target, gap: m.gap})
		*m = httpMsg{state: stStart, buf: m.buf[:0]}
		return
	}
	if m.interim {
		*m = httpMsg{state: stStart, buf: m.buf[:0]}
		return
	}
	upgrade := m.upgrade
	if h.hasRespFor && h.respFor.start == 0 {
		h.st.LostCalls++ // answers a request lost whole: no timing to report
		h.hasRespFor = false
	} else if h.hasRespFor {
		r := h.respFor
		h.st.Calls++
		h.emit(Call{
			Protocol: HTTP, ReqStart: r.start, ReqEnd: r.end, RespStart: m.start, RespEnd: m.last,
			ReqBytes: r.bytes, RespBytes: m.bytes, Method: r.method, Target: r.target, Status: m.status,
			Gap: r.gap || m.gap,
		})
		h.hasRespFor = false
	} else {
		h.st.Unsolicited++
	}
	*m = httpMsg{state: stStart, buf: m.buf[:0]}
	if upgrade {
		h.st.UpgradedConns++
		h.dir[Request].state, h.dir[Response].state = stDead, stDead
	}
}

// malformed drops the message in progress in dir and waits for a new one.
func (h *httpFramer) malformed(dir Dir) {
	h.st.Malformed++
	h.lose(dir)
}

func (h *httpFramer) lose(dir Dir) {
	m := &h.dir[dir]
	*m = httpMsg{state: stSkip, buf: m.buf[:0]}
	if cap(m.buf) > 4096 {
		m.buf = nil // do not keep a large header buffer for a broken stream
	}
	if dir == Response {
		h.respLost = true
		if h.hasRespFor {
			h.hasRespFor = false
			h.st.Unanswered++
		}
	}
}

func (h *httpFramer) Gap(dir Dir, n int64) {
	m := &h.dir[dir]
	switch m.state {
	case stDead, stSkip:
		return
	case stStart:
		// Between messages: the next bytes are anywhere in a message, and a
		// request (or its start) was lost.
	case stBody, stChunkData:
		m.gap = true
		if n < m.remaining {
			m.remaining -= n
			m.bytes += n
			return
		}
		if n == m.remaining && m.state == stBody {
			m.remaining = 0
			m.bytes += n
			h.done(dir)
			// A request whose end was lost still gets its response.
			return
		}
	case stUntilClose:
		m.gap = true
		m.bytes += n
		return
	}
	h.st.SyncLost++
	if dir == Request {
		// The request is lost, but its response will come: keep its place so
		// that the responses stay paired with their requests.
		h.pending = append(h.pending, pendingReq{start: m.start, end: m.last, bytes: m.bytes + n, method: m.method, target: m.target, gap: true})
		if len(h.pending) > h.lim.MaxPipeline {
			h.st.PipelineDrops++
			h.pending = h.pending[1:]
		}
	}
	h.lose(dir)
}

func (h *httpFramer) Tick(int64) {}

func (h *httpFramer) Close(t int64) {
	m := &h.dir[Response]
	if m.state == stUntilClose {
		h.done(Response)
	}
	if h.hasRespFor {
		h.st.Unanswered++
		h.hasRespFor = false
	}
	h.st.Unanswered += uint64(len(h.pending))
	h.pending = nil
	if h.dir[Request].state == stHeader || h.dir[Request].state == stBody {
		h.st.Unanswered++
	}
}
