// Package otlpjsonl reads and writes OTLP/JSON lines: one ExportTraceServiceRequest
// in OTLP/JSON per line, the format of the collector's file exporter and of its
// otlpjsonfile receiver (docs/formats.md §4).
package otlpjsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// DefaultMaxLineBytes caps one line. The file exporter writes a whole batch on one
// line, so lines of many megabytes are normal; the cap only stops a file without
// newlines from eating all memory.
const DefaultMaxLineBytes = 64 << 20

// Reader streams the requests of an OTLP/JSON lines file, one line at a time, so
// that a file larger than memory can be processed batch by batch.
type Reader struct {
	// MaxLineBytes is the longest line accepted (without its newline); zero means
	// DefaultMaxLineBytes.
	MaxLineBytes int

	br   *bufio.Reader
	name string
	line int
	buf  []byte
	err  error // sticky: after an error or EOF, Next keeps returning it
	um   ptrace.JSONUnmarshaler
}

// NewReader reads r; name is the file name used in error messages.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 1<<16), name: name}
}

// Next returns the request on the next non-blank line and that line's number
// (1-based). At the end of the input it returns io.EOF. Other errors read
// "NAME:LINE: message" and are final.
func (r *Reader) Next() (ptrace.Traces, int, error) {
	for r.err == nil {
		line, err := r.readLine()
		if err != nil {
			r.err = err
			break
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		td, err := r.um.UnmarshalTraces(line)
		if err != nil {
			r.err = fmt.Errorf("%s:%d: invalid OTLP/JSON trace request: %w", r.name, r.line, err)
			break
		}
		return td, r.line, nil
	}
	return ptrace.Traces{}, r.line, r.err
}

// readLine returns the next line without its newline; the slice is valid until the
// next call. It returns io.EOF only when no bytes are left.
func (r *Reader) readLine() ([]byte, error) {
	limit := r.MaxLineBytes
	if limit <= 0 {
		limit = DefaultMaxLineBytes
	}
	r.line++
	r.buf = r.buf[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		n := len(r.buf) + len(chunk)
		if err == nil {
			n-- // the newline does not count
		}
		if n > limit {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes (the limit)", r.name, r.line, limit)
		}
		r.buf = append(r.buf, chunk...)
		switch {
		case err == nil:
			return r.buf[:len(r.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(r.buf) == 0 {
				r.line--
				return nil, io.EOF
			}
			return r.buf, nil // last line without a newline
		default:
			return nil, fmt.Errorf("%s:%d: %w", r.name, r.line, err)
		}
	}
}

// Read reads a whole file and merges its requests into one Traces. It also returns
// the number of requests (non-blank lines) read. Use Reader to stream instead.
func Read(in io.Reader, name string) (ptrace.Traces, int, error) {
	all := ptrace.NewTraces()
	r := NewReader(in, name)
	n := 0
	for {
		td, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return all, n, nil
		}
		if err != nil {
			return ptrace.Traces{}, n, err
		}
		n++
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
}

// ReadBatches reads a whole file and returns its requests, one per line, so that
// they can be written back with the same line structure.
func ReadBatches(in io.Reader, name string) ([]ptrace.Traces, error) {
	var batches []ptrace.Traces
	r := NewReader(in, name)
	for {
		td, _, err := r.Next()
		if errors.Is(err, io.EOF) {
			return batches, nil
		}
		if err != nil {
			return nil, err
		}
		batches = append(batches, td)
	}
}

// Writer writes one request per line. It buffers: call Flush when done.
type Writer struct {
	bw *bufio.Writer
	m  ptrace.JSONMarshaler
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 1<<16)}
}

// Write marshals td as one line.
func (w *Writer) Write(td ptrace.Traces) error {
	b, err := w.m.MarshalTraces(td)
	if err != nil {
		return err
	}
	// The marshaler writes compact JSON, so the request cannot contain a newline
	// (newlines inside strings are escaped).
	if _, err := w.bw.Write(b); err != nil {
		return err
	}
	return w.bw.WriteByte('\n')
}

// Flush writes out what is buffered.
func (w *Writer) Flush() error { return w.bw.Flush() }

// WriteFile writes the batches to a new file at path, one line each.
func WriteFile(path string, batches ...ptrace.Traces) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := NewWriter(f)
	for _, td := range batches {
		if err := w.Write(td); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
