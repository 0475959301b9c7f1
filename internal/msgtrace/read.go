package msgtrace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

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
// Read streams: its memory is the trace itself plus one buffer of MaxLineLen bytes,
// and a line whose names and ids were seen before costs no allocation.
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
	// The buffer holds the longest allowed line and its newline, so ReadSlice can
	// return every line in place and ErrBufferFull means exactly "line too long".
	in := bufio.NewReaderSize(r, MaxLineLen+1)
	builder := causal.NewTraceBuilder()
	if st, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if info, err := st.Stat(); err == nil && info.Mode().IsRegular() {
			builder.Grow(int(min(info.Size(), 1<<36) / typicalLineLen))
		}
	}
	for lineNo := 1; ; lineNo++ {
		line, err := in.ReadSlice('\n')
		switch err {
		case nil, io.EOF:
		case bufio.ErrBufferFull:
			return nil, &ParseError{name, lineNo, fmt.Sprintf("line longer than %d bytes", MaxLineLen)}
		default:
			return nil, fmt.Errorf("%s: reading line %d: %w", name, lineNo, err)
		}
		if msg := parseLine(line, builder, !opt.SkipPathIDs); msg != "" {
			return nil, &ParseError{name, lineNo, msg}
		}
		if err == io.EOF {
			return builder.Trace(), nil
		}
	}
}

// parseLine adds the message on line, if any, to builder. It returns "" on success
// and an error message otherwise, so that the common path builds no error value.
func parseLine(line []byte, builder *causal.TraceBuilder, withPaths bool) string {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	// All trailing CRs go, not just one: a last column ending in CR could not be
	// written back distinguishably from a CRLF line ending.
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || line[0] == '#' || isBlank(line) {
		return ""
	}

	var fields [6][]byte
	n := 0
	for rest := line; ; n++ {
		if n == len(fields) {
			return fmt.Sprintf("too many columns: %d, want 5 or 6", bytes.Count(line, []byte{'\t'})+1)
		}
		tab := bytes.IndexByte(rest, '\t')
		if tab < 0 {
			fields[n] = rest
			n++
			break
		}
		fields[n], rest = rest[:tab], rest[tab+1:]
	}
	if n < 5 {
		return fmt.Sprintf("truncated line: %d columns, want 5 or 6", n)
	}
	for i, f := range fields[:n] {
		if len(f) == 0 {
			return fmt.Sprintf("empty %s (column %d)", columnNames[i], i+1)
		}
	}

	time, msg := parseTimestamp(fields[0])
	if msg != "" {
		return fmt.Sprintf("bad timestamp %s: %s", quote(fields[0]), msg)
	}
	op, ok := parseOp(fields[1])
	if !ok {
		return fmt.Sprintf("unknown operation %s, want CALL_SENT, RET_SENT or MSG_SENT", quote(fields[1]))
	}
	m := causal.Message{
		Time:     time,
		Op:       op,
		Sender:   builder.Node(fields[2]),
		Receiver: builder.Node(fields[3]),
		CallID:   builder.CallID(fields[4]),
	}
	if n == 6 && withPaths {
		m.PathID = builder.PathID(fields[5])
	}
	builder.Add(m)
	return ""
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

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isNonFinite reports whether b spells NaN or an infinity, as strconv.ParseFloat
// would accept them, so that the error can say why such a timestamp is refused.
func isNonFinite(b []byte) bool {
	s := strings.TrimLeft(string(b), "+-")
	return strings.EqualFold(s, "nan") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity")
}
