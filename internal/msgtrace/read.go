package msgtrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tierscope/tierscope/internal/causal"
)

// typicalLineLen is the length of a generated trace's line, used to size the
// message slice from a file's size: a close guess saves copying the slice as it
// grows, and a wrong one costs only what append would have done anyway.
const typicalLineLen = 55

// MaxLineLen is the longest line, in bytes before its newline, that Read accepts.
const MaxLineLen = 1 << 20

// ParseError reports malformed input at a line of a named file.
type ParseError struct {
	File string // the name given to Read
	Line int    // 1-based
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// columnNames are the columns in file order, for error messages.
var columnNames = [...]string{"timestamp", "operation", "sender", "receiver", "id", "path"}

// Read parses a message trace from r and returns it sorted by time. name identifies
// the input in errors. Malformed input yields a *ParseError; an error from r is
// returned wrapped, with the file name. An empty input gives an empty trace.
//
// Read streams: its memory is the trace itself plus a few blocks of input in
// flight, and a line whose names and ids were seen before costs no allocation.
// Blocks are parsed on all available processors and put together in input order,
// so the result, errors included, is what parsing line by line would give.
func Read(r io.Reader, name string) (*causal.Trace, error) {
	return ReadWithOptions(r, name, ReadOptions{})
}

// ReadOptions tune Read for callers that need less than the whole trace.
type ReadOptions struct {
	// SkipPathIDs leaves every message's PathID at NoID. The path column is still
	// checked for shape but its ids are not interned, which saves a third of the
	// reading time of a generated trace when no ground truth is wanted.
	SkipPathIDs bool
}

// ReadWithOptions is Read with options.
func ReadWithOptions(r io.Reader, name string, opt ReadOptions) (*causal.Trace, error) {
	return readTrace(r, name, opt, blockSize)
}

func readTrace(r io.Reader, name string, opt ReadOptions, blockSize int) (*causal.Trace, error) {
	builder := causal.NewTraceBuilder()
	if size := regularSize(r); size > 0 {
		builder.Grow(int(min(size, 1<<36) / typicalLineLen))
	}
	withPaths := !opt.SkipPathIDs
	var nodes []causal.NodeID
	err := parseBlocks(r, name, blockSize, func(b *block) error {
		nodes = b.globalNodes(builder, nodes[:0])
		for i := range b.recs {
			rec := &b.recs[i]
			m := causal.Message{Time: rec.time, Op: rec.op, Sender: nodes[rec.sender], Receiver: nodes[rec.receiver]}
			if rec.id.n > 0 {
				m.CallID = builder.CallID(b.bytes(rec.id))
			}
			if withPaths && rec.path.n > 0 {
				m.PathID = builder.PathID(b.bytes(rec.path))
			}
			builder.Add(m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return builder.Trace(), nil
}

// CallPairs is a message trace reduced to what the nesting algorithm uses: its
// call pairs (causal.FindCallPairs), the messages those discarded, and the tables
// the pairs index.
type CallPairs struct {
	Nodes    []string
	PathIDs  []string // PathIDs[0] is "", no id; only that with SkipPathIDs
	Pairs    []causal.CallPair
	Discards causal.Discards
	Messages int
	// CallOrder is the pairs' indices by call time (CallPairer.CallOrder), for
	// causal.NestInCallOrder; nil when the input had to be sorted first.
	CallOrder []int32
}

// errUnsorted stops ReadCallPairs' single pass at the first message out of time
// order.
var errUnsorted = errors.New("messages out of time order")

// ReadCallPairs reads a message trace and matches its calls with their returns as
// causal.FindCallPairs does with the given skew window, with the same pairs in the
// same order. A trace in time order, as Write and every generator produce it, is
// matched as it is parsed: the messages and their call ids are never held, only the
// calls still open, which makes it several times faster than Read followed by
// FindCallPairs. Input out of order is read again, from its start, the way Read
// does: r must then be an io.Seeker at the trace's start (a regular file), or it
// is read into memory first. Errors are Read's.
func ReadCallPairs(r io.Reader, name string, skewWindow time.Duration, opt ReadOptions) (*CallPairs, error) {
	return readCallPairs(r, name, skewWindow, opt, blockSize)
}

func readCallPairs(r io.Reader, name string, skewWindow time.Duration, opt ReadOptions, blockSize int) (*CallPairs, error) {
	seeker, start, ok := seekable(r)
	if !ok {
		data, err := io.ReadAll(r)
		if err != nil {
			// Read reports the error at its line, after the lines before it.
			return readThenPair(io.MultiReader(bytes.NewReader(data), errorReader{err}), name, skewWindow, opt, blockSize)
		}
		rd := bytes.NewReader(data)
		seeker, start, r = rd, 0, rd
	}
	builder := causal.NewTraceBuilder()
	size := regularSize(r)
	if br, ok := r.(*bytes.Reader); ok {
		size = int64(br.Len())
	}
	pairer := causal.NewCallPairer(skewWindow, int(size/typicalLineLen/2))
	withPaths := !opt.SkipPathIDs
	messages, last := 0, int64(math.MinInt64)
	var nodes []causal.NodeID
	err := parseBlocks(r, name, blockSize, func(b *block) error {
		nodes = b.globalNodes(builder, nodes[:0])
		for i := range b.recs {
			rec := &b.recs[i]
			if rec.time < last {
				return errUnsorted
			}
			last = rec.time
			var path uint32
			if withPaths && rec.path.n > 0 {
				path = builder.PathID(b.bytes(rec.path))
			}
			pairer.AddHashed(rec.time, rec.op, nodes[rec.sender], nodes[rec.receiver], b.bytes(rec.id), rec.idHash, path)
		}
		messages += len(b.recs)
		return nil
	})
	if err == errUnsorted {
		if _, err := seeker.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("%s: messages out of time order, and rewinding to read them again failed: %w", name, err)
		}
		return readThenPair(r, name, skewWindow, opt, blockSize)
	}
	if err != nil {
		return nil, err
	}
	pairs, disc := pairer.Finish()
	tables := builder.Trace()
	return &CallPairs{Nodes: tables.Nodes, PathIDs: tables.PathIDs, Pairs: pairs, Discards: disc, Messages: messages, CallOrder: pairer.CallOrder()}, nil
}

// readThenPair is ReadCallPairs by way of the whole trace, for input out of order.
func readThenPair(r io.Reader, name string, skewWindow time.Duration, opt ReadOptions, blockSize int) (*CallPairs, error) {
	tr, err := readTrace(r, name, opt, blockSize)
	if err != nil {
		return nil, err
	}
	pairs, disc := causal.FindCallPairs(tr.Messages, skewWindow)
	return &CallPairs{Nodes: tr.Nodes, PathIDs: tr.PathIDs, Pairs: pairs, Discards: disc, Messages: len(tr.Messages)}, nil
}

// seekable returns r as a Seeker and its current offset when it can go back there.
func seekable(r io.Reader) (io.Seeker, int64, bool) {
	s, ok := r.(io.Seeker)
	if !ok {
		return nil, 0, false
	}
	if f, isFile := r.(*os.File); isFile {
		if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
			return nil, 0, false // a pipe or terminal: Seek may not fail, yet cannot rewind
		}
	}
	at, err := s.Seek(0, io.SeekCurrent)
	return s, at, err == nil
}

// regularSize is the size of r when it is a regular file, else 0.
func regularSize(r io.Reader) int64 {
	if st, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if info, err := st.Stat(); err == nil && info.Mode().IsRegular() {
			return info.Size()
		}
	}
	return 0
}

type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }

// blockSize is how much input one worker parses at a time: enough that handing
// blocks over costs nothing per line, little enough that the blocks in flight
// (a few per processor) keep the reader's memory to megabytes.
const blockSize = 1 << 20

// span locates a field in a block's buffer; n == 0 means none (an id of "-", an
// absent path column), since empty fields are errors.
type span struct{ off, n uint32 }

// record is one parsed line, its names local to the block.
type record struct {
	time             int64
	idHash           uint64 // causal.IDHash of the id, found here rather than by the one goroutine that matches calls
	sender, receiver uint32 // into block.names
	id, path         span
	op               causal.Op
}

// block is a run of whole lines, parsed by one worker into records.
type block struct {
	buf      []byte
	recs     []record
	names    []string // the block's node names in order of first appearance, sharing buf
	heads    []uint64 // the first names' heads (node)
	index    map[string]uint32
	newlines int // newlines in buf: the next block's first line is this many lines on
	// The first malformed line, its number counted from 1 at the block's start.
	errLine int
	errMsg  string
	// What ends the input after this block, set by the reader: an error from r, or
	// a next line longer than MaxLineLen.
	readErr error
	tooLong bool
	done    chan struct{} // one token when parsed
}

func (b *block) bytes(s span) []byte {
	if s.n == 0 {
		return nil
	}
	return b.buf[s.off : s.off+s.n : s.off+s.n]
}

// globalNodes interns the block's names in their order of first appearance, which
// is also their order in the whole input, and returns the global ids by local index.
func (b *block) globalNodes(builder *causal.TraceBuilder, dst []causal.NodeID) []causal.NodeID {
	for _, name := range b.names {
		dst = append(dst, builder.Node(unsafe.Slice(unsafe.StringData(name), len(name))))
	}
	return dst
}

// parseBlocks reads r in blocks of whole lines, parses them on workers, and hands
// each parsed block to consume in input order, on the calling goroutine. It stops
// at the first malformed line, error from r or error from consume, and returns it;
// lines after an error are never consumed. When it returns, no goroutine it started
// touches r or a block any more.
func parseBlocks(r io.Reader, name string, blockSize int, consume func(*block) error) error {
	workers := min(runtime.GOMAXPROCS(0), 8)
	inFlight := 2*workers + 2
	var (
		work   = make(chan *block, inFlight) // to the workers
		order  = make(chan *block, inFlight) // to consume, in input order
		free   = make(chan *block, inFlight)
		quit   = make(chan struct{})
		readWG sync.WaitGroup
	)
	readWG.Add(1 + workers)
	for range workers {
		go func() {
			defer readWG.Done()
			for b := range work {
				select {
				case <-quit:
				default:
					b.parse()
				}
				b.done <- struct{}{}
			}
		}()
	}
	go func() {
		defer readWG.Done()
		readBlocks(r, blockSize, inFlight, work, order, free, quit)
	}()
	defer func() {
		close(quit)
		readWG.Wait()
	}()

	line := 1
	for b := range order {
		<-b.done
		if b.errLine > 0 {
			return &ParseError{name, line + b.errLine - 1, b.errMsg}
		}
		if err := consume(b); err != nil {
			return err
		}
		line += b.newlines
		switch {
		case b.tooLong:
			return &ParseError{name, line, fmt.Sprintf("line longer than %d bytes", MaxLineLen)}
		case b.readErr != nil:
			return fmt.Errorf("%s: reading line %d: %w", name, line, b.readErr)
		}
		free <- b
	}
	return nil
}

// readBlocks fills blocks from r, each ending at a newline (or at the end of the
// input), and sends them both to the workers and, in order, to the consumer. The
// bytes after a block's last newline are carried into the next. At most inFlight
// blocks exist, so neither send blocks; it waits only for a free block or for r.
func readBlocks(r io.Reader, blockSize, inFlight int, work, order chan<- *block, free <-chan *block, quit <-chan struct{}) {
	defer close(order)
	defer close(work)
	var carry []byte
	allocated := 0
	for {
		var b *block
		select {
		case b = <-free:
		case <-quit:
			return
		default:
			if allocated < inFlight {
				allocated++
				b = &block{index: make(map[string]uint32), done: make(chan struct{}, 1)}
			} else {
				select {
				case b = <-free:
				case <-quit:
					return
				}
			}
		}
		b.readErr, b.tooLong = nil, false
		b.buf = append(b.buf[:0], carry...)
		// Reading at least what is carried keeps a long line's copying linear.
		want := len(b.buf) + max(blockSize, len(b.buf))
		eof := false
		for empty := 0; len(b.buf) < want && !eof && b.readErr == nil; {
			if len(b.buf) == cap(b.buf) {
				// A short input costs 64 KiB, a longer one the whole block at once.
				grow := want - len(b.buf)
				if len(b.buf) < 64<<10 {
					grow = min(grow, 64<<10)
				}
				b.buf = slices.Grow(b.buf, grow)
			}
			n, err := r.Read(b.buf[len(b.buf):min(want, cap(b.buf))])
			b.buf = b.buf[:len(b.buf)+n]
			switch {
			case err == io.EOF:
				eof = true
			case err != nil:
				b.readErr = err
			case n == 0:
				if empty++; empty >= 100 {
					b.readErr = io.ErrNoProgress
				}
			default:
				empty = 0
			}
			select {
			case <-quit:
				return
			default:
			}
		}
		if !eof {
			// The line after the last newline is carried over, unless it already
			// exceeds the limit (which bufio would report before any read error).
			cut := bytes.LastIndexByte(b.buf, '\n') + 1
			switch tail := b.buf[cut:]; {
			case len(tail) > MaxLineLen:
				b.tooLong, b.readErr = true, nil
			case b.readErr == nil:
				carry = append(carry[:0], tail...)
			}
			b.buf = b.buf[:cut]
		}
		order <- b
		work <- b
		if eof || b.readErr != nil || b.tooLong {
			return
		}
	}
}

// parse turns the block's lines into records, stopping at the first malformed one.
func (b *block) parse() {
	b.recs, b.names, b.heads, b.newlines, b.errLine, b.errMsg = b.recs[:0], b.names[:0], b.heads[:0], 0, 0, ""
	if lines := len(b.buf) / typicalLineLen; cap(b.recs) < lines {
		b.recs = make([]record, 0, lines+lines/4) // one allocation for most blocks, not a doubling series
	}
	clear(b.index)
	var tabs [maxTabs]int
	for start := 0; start < len(b.buf); {
		if end, ok := b.plainLine(start, &tabs); ok {
			start = end + 1
			b.newlines++
			continue
		}
		lineNo := b.newlines + 1
		end, ntabs := scanLine(b.buf, start, &tabs)
		next := end
		if end < len(b.buf) {
			next = end + 1
			b.newlines++
		}
		var msg string
		if end-start > MaxLineLen {
			msg = fmt.Sprintf("line longer than %d bytes", MaxLineLen)
		} else {
			msg = b.parseLine(start, end, tabs[:ntabs])
		}
		if msg != "" {
			b.errLine, b.errMsg = lineNo, msg
			return
		}
		start = next
	}
}

// plainLine parses the line at start when it has Write's shape and ends in a
// newline: a timestamp of ten digits, a point and nine, an operation, then five or
// six non-empty columns and no carriage return. It appends the record and returns
// the newline's index; for anything else it appends nothing and returns false,
// and parseLine, which gives the same record for such a line, decides. It skips
// looking for tabs in the fixed-width timestamp and operation, a third of a line.
func (b *block) plainLine(start int, tabs *[maxTabs]int) (int, bool) {
	buf := b.buf
	if start+31 > len(buf) || buf[start+10] != '.' || buf[start+20] != '\t' {
		return 0, false
	}
	hi, ok1 := eightDigits(binary.LittleEndian.Uint64(buf[start:]))
	lo, ok2 := eightDigits(binary.LittleEndian.Uint64(buf[start+11:]))
	d8, d9, d19 := buf[start+8]-'0', buf[start+9]-'0', buf[start+19]-'0'
	sec := int64(hi)*100 + int64(d8)*10 + int64(d9)
	if !ok1 || !ok2 || d8 > 9 || d9 > 9 || d19 > 9 || sec >= 9223372036 {
		return 0, false
	}
	rec := record{time: sec*1e9 + int64(lo)*10 + int64(d19)}
	p := start + 21
	switch binary.LittleEndian.Uint64(buf[p:]) {
	case callSen: // "CALL_SEN", then "T\t"
		if buf[p+8] != 'T' || buf[p+9] != '\t' {
			return 0, false
		}
		rec.op, p = causal.OpCall, p+10
	case retSent, msgSent:
		if buf[p+8] != '\t' {
			return 0, false
		}
		rec.op, p = causal.OpReturn, p+9
		if buf[p-9] == 'M' {
			rec.op = causal.OpMessage
		}
	default:
		return 0, false
	}
	end, n := scanLine(buf, p, tabs)
	if end == len(buf) || end-start > MaxLineLen || buf[end-1] == '\r' || n < 2 || n > 3 {
		return 0, false
	}
	var fields [4]span
	at := p
	for i := range n {
		fields[i] = span{uint32(at), uint32(tabs[i] - at)}
		at = tabs[i] + 1
	}
	fields[n] = span{uint32(at), uint32(end - at)}
	for _, f := range fields[:n+1] {
		if f.n == 0 {
			return 0, false
		}
	}
	rec.sender, rec.receiver, rec.id = b.node(fields[0]), b.node(fields[1]), noneIfDash(b, fields[2])
	if n == 3 {
		rec.path = noneIfDash(b, fields[3])
	}
	rec.idHash = causal.IDHash(b.bytes(rec.id))
	b.recs = append(b.recs, rec)
	return end, true
}

// The operations' first eight bytes as little-endian words.
var (
	callSen = binary.LittleEndian.Uint64([]byte("CALL_SEN"))
	retSent = binary.LittleEndian.Uint64([]byte("RET_SENT"))
	msgSent = binary.LittleEndian.Uint64([]byte("MSG_SENT"))
)

// maxTabs is the most tabs scanLine records: one more than a valid line has.
const maxTabs = 6

// scanLine returns the end of the line that starts at start (its newline, or the
// end of buf) and the positions of its first tabs, up to len(tabs). It looks at
// eight bytes at a time: per line this is a handful of word operations where a
// search per field costs a call each.
func scanLine(buf []byte, start int, tabs *[maxTabs]int) (end, n int) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := start
	for ; i+8 <= len(buf); i += 8 {
		w := binary.LittleEndian.Uint64(buf[i:])
		t, l := w^('\t'*ones), w^('\n'*ones)
		// A high bit for every byte that is zero in t or l, and possibly for a
		// byte above one (a borrow), so each is checked.
		for m := ((t-ones)&^t | (l-ones)&^l) & highs; m != 0; m &= m - 1 {
			p := i + bits.TrailingZeros64(m)>>3
			switch buf[p] {
			case '\n':
				return p, n
			case '\t':
				if n < maxTabs {
					tabs[n] = p
					n++
				}
			}
		}
	}
	for ; i < len(buf); i++ {
		switch buf[i] {
		case '\n':
			return i, n
		case '\t':
			if n < maxTabs {
				tabs[n] = i
				n++
			}
		}
	}
	return len(buf), n
}

// parseLine adds the message on buf[start:end], whose first tabs are at tabs, if
// any, to the block's records. It returns "" on success and an error message
// otherwise, so that the common path builds no error value.
func (b *block) parseLine(start, end int, tabs []int) string {
	// All trailing CRs go, not just one: a last column ending in CR could not be
	// written back distinguishably from a CRLF line ending. Only CRs are cut, so
	// every tab stays inside the line.
	for end > start && b.buf[end-1] == '\r' {
		end--
	}
	line := b.buf[start:end]
	if len(line) == 0 || line[0] == '#' || isBlank(line) {
		return ""
	}
	if len(tabs) > 5 {
		return fmt.Sprintf("too many columns: %d, want 5 or 6", bytes.Count(line, []byte{'\t'})+1)
	}
	var fields [6]span
	n := len(tabs) + 1
	pos := start
	for i, tab := range tabs {
		fields[i] = span{uint32(pos), uint32(tab - pos)}
		pos = tab + 1
	}
	fields[n-1] = span{uint32(pos), uint32(end - pos)}
	if n < 5 {
		return fmt.Sprintf("truncated line: %d columns, want 5 or 6", n)
	}
	for i, f := range fields[:n] {
		if f.n == 0 {
			return fmt.Sprintf("empty %s (column %d)", columnNames[i], i+1)
		}
	}

	time, msg := parseTimestamp(b.bytes(fields[0]))
	if msg != "" {
		return fmt.Sprintf("bad timestamp %s: %s", quote(b.bytes(fields[0])), msg)
	}
	op, ok := parseOp(b.bytes(fields[1]))
	if !ok {
		return fmt.Sprintf("unknown operation %s, want CALL_SENT, RET_SENT or MSG_SENT", quote(b.bytes(fields[1])))
	}
	rec := record{time: time, op: op, sender: b.node(fields[2]), receiver: b.node(fields[3]), id: noneIfDash(b, fields[4])}
	rec.idHash = causal.IDHash(b.bytes(rec.id))
	if n == 6 {
		rec.path = noneIfDash(b, fields[5])
	}
	b.recs = append(b.recs, rec)
	return ""
}

func noneIfDash(b *block, s span) span {
	if s.n == 1 && b.buf[s.off] == '-' {
		return span{}
	}
	return s
}

// node returns the block-local index of a node name. Traces have few nodes, so a
// scan of the first ones usually finds it: by length and first eight bytes, as
// one word, and only then byte by byte.
func (b *block) node(s span) uint32 {
	name := unsafe.String(&b.buf[s.off], int(s.n)) // buf is not written while the block is parsed and consumed
	head := b.head(s)
	for i := range b.heads {
		if b.heads[i] == head && len(b.names[i]) == len(name) && (len(name) <= 8 || b.names[i][8:] == name[8:]) {
			return uint32(i)
		}
	}
	if len(b.names) > len(b.heads) {
		if i, ok := b.index[name]; ok {
			return i
		}
	}
	i := uint32(len(b.names))
	b.names = append(b.names, name)
	if len(b.heads) < scannedNodes {
		b.heads = append(b.heads, head)
	} else {
		b.index[name] = i
	}
	return i
}

// scannedNodes is how many of a block's first names node scans before it hashes.
const scannedNodes = 8

// head is the field's first eight bytes as a word, zero-padded.
func (b *block) head(s span) uint64 {
	if int(s.off)+8 <= len(b.buf) {
		w := binary.LittleEndian.Uint64(b.buf[s.off:])
		if s.n < 8 {
			w &= 1<<(8*s.n) - 1
		}
		return w
	}
	var w uint64
	for k := range min(int(s.n), 8) {
		w |= uint64(b.buf[int(s.off)+k]) << (8 * k)
	}
	return w
}

func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}

// parseOp is causal.ParseOp for a []byte; switching on string(b) does not allocate.
func parseOp(b []byte) (causal.Op, bool) {
	switch string(b) {
	case "CALL_SENT":
		return causal.OpCall, true
	case "RET_SENT":
		return causal.OpReturn, true
	case "MSG_SENT":
		return causal.OpMessage, true
	}
	return 0, false
}

// quote quotes an offending field for an error message, shortened so that a
// megabyte of garbage does not become a megabyte of error.
func quote(b []byte) string {
	const max = 64
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// pow10 holds 10^0 through 10^18, every power of ten that fits in an int64.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// maxExponent bounds the exponent we track. Any larger magnitude already puts every
// digit of a line of at most MaxLineLen bytes outside the int64 nanosecond range or
// below one nanosecond, so clamping cannot change a result.
const maxExponent = 1 << 24

// parseTimestamp parses seconds since the epoch, digits[.digits][(e|E)[+|-]digits],
// into nanoseconds. Each digit contributes digit*10^k exactly; digits finer than a
// nanosecond are dropped, which truncates. It returns "" on success and otherwise
// the reason the timestamp is bad.
func parseTimestamp(b []byte) (int64, string) {
	if ns, ok := plainTimestamp(b); ok {
		return ns, ""
	}
	return anyTimestamp(b)
}

// anyTimestamp is parseTimestamp for every form.
func anyTimestamp(b []byte) (int64, string) {
	i := 0
	negative := i < len(b) && b[i] == '-'
	if negative {
		i++
	}
	intStart := i
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	intDigits := b[intStart:i]
	var fracDigits []byte
	if i < len(b) && b[i] == '.' {
		i++
		fracStart := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		fracDigits = b[fracStart:i]
	}
	mantissaOK := len(intDigits)+len(fracDigits) > 0
	exponent := 0
	if mantissaOK && i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		expNegative := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			expNegative = b[i] == '-'
			i++
		}
		expStart := i
		for ; i < len(b) && isDigit(b[i]); i++ {
			if exponent < maxExponent {
				exponent = exponent*10 + int(b[i]-'0')
			}
		}
		if i == expStart {
			mantissaOK = false
		}
		if expNegative {
			exponent = -exponent
		}
	}
	switch {
	case !mantissaOK || i != len(b):
		if isNonFinite(b) {
			return 0, "not a finite number"
		}
		return 0, "not a decimal number"
	case negative:
		return 0, "negative"
	}

	// The first integer digit has weight 10^(len(intDigits)-1) seconds, that is
	// 10^(len(intDigits)-1+exponent+9) nanoseconds; each next digit one power less.
	power := len(intDigits) - 1 + exponent + 9
	var ns int64
	for _, digits := range [2][]byte{intDigits, fracDigits} {
		for _, c := range digits {
			if power < 0 {
				return ns, "" // the remaining digits are finer than 1 ns
			}
			if d := int64(c - '0'); d != 0 {
				if power >= len(pow10) || ns > math.MaxInt64-d*pow10[power] {
					return 0, "out of range (max 9223372036.854775807 seconds)"
				}
				ns += d * pow10[power]
			}
			power--
		}
	}
	return ns, ""
}

// plainTimestamp parses the form every writer uses, seconds of at most ten digits
// and at most nine after the point, in one pass; ok is false for anything else,
// which parseTimestamp then parses in full. Its results are the same.
func plainTimestamp(b []byte) (ns int64, ok bool) {
	// Write's own form, ten digits, a point and nine, eight digits at a time.
	if len(b) == 20 && b[10] == '.' {
		hi, ok1 := eightDigits(binary.LittleEndian.Uint64(b[0:8]))
		lo, ok2 := eightDigits(binary.LittleEndian.Uint64(b[11:19]))
		d8, d9, d19 := b[8]-'0', b[9]-'0', b[19]-'0'
		if ok1 && ok2 && d8 <= 9 && d9 <= 9 && d19 <= 9 {
			if sec := int64(hi)*100 + int64(d8)*10 + int64(d9); sec < 9223372036 {
				return sec*1e9 + int64(lo)*10 + int64(d19), true
			}
		}
	}
	var sec int64
	i := 0
	for ; i < len(b) && i < 10; i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		sec = sec*10 + int64(d)
	}
	// Below 9223372036 s any nine fraction digits still fit in an int64.
	if i == 0 || sec >= 9223372036 {
		return 0, false
	}
	if i == len(b) {
		return sec * 1e9, true
	}
	if b[i] != '.' {
		return 0, false
	}
	var frac int64
	digits := 0
	for i++; i < len(b); i++ {
		d := b[i] - '0'
		if d > 9 || digits == 9 {
			return 0, false
		}
		frac = frac*10 + int64(d)
		digits++
	}
	return sec*1e9 + frac*pow10[9-digits], true
}

// eightDigits is the value of eight ASCII digits loaded little-endian (the first
// digit in the low byte); ok is false unless all eight are digits.
func eightDigits(w uint64) (v uint64, ok bool) {
	const highs = 0x8080808080808080
	d := w - 0x3030303030303030
	// A byte under '0' borrows and sets its high bit; one over '9' does once 0x76
	// is added. The first such byte is always flagged, which is all that matters.
	if (d|(d+0x7676767676767676))&highs != 0 {
		return 0, false
	}
	d = (d*10 + d>>8) & 0x00ff00ff00ff00ff
	d = (d*100 + d>>16) & 0x0000ffff0000ffff
	return (d*10000 + d>>32) & 0xffffffff, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isNonFinite reports whether b spells NaN or an infinity, as strconv.ParseFloat
// would accept them, so that the error can say why such a timestamp is refused.
func isNonFinite(b []byte) bool {
	s := strings.TrimLeft(string(b), "+-")
	return strings.EqualFold(s, "nan") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity")
}
