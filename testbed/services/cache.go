package services

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// Cache limits.
const (
	MaxCacheKeys   = 100000 // a SET of a new key beyond this evicts an arbitrary one
	maxCacheArgs   = 16
	maxCacheBulk   = 1 << 20
	cacheIdle      = 2 * time.Minute // a client connection idle this long is closed
	cachePoolConns = 64              // idle connections a client keeps
)

// cacheValue is what SET stores: the size of a small cached object.
var cacheValue = strings.Repeat("v", 64)

// Cache is an in-memory key-value store speaking a subset of the Redis protocol
// (RESP2 arrays of bulk strings: PING, GET, SET, DEL) over TCP, so that a cache
// call is a real round trip on a real socket. Like the queue it is a black box
// without spans: the spans are its clients'.
type Cache struct {
	mu     sync.Mutex
	data   map[string]string
	conns  map[net.Conn]struct{}
	ln     net.Listener
	closed bool
	wg     sync.WaitGroup
}

// NewCache makes an empty cache.
func NewCache() *Cache {
	return &Cache{data: map[string]string{}, conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on ln until Close.
func (c *Cache) Serve(ln net.Listener) {
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				conn.Close()
				return
			}
			c.conns[conn] = struct{}{}
			c.wg.Add(1)
			c.mu.Unlock()
			go func() {
				defer c.wg.Done()
				c.serveConn(conn)
				c.mu.Lock()
				delete(c.conns, conn)
				c.mu.Unlock()
			}()
		}
	}()
}

// Close stops accepting, drops every connection and waits for their handlers.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	var err error
	if c.ln != nil {
		err = c.ln.Close()
	}
	for conn := range c.conns {
		conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
	return err
}

// Len is the number of keys stored.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.data)
}

func (c *Cache) serveConn(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	w := bufio.NewWriter(conn)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(cacheIdle))
		args, err := readCommand(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					fmt.Fprintf(w, "-ERR %s\r\n", err)
					_ = w.Flush()
				}
			}
			return
		}
		c.exec(w, args)
		if err := w.Flush(); err != nil {
			return
		}
	}
}

func (c *Cache) exec(w *bufio.Writer, args []string) {
	cmd := strings.ToUpper(args[0])
	arity := map[string]int{"PING": 1, "GET": 2, "SET": 3, "DEL": -2}[cmd]
	switch {
	case arity == 0:
		fmt.Fprintf(w, "-ERR unknown command '%s'\r\n", args[0])
		return
	case arity > 0 && len(args) != arity, arity < 0 && len(args) < -arity:
		fmt.Fprintf(w, "-ERR wrong number of arguments for '%s' command\r\n", args[0])
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch cmd {
	case "PING":
		w.WriteString("+PONG\r\n")
	case "GET":
		if v, ok := c.data[args[1]]; ok {
			fmt.Fprintf(w, "$%d\r\n%s\r\n", len(v), v)
		} else {
			w.WriteString("$-1\r\n")
		}
	case "SET":
		if _, ok := c.data[args[1]]; !ok && len(c.data) >= MaxCacheKeys {
			for k := range c.data {
				delete(c.data, k)
				break
			}
		}
		c.data[args[1]] = args[2]
		w.WriteString("+OK\r\n")
	case "DEL":
		n := 0
		for _, k := range args[1:] {
			if _, ok := c.data[k]; ok {
				delete(c.data, k)
				n++
			}
		}
		fmt.Fprintf(w, ":%d\r\n", n)
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readHeader(r, '*')
	if err != nil {
		return nil, err
	}
	if n < 1 || n > maxCacheArgs {
		return nil, fmt.Errorf("protocol error: %d arguments", n)
	}
	args := make([]string, n)
	for i := range args {
		size, err := readHeader(r, '$')
		if err != nil {
			return nil, err
		}
		if size < 0 || size > maxCacheBulk {
			return nil, fmt.Errorf("protocol error: bulk of %d bytes", size)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[size] != '\r' || buf[size+1] != '\n' {
			return nil, errors.New("protocol error: bulk not terminated by CRLF")
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// readHeader reads "<prefix><int>\r\n".
func readHeader(r *bufio.Reader, prefix byte) (int, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, err
	}
	if len(line) < 2 || line[0] != prefix {
		return 0, fmt.Errorf("protocol error: expected '%c', got %q", prefix, line)
	}
	return strconv.Atoi(line[1:])
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("protocol error: line too long")
		}
		return "", err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", errors.New("protocol error: line not terminated by CRLF")
	}
	return string(line[:len(line)-2]), nil
}

// cacheClient is a tier's in-process cache client library: a small pool of
// connections and a CLIENT span per command, named by the command as Redis
// instrumentations name theirs, reported under the tier's provider or its own
// (config clients.cache).
type cacheClient struct {
	tracer trace.Tracer
	conv   conv
	system string // db.system.name
	addr   string
	host   string
	port   int
	dial   DialFunc
	idle   chan *cacheConn
}

type cacheConn struct {
	net.Conn
	r *bufio.Reader
}

func newCacheClient(t Tier, service, addr string) *cacheClient {
	c := &cacheClient{conv: conv{legacy: t.Config.Legacy(service)}, system: "redis", addr: addr,
		dial: t.dial(), idle: make(chan *cacheConn, cachePoolConns)}
	c.tracer = t.clientTracer(config.ClientCache)
	if cl, ok := t.Config.Clients[config.ClientCache]; ok {
		c.system = cl.ServiceName
	}
	c.host, c.port, _ = splitHostPort(addr)
	return c
}

// do sends one command of the op's configuration, with a key drawn from its
// template.
func (c *cacheClient) do(ctx context.Context, call config.CacheCall) error {
	tmpl, err := config.ParseArg(call.Key)
	if err != nil {
		return err
	}
	key := fmt.Sprint(tmpl.Value(rand.Int64N))
	args := []string{call.Command, key}
	if call.Command == "SET" {
		args = append(args, cacheValue)
	}
	attrs := append(c.conv.db(c.system, "", call.Command, "", call.Command+" "+key), c.conv.serverAddr(c.host, c.port)...)
	if c.conv.legacy {
		attrs = append(attrs, attribute.Int("db.redis.database_index", 0))
	} else {
		attrs = append(attrs, attribute.String("db.namespace", "0"))
	}
	ctx, span := c.tracer.Start(ctx, call.Command, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	if err := c.roundTrip(ctx, span, args); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return fmt.Errorf("cache %s %s: %w", call.Command, key, err)
	}
	return nil
}

func (c *cacheClient) roundTrip(ctx context.Context, span trace.Span, args []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(CallTimeout)
	}
	// A pooled connection the server has closed fails before any reply: then
	// once more on a fresh one, as client libraries do.
	for fresh := false; ; fresh = true {
		conn, reused, err := c.get(ctx, fresh)
		if err != nil {
			return err
		}
		span.SetAttributes(c.conv.peer(conn.RemoteAddr())...)
		_ = conn.SetDeadline(deadline)
		if _, err = io.WriteString(conn, b.String()); err == nil {
			err = readReply(conn.r)
		}
		var re replyError
		if err == nil || errors.As(err, &re) { // the server answered: the connection is fine
			c.put(conn)
			return err
		}
		conn.Close()
		if !reused || ctx.Err() != nil {
			return err
		}
	}
}

type replyError string

func (e replyError) Error() string { return string(e) }

// readReply reads and discards one reply; an error reply is a replyError.
func readReply(r *bufio.Reader) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	if line == "" {
		return errors.New("protocol error: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return nil
	case '-':
		return replyError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > maxCacheBulk {
			return fmt.Errorf("protocol error: %q", line)
		}
		if n < 0 {
			return nil // nil bulk: a miss
		}
		_, err = r.Discard(n + 2)
		return err
	default:
		return fmt.Errorf("protocol error: unexpected reply %q", line)
	}
}

// get takes an idle connection, unless fresh, else dials; reused says which.
func (c *cacheClient) get(ctx context.Context, fresh bool) (conn *cacheConn, reused bool, err error) {
	if !fresh {
		select {
		case conn := <-c.idle:
			return conn, true, nil
		default:
		}
	}
	dctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	nc, err := c.dial(dctx, "tcp", c.addr)
	if err != nil {
		return nil, false, err
	}
	return &cacheConn{Conn: nc, r: bufio.NewReader(nc)}, false, nil
}

func (c *cacheClient) put(conn *cacheConn) {
	select {
	case c.idle <- conn:
	default:
		conn.Close()
	}
}

func (c *cacheClient) close() {
	for {
		select {
		case conn := <-c.idle:
			conn.Close()
		default:
			return
		}
	}
}
