// Package accesslog parses web-server access log lines written with a
// configurable nginx `log_format` or Apache `LogFormat`, for the response time
// of every request (nginx `$request_time`, Apache `%D`, `%T`, `%{ms}T`,
// `%{us}T`). It is pure: a compiled Format parses a line into an Entry without
// I/O.
//
// Timestamps: nginx stamps a line when the request ends (`$time_local`,
// `$time_iso8601`, or `$msec` to the millisecond), Apache when it was received
// (`%t`); the other end is derived from the response time, so that the
// duration is exactly the logged one whatever the timestamp's resolution.
package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Style is the format language.
type Style uint8

const (
	Nginx Style = iota
	Apache
)

// Presets are the formats a configuration can name.
var Presets = map[string]struct {
	Style  Style
	Format string
}{
	// nginx's "combined" plus $request_time.
	"nginx_timed": {Nginx, `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time`},
	// Apache's "combined" plus %D (microseconds).
	"apache_timed": {Apache, `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i" %D`},
}

// Field is what a variable of the format carries.
type Field uint8

const (
	fIgnore Field = iota
	fRemoteAddr
	fTimeLocal   // [02/Jan/2006:15:04:05 -0700], with or without the brackets
	fTimeISO     // 2006-01-02T15:04:05-07:00
	fMsec        // seconds.milliseconds since the epoch
	fRequestLine // GET /path?q HTTP/1.1
	fMethod
	fURI  // path and query
	fPath // path only
	fQuery
	fStatus
	fBytes
	fDurSeconds // decimal seconds
	fDurMillis
	fDurMicros
	fServerName
	fServerPort
	fServerAddr
	fIsArgs // nginx $is_args: "?" or nothing
)

type token struct {
	literal string // when field is fLiteral (field == 0 and literal != "")
	field   Field
	isVar   bool
}

// Format is a compiled log format.
type Format struct {
	style  Style
	tokens []token
	// startStamped: the line's timestamp is the request's start (Apache %t);
	// else its end (nginx).
	startStamped bool
	hasDuration  bool
	hasTime      bool
}

var nginxVars = map[string]Field{
	"remote_addr": fRemoteAddr, "time_local": fTimeLocal, "time_iso8601": fTimeISO, "msec": fMsec,
	"request": fRequestLine, "request_method": fMethod, "request_uri": fURI, "uri": fPath, "document_uri": fPath,
	"args": fQuery, "query_string": fQuery, "status": fStatus, "body_bytes_sent": fBytes, "bytes_sent": fBytes,
	"request_time": fDurSeconds, "server_name": fServerName, "host": fServerName, "server_port": fServerPort,
	"server_addr": fServerAddr, "is_args": fIsArgs,
}

// Compile compiles a format written in style.
func Compile(style Style, format string) (*Format, error) {
	c := &formatCompiler{f: &Format{style: style}}
	s := format
	for i := 0; i < len(s); {
		ch := s[i]
		var err error
		switch {
		case style == Nginx && ch == '$':
			i, err = c.nginxVar(s, i)
		case style == Apache && ch == '%':
			i, err = c.apacheDirective(s, i)
		case style == Apache && ch == '\\' && i+1 < len(s):
			c.lit.WriteByte(s[i+1])
			i += 2
		default:
			c.lit.WriteByte(ch)
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	c.flush()
	if !c.f.hasDuration {
		return nil, errors.New("accesslog: the format has no response time ($request_time, %D or %T)")
	}
	if !c.f.hasTime {
		return nil, errors.New("accesslog: the format has no timestamp ($time_local, $time_iso8601, $msec or %t)")
	}
	return c.f, nil
}

// formatCompiler builds a Format's tokens: literal text between variables.
type formatCompiler struct {
	f   *Format
	lit strings.Builder
}

// flush ends the literal being read, if any.
func (c *formatCompiler) flush() {
	if c.lit.Len() > 0 {
		c.f.tokens = append(c.f.tokens, token{literal: c.lit.String()})
		c.lit.Reset()
	}
}

// addVar adds a variable field after the literal before it.
func (c *formatCompiler) addVar(fd Field) error {
	c.flush()
	f := c.f
	n := len(f.tokens)
	// A path directly followed by the query (Apache %U%q, nginx
	// $uri$is_args$args) is one URI: the query starts at '?'.
	if n > 0 && f.tokens[n-1].isVar && f.tokens[n-1].field == fPath && (fd == fIsArgs || fd == fQuery) {
		if fd == fQuery {
			f.tokens[n-1].field = fURI
		}
		return nil
	}
	if fd == fIsArgs {
		fd = fIgnore
	}
	if n > 0 && f.tokens[n-1].isVar {
		return errors.New("two variables with nothing between them cannot be told apart")
	}
	f.tokens = append(f.tokens, token{field: fd, isVar: true})
	switch fd {
	case fDurSeconds, fDurMillis, fDurMicros:
		f.hasDuration = true
	case fTimeLocal, fTimeISO, fMsec:
		f.hasTime = true
	}
	return nil
}

// nginxVar reads the $name or ${name} at s[i] and returns the index after it.
func (c *formatCompiler) nginxVar(s string, i int) (int, error) {
	j := i + 1
	brace := j < len(s) && s[j] == '{'
	if brace {
		j++
	}
	k := j
	for k < len(s) && (s[k] == '_' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= '0' && s[k] <= '9') {
		k++
	}
	if k == j {
		return 0, fmt.Errorf("accesslog: `$` without a variable name at byte %d", i)
	}
	name := s[j:k]
	if brace {
		if k >= len(s) || s[k] != '}' {
			return 0, fmt.Errorf("accesslog: unclosed ${ at byte %d", i)
		}
		k++
	}
	if err := c.addVar(nginxVars[name]); err != nil {
		return 0, fmt.Errorf("accesslog: $%s: %w", name, err)
	}
	return k, nil
}

// apacheDirective reads the %x, %>x or %{arg}x at s[i] (or the %% escape)
// and returns the index after it.
func (c *formatCompiler) apacheDirective(s string, i int) (int, error) {
	j := i + 1
	arg := ""
	if j < len(s) && s[j] == '>' || j < len(s) && s[j] == '<' {
		j++
	}
	if j < len(s) && s[j] == '{' {
		end := strings.IndexByte(s[j:], '}')
		if end < 0 {
			return 0, fmt.Errorf("accesslog: unclosed %%{ at byte %d", i)
		}
		arg = s[j+1 : j+end]
		j += end + 1
	}
	if j >= len(s) {
		return 0, fmt.Errorf("accesslog: `%%` at the end of the format")
	}
	if s[j] == '%' {
		c.lit.WriteByte('%')
		return j + 1, nil
	}
	fd, err := apacheField(s[j], arg)
	if err != nil {
		return 0, err
	}
	if fd == fTimeLocal {
		c.f.startStamped = true
	}
	if err := c.addVar(fd); err != nil {
		return 0, fmt.Errorf("accesslog: %%%c: %w", s[j], err)
	}
	return j + 1, nil
}

func apacheField(c byte, arg string) (Field, error) {
	switch c {
	case 'h', 'a':
		return fRemoteAddr, nil
	case 't':
		if arg != "" {
			return 0, fmt.Errorf("accesslog: %%{%s}t is not supported; use %%t", arg)
		}
		return fTimeLocal, nil
	case 'r':
		return fRequestLine, nil
	case 'm':
		return fMethod, nil
	case 'U':
		return fPath, nil
	case 'q':
		return fQuery, nil
	case 's':
		return fStatus, nil
	case 'b', 'B', 'O', 'I':
		return fBytes, nil
	case 'D':
		return fDurMicros, nil
	case 'T':
		switch arg {
		case "", "s":
			return fDurSeconds, nil
		case "ms":
			return fDurMillis, nil
		case "us":
			return fDurMicros, nil
		}
		return 0, fmt.Errorf("accesslog: %%{%s}T: want s, ms or us", arg)
	case 'v', 'V':
		return fServerName, nil
	case 'p':
		return fServerPort, nil
	case 'A':
		return fServerAddr, nil
	case 'l', 'u', 'i', 'o', 'e', 'n', 'C', 'f', 'H', 'k', 'L', 'P', 'R', 'X':
		return fIgnore, nil
	}
	return 0, fmt.Errorf("accesslog: unknown directive %%%c", c)
}

// Entry is one parsed line.
type Entry struct {
	Start, End int64 // ns since the epoch
	Method     string
	Path       string // without the query
	Query      string
	Protocol   string // e.g. HTTP/1.1
	Status     int
	Bytes      int64
	Remote     string
	ServerName string
	ServerAddr string
	ServerPort int
}

// ParseError says why a line was not parsed.
type ParseError struct{ Msg string }

func (e *ParseError) Error() string { return "accesslog: " + e.Msg }

func perr(format string, args ...any) error { return &ParseError{fmt.Sprintf(format, args...)} }

// Parse parses one line (without its newline) into e.
func (f *Format) Parse(line []byte, e *Entry) error {
	*e = Entry{}
	line = bytes.TrimRight(line, "\r\n")
	var stamp int64
	var dur int64 = -1
	for i, t := range f.tokens {
		if !t.isVar {
			if !bytes.HasPrefix(line, []byte(t.literal)) {
				return perr("expected %q", t.literal)
			}
			line = line[len(t.literal):]
			continue
		}
		// The value runs to the next literal (or the end of the line).
		var v []byte
		if t.field == fTimeLocal && len(line) > 0 && line[0] == '[' {
			// Apache's %t is bracketed and holds a space.
			end := bytes.IndexByte(line, ']')
			if end < 0 {
				return perr("unclosed [ in a time")
			}
			v, line = line[:end+1], line[end+1:]
		} else if i+1 < len(f.tokens) {
			next := f.tokens[i+1].literal
			quoted := next != "" && next[0] == '"'
			var end int
			if quoted {
				end = indexUnescapedQuote(line, next)
			} else {
				end = bytes.Index(line, []byte(next))
			}
			if end < 0 {
				return perr("expected %q after a value", next)
			}
			v, line = line[:end], line[end:]
		} else {
			v, line = line, nil
		}
		if err := f.set(t.field, v, e, &stamp, &dur); err != nil {
			return err
		}
	}
	if len(line) > 0 {
		return perr("unexpected trailing text")
	}
	if dur < 0 {
		return perr("no response time")
	}
	if stamp == 0 {
		return perr("no timestamp")
	}
	if f.startStamped {
		e.Start, e.End = stamp, stamp+dur
	} else {
		e.Start, e.End = stamp-dur, stamp
	}
	return nil
}

// indexUnescapedQuote finds next (which starts with a quote) in line, skipping
// quotes escaped with a backslash (as both servers write them).
func indexUnescapedQuote(line []byte, next string) int {
	from := 0
	for {
		i := bytes.Index(line[from:], []byte(next))
		if i < 0 {
			return -1
		}
		j := from + i
		bs := 0
		for k := j - 1; k >= 0 && line[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return j
		}
		from = j + 1
	}
}

func (f *Format) set(fd Field, v []byte, e *Entry, stamp, dur *int64) error {
	dash := len(v) == 1 && v[0] == '-'
	switch fd {
	case fRemoteAddr:
		e.Remote = string(v)
	case fTimeLocal:
		v = bytes.TrimSuffix(bytes.TrimPrefix(v, []byte("[")), []byte("]"))
		t, err := time.Parse("02/Jan/2006:15:04:05 -0700", string(v))
		if err != nil {
			return perr("bad time %q", v)
		}
		if *stamp == 0 {
			*stamp = t.UnixNano()
		}
	case fTimeISO:
		t, err := time.Parse(time.RFC3339, string(v))
		if err != nil {
			return perr("bad time %q", v)
		}
		if *stamp == 0 {
			*stamp = t.UnixNano()
		}
	case fMsec:
		ns, ok := decimal(v, 1e9)
		if !ok {
			return perr("bad msec %q", v)
		}
		*stamp = ns // the most precise stamp wins
	case fRequestLine:
		parts := bytes.Split(v, []byte(" "))
		if len(parts) < 2 || len(parts) > 3 || len(parts[0]) == 0 {
			return perr("bad request line %q", v)
		}
		e.Method = string(parts[0])
		setURI(e, parts[1])
		if len(parts) == 3 {
			e.Protocol = string(parts[2])
		}
	case fMethod:
		e.Method = string(v)
	case fURI:
		setURI(e, v)
	case fPath:
		e.Path = string(v)
	case fQuery:
		if !dash {
			e.Query = strings.TrimPrefix(string(v), "?")
		}
	case fStatus:
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 100 || n > 999 {
			return perr("bad status %q", v)
		}
		e.Status = n
	case fBytes:
		if !dash {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return perr("bad byte count %q", v)
			}
			e.Bytes = n
		}
	case fDurSeconds, fDurMillis, fDurMicros:
		unit := map[Field]int64{fDurSeconds: 1e9, fDurMillis: 1e6, fDurMicros: 1e3}[fd]
		ns, ok := decimal(v, unit)
		if !ok {
			return perr("bad response time %q", v)
		}
		*dur = ns
	case fServerName:
		e.ServerName = string(v)
	case fServerAddr:
		e.ServerAddr = string(v)
	case fServerPort:
		n, err := strconv.Atoi(string(v))
		if err == nil && n > 0 && n < 65536 {
			e.ServerPort = n
		}
	}
	return nil
}

func setURI(e *Entry, v []byte) {
	if q := bytes.IndexByte(v, '?'); q >= 0 {
		e.Path, e.Query = string(v[:q]), string(v[q+1:])
	} else {
		e.Path = string(v)
	}
}

// decimal parses a non-negative decimal number of units into nanoseconds
// (unit is the nanoseconds in one), exactly, without floating point.
func decimal(v []byte, unit int64) (int64, bool) {
	if len(v) == 0 || len(v) > 24 {
		return 0, false
	}
	intPart, frac := v, []byte(nil)
	if d := bytes.IndexByte(v, '.'); d >= 0 {
		intPart, frac = v[:d], v[d+1:]
	}
	if len(intPart) == 0 && len(frac) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range intPart {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > (1<<62)/unit {
			return 0, false
		}
	}
	n *= unit
	scale := unit
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, false
		}
		scale /= 10
		n += int64(c-'0') * scale
	}
	return n, true
}
