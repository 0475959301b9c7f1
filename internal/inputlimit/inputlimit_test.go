package inputlimit

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderCapsLines(t *testing.T) {
	in := "short\n" + strings.Repeat("y", 10) + "\nok\n" + strings.Repeat("z", 11) + "\nnever\n"
	// One byte at a time and all at once: the line is counted the same.
	for _, r := range []io.Reader{strings.NewReader(in), &oneByte{strings.NewReader(in)}} {
		sc := bufio.NewScanner(NewReader(r, "f.csv", 10))
		var got []string
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		var lt *LineTooLongError
		if !errors.As(sc.Err(), &lt) || lt.Line != 4 || sc.Err().Error() != "f.csv:4: line longer than 10 bytes" {
			t.Fatalf("err %v, want f.csv:4", sc.Err())
		}
		if len(got) > 4 || len(got) > 0 && got[len(got)-1] == "never" {
			t.Errorf("read past the long line: %q", got)
		}
	}
	b, err := io.ReadAll(NewReader(strings.NewReader("a\nbb\nccc"), "x", 3))
	if err != nil || string(b) != "a\nbb\nccc" {
		t.Errorf("%q %v", b, err)
	}
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestFloat(t *testing.T) {
	for s, want := range map[string]string{
		"1e308": "beyond", "1e400": "not a finite", "NaN": "not a finite", "-Inf": "not a finite", "x": "not a number", "1e160": "beyond",
	} {
		if _, err := Float(s, 1e12); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Float(%q) = %v, want %q", s, err, want)
		}
	}
	if v, err := Float("-2.5e3", 1e12); err != nil || v != -2500 {
		t.Errorf("%v %v", v, err)
	}
}
