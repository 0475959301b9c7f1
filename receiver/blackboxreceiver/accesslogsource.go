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
	var (
		f        *os.File
		ino      uint64
		offset   int64
		pending  []byte
		skipping bool // dropping the rest of an over-long line
		warned   bool
		first    = true
	)
	chunk := make([]byte, 64<<10)
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	open := func() bool {
		nf, err := os.Open(s.cfg.Path)
		if err != nil {
			if !warned {
				s.logger.Warn("access log not readable yet; retrying", zap.String("path", s.cfg.Path), zap.Error(err))
				warned = true
			}
			return false
		}
		fi, err := nf.Stat()
		if err != nil {
			_ = nf.Close()
			return false
		}
		if f != nil {
			_ = f.Close()
		}
		f, offset, pending, skipping = nf, 0, pending[:0], false
		ino, _ = fileID(fi)
		if first && s.cfg.StartAt != "beginning" {
			offset, _ = f.Seek(0, io.SeekEnd)
		}
		first = false
		return true
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if f == nil && !open() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			continue
		}
		b := newBatch(rng)
		lines, bad := 0, 0
		for {
			n, err := f.Read(chunk)
			offset += int64(n)
			data := chunk[:n]
			for len(data) > 0 {
				nl := bytes.IndexByte(data, '\n')
				if nl < 0 {
					if !skipping {
						pending = append(pending, data...)
						if len(pending) > maxLine {
							pending, skipping = pending[:0], true
						}
					}
					break
				}
				line := data[:nl]
				data = data[nl+1:]
				if skipping {
					skipping = false
					lines++
					bad++
					continue
				}
				if len(pending) > 0 {
					pending = append(pending, line...)
					line = pending
				}
				if len(line) > maxLine {
					bad++
				} else if len(bytes.TrimSpace(line)) > 0 {
					if !s.line(b, line) {
						bad++
					}
				} else {
					lines-- // blank lines are not lines
				}
				lines++
				pending = pending[:0]
			}
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Rotation: another file at the path, or this one truncated.
		if fi, err := os.Stat(s.cfg.Path); err == nil {
			id, ok := fileID(fi)
			if (ok && id != ino) || fi.Size() < offset {
				open()
			}
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
