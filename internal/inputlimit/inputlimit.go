// Package inputlimit bounds what the CLI's readers accept from a file: the
// length of a line, so a file of one huge line cannot take the memory, and
// the size of a number, so an absurd value (1e308) is an error naming its
// file and line instead of an overflow to Inf or NaN far downstream.
package inputlimit

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
)

// MaxLine is the longest line the CLI reads: far above any real record, far
// below what would exhaust memory.
const MaxLine = 16 << 20

// LineTooLongError is returned by a Reader for a line over its limit.
type LineTooLongError struct {
	Name  string
	Line  int
	Limit int
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("%s:%d: line longer than %d bytes", e.Name, e.Line, e.Limit)
}

// Reader passes r through and fails once a line exceeds its limit.
type Reader struct {
	r     io.Reader
	name  string
	limit int
	line  int // 1-based line being read
	cur   int // bytes of it so far
	err   error
}

// NewReader caps the lines of r (named name in errors) at limit bytes.
func NewReader(r io.Reader, name string, limit int) *Reader {
	return &Reader{r: r, name: name, limit: limit, line: 1}
}

func (l *Reader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.cur += len(chunk)
			break
		}
		if l.cur+i > l.limit {
			l.cur += i
			break
		}
		l.line++
		l.cur = 0
		chunk = chunk[i+1:]
	}
	if l.cur > l.limit {
		l.err = &LineTooLongError{Name: l.name, Line: l.line, Limit: l.limit}
		return 0, l.err
	}
	return n, err
}

// Float parses s as a finite number within ±bound; the error says which.
func Float(s string, bound float64) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !isRange(err):
		return 0, fmt.Errorf("%q is not a number", s)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%q is not a finite number", s)
	case math.Abs(v) > bound:
		return 0, fmt.Errorf("%q is beyond ±%g", s, bound)
	}
	return v, nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
