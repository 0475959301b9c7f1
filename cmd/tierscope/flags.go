package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/tierscope/tierscope/internal/inputlimit"
)

// startCPUProfile profiles the process into path until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// errHelp is returned when -h was asked for; the usage has been printed.
var errHelp = errors.New("help requested")

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: tierscope %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping -h to errHelp and every other problem to a usage
// error. Positional arguments are refused: every input is named by a flag.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard) // we print our own one-line error
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp // flag has printed the usage
	}
	if err != nil {
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (inputs are given with --in)", fs.Arg(0))
	}
	return nil
}

// input opens the file named by --in; "-" is standard input. Gzip input (a
// .csv.gz capture, a compressed span log) is read decompressed, whatever its
// name. The returned name is the one to use in error messages.
func input(path string, stdin io.Reader) (io.Reader, string, func(), error) {
	switch path {
	case "":
		return nil, "", nil, usagef("--in is required (use --in - for standard input)")
	case "-":
		r, err := maybeGunzip(stdin, "<stdin>")
		if err != nil {
			return nil, "", nil, err
		}
		return inputlimit.NewReader(r, "<stdin>", inputlimit.MaxLine), "<stdin>", func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", nil, err
	}
	r, err := maybeGunzip(f, path)
	if err != nil {
		f.Close()
		return nil, "", nil, err
	}
	return inputlimit.NewReader(r, path, inputlimit.MaxLine), path, func() { f.Close() }, nil
}

// maybeGunzip returns r decompressed when it starts with the gzip magic bytes,
// and r unchanged (nothing consumed) otherwise.
func maybeGunzip(r io.Reader, name string) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err != nil || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil // short or plain input: the reader reports what it finds
	}
	z, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%s: gzip: %w", name, err)
	}
	return z, nil
}

// readFileCapped reads a whole document named on the command line (a plan,
// gradients, a configuration, a token), refusing one over inputlimit.MaxLine:
// such documents are kilobytes.
func readFileCapped(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, inputlimit.MaxLine+1))
	if err != nil {
		return nil, err
	}
	if len(data) > inputlimit.MaxLine {
		return nil, fmt.Errorf("%s:1: larger than %d bytes", path, inputlimit.MaxLine)
	}
	return data, nil
}

// output writes to the file named by --out, or to stdout when it is empty or "-".
// The file is created only when the command succeeds, so a failed run never leaves
// a truncated result behind.
type output struct {
	path   string
	stdout io.Writer
	buf    *bufio.Writer
	tmp    *os.File
	direct *os.File // an existing non-regular file, written in place
}

func openOutput(path string, stdout io.Writer) (*output, error) {
	o := &output{path: path, stdout: stdout}
	if path == "" || path == "-" {
		o.buf = bufio.NewWriterSize(stdout, 1<<16)
		return o, nil
	}
	// A device or a pipe (/dev/null, a FIFO) is written in place: renaming a
	// temporary file over it would replace it with a regular file.
	if info, err := os.Stat(path); err == nil && !info.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		o.direct = f
		o.buf = bufio.NewWriterSize(f, 1<<16)
		return o, nil
	}
	dir, base := ".", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i+1], path[i+1:]
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file private; a result file is as readable as any other.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	o.tmp = tmp
	o.buf = bufio.NewWriterSize(tmp, 1<<16)
	return o, nil
}

func (o *output) Write(p []byte) (int, error) { return o.buf.Write(p) }

// commit flushes and, for a file, moves it into place.
func (o *output) commit() error {
	if err := o.buf.Flush(); err != nil {
		o.abort()
		return err
	}
	if o.direct != nil {
		return o.direct.Close()
	}
	if o.tmp == nil {
		return nil
	}
	if err := o.tmp.Close(); err != nil {
		os.Remove(o.tmp.Name())
		return err
	}
	return os.Rename(o.tmp.Name(), o.path)
}

// abort discards a partly written file.
func (o *output) abort() {
	if o.direct != nil {
		o.direct.Close()
	}
	if o.tmp != nil {
		o.tmp.Close()
		os.Remove(o.tmp.Name())
	}
}
