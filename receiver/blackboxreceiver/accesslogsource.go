package blackboxreceiver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/accesslog"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
)

// accessLogSource tails one access log: every line becomes a SERVER span of
// the configured service, with the logged response time as its duration
// (paper 000 §3: the web logs are the response-time source). It follows
// rotation (a new file at the path, or a truncated one) and bounds the length
// of a line.
type accessLogSource struct {
	cfg    *AccessLogConfig
	format *accesslog.Format
	routes []route
	node   node
	em     *emitter
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

func newAccessLogSource(cfg *AccessLogConfig, em *emitter, tb *metadata.TelemetryBuilder, logger *zap.Logger) (*accessLogSource, error) {
	format, err := cfg.compile()
	if err != nil {
		return nil, err
	}
	routes, err := compileRoutes(cfg.Routes)
	if err != nil {
		return nil, err
	}
	inst := cfg.Instance
	if inst == "" {
		inst = cfg.Service
	}
	return &accessLogSource{cfg: cfg, format: format, routes: routes, node: node{service: cfg.Service, instance: inst, named: true},
		em: em, tb: tb, logger: logger}, nil
}

func (s *accessLogSource) start() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		s.tail(ctx)
	}()
	return nil
}

func fileID(fi os.FileInfo) (uint64, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, true
	}
	return 0, false
}

// tail follows the access log until ctx ends: every poll it reads what was
// appended, turns each complete line into a span, and reopens the path when
// the file was rotated or truncated.
func (s *accessLogSource) tail(ctx context.Context) {
	poll := s.cfg.PollInterval
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	maxLine := s.cfg.MaxLineBytes
	if maxLine <= 0 {
		maxLine = 16 << 10
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	lt := &logTail{s: s, maxLine: maxLine, first: true, chunk: make([]byte, 64<<10)}
	defer lt.close()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if lt.f == nil && !lt.open() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		lt.readAppended(ctx, rng)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lt.reopenIfRotated()
	}
}

// logTail is the state of one tail of an access log: the open file, where
// reading stopped in it, and the start of a line not yet complete.
type logTail struct {
	s       *accessLogSource
	maxLine int
	chunk   []byte // read buffer

	f        *os.File
	ino      uint64
	offset   int64
	pending  []byte
	skipping bool // dropping the rest of an over-long line
	warned   bool // the unreadable-log warning was logged (it is logged once)
	first    bool // no file opened yet: start_at applies
}

// close closes the open file, if any.
func (lt *logTail) close() {
	if lt.f != nil {
		_ = lt.f.Close()
	}
}

// open opens the file at the path afresh, replacing any open one, and
// reports whether it could. Only the first file opened starts at its end
// (unless start_at is beginning); a rotated one is read from the start.
func (lt *logTail) open() bool {
	s := lt.s
	nf, err := os.Open(s.cfg.Path)
	if err != nil {
		if !lt.warned {
			s.logger.Warn("access log not readable yet; retrying", zap.String("path", s.cfg.Path), zap.Error(err))
			lt.warned = true
		}
		return false
	}
	fi, err := nf.Stat()
	if err != nil {
		_ = nf.Close()
		return false
	}
	if lt.f != nil {
		_ = lt.f.Close()
	}
	lt.f, lt.offset, lt.pending, lt.skipping = nf, 0, lt.pending[:0], false
	lt.ino, _ = fileID(fi)
	if lt.first && s.cfg.StartAt != "beginning" {
		lt.offset, _ = lt.f.Seek(0, io.SeekEnd)
	}
	lt.first = false
	return true
}

// readAppended reads the file to its current end, sending spans in batches
// of about 1000, and counts the lines read and the malformed ones.
func (lt *logTail) readAppended(ctx context.Context, rng *rand.Rand) {
	s := lt.s
	b := newBatch(rng)
	lines, bad := 0, 0
	for {
		n, err := lt.f.Read(lt.chunk)
		lt.offset += int64(n)
		l, m := lt.splitLines(b, lt.chunk[:n])
		lines, bad = lines+l, bad+m
		if b.n >= 1000 {
			s.em.sendWait(ctx, b)
			b = newBatch(rng)
		}
		if n == 0 || errors.Is(err, io.EOF) || err != nil {
			break
		}
	}
	s.tb.ReceiverBlackboxLogLines.Add(ctx, int64(lines))
	s.tb.ReceiverBlackboxLogLinesMalformed.Add(ctx, int64(bad))
	s.em.sendWait(ctx, b)
}

// splitLines turns each complete line of data, joined to the pending start
// of a line, into a span in b, and keeps the incomplete rest pending. A line
// longer than maxLine is dropped and counted malformed, blank lines are not
// counted. It returns the lines and malformed lines it completed.
func (lt *logTail) splitLines(b *batch, data []byte) (lines, bad int) {
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			if !lt.skipping {
				lt.pending = append(lt.pending, data...)
				if len(lt.pending) > lt.maxLine {
					lt.pending, lt.skipping = lt.pending[:0], true
				}
			}
			break
		}
		line := data[:nl]
		data = data[nl+1:]
		if lt.skipping {
			lt.skipping = false
			lines++
			bad++
			continue
		}
		if len(lt.pending) > 0 {
			lt.pending = append(lt.pending, line...)
			line = lt.pending
		}
		if len(line) > lt.maxLine {
			bad++
		} else if len(bytes.TrimSpace(line)) > 0 {
			if !lt.s.line(b, line) {
				bad++
			}
		} else {
			lines-- // blank lines are not lines
		}
		lines++
		lt.pending = lt.pending[:0]
	}
	return lines, bad
}

// reopenIfRotated reopens the path when another file is there, or this one
// was truncated below where reading stopped.
func (lt *logTail) reopenIfRotated() {
	if fi, err := os.Stat(lt.s.cfg.Path); err == nil {
		id, ok := fileID(fi)
		if (ok && id != lt.ino) || fi.Size() < lt.offset {
			lt.open()
		}
	}
}

// line turns one log line into a span; false for a malformed line.
func (s *accessLogSource) line(b *batch, line []byte) bool {
	var e accesslog.Entry
	if err := s.format.Parse(line, &e); err != nil {
		return false
	}
	route := matchRoute(s.routes, e.Path)
	name := e.Method
	switch {
	case route != "":
		name += " " + route
	case e.Path != "":
		name += " " + e.Path
	}
	if name == "" {
		name = "HTTP"
	}
	sp := b.span(s.node, name, ptrace.SpanKindServer, e.Start, e.End)
	a := sp.Attributes()
	a.PutStr(attrSource, "accesslog")
	if e.Method != "" {
		a.PutStr("http.request.method", e.Method)
	}
	if e.Path != "" {
		a.PutStr("url.path", e.Path)
	}
	if e.Query != "" {
		a.PutStr("url.query", e.Query)
	}
	if route != "" {
		a.PutStr("http.route", route)
	}
	if e.Status > 0 {
		a.PutInt("http.response.status_code", int64(e.Status))
		if e.Status >= 500 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	if e.Remote != "" && e.Remote != "-" {
		a.PutStr("client.address", e.Remote)
	}
	if e.ServerName != "" && e.ServerName != "-" {
		a.PutStr("server.address", e.ServerName)
	} else if e.ServerAddr != "" {
		a.PutStr("server.address", e.ServerAddr)
	}
	if e.ServerPort > 0 {
		a.PutInt("server.port", int64(e.ServerPort))
	}
	a.PutInt("http.response.body.size", e.Bytes)
	if e.Protocol != "" {
		a.PutStr("network.protocol.version", trimHTTP(e.Protocol))
	}
	return true
}

func trimHTTP(p string) string {
	if len(p) > 5 && p[:5] == "HTTP/" {
		return p[5:]
	}
	return p
}

func (s *accessLogSource) shutdown(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
