package msgtrace_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
)

// FuzzRead checks that Read never panics and that whatever it accepts survives
// Write and Read unchanged. Table indices follow first appearance in the file, which
// sorting can change, so messages are compared resolved to their strings and
// tables as sets; after one round trip the file is in time order and the written
// bytes must then be stable.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		"",
		"# timestamp\toperation\tsender\treceiver\tid\t[path]\n" +
			"1047680084.482205\tCALL_SENT\tnodeA\tnodeB\tid37\n" +
			"1047680084.483575\tRET_SENT\tnodeB\tnodeA\tid37\n" +
			"1047680084.490000\tMSG_SENT\tnodeB\tnodeC\t-\n",
		"3\tCALL_SENT\ta\tb\tc1\tp1\r\n1\tRET_SENT\tb\ta\tc1\t-\r\n\r\n2\tMSG_SENT\ta\tb\t-\n",
		"1.047e9\tCALL_SENT\ta\tb\tx\r\t-\n",
		"9223372036.8547758079\tCALL_SENT\t-\t#\tc\n",
		".5\tCALL_SENT\ta\tb\tc\n5.\tRET_SENT\tb\ta\tc",
		"1\tCALL_SENT\ta\n",
		"1\tCALL_SENT\ta\tb\tc\tp\tx\n",
		"1\tCALL_SENT\t\tb\tc\n",
		"1\tFOO\ta\tb\tc\n",
		"-1\tCALL_SENT\ta\tb\tc\n",
		"NaN\tCALL_SENT\ta\tb\tc\n",
		"1e400\tCALL_SENT\ta\tb\tc\n",
		"12x\tCALL_SENT\ta\tb\tc\n",
		" \t \n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		first, err := msgtrace.Read(bytes.NewReader(input), "fuzz")
		if err != nil {
			return
		}
		if !slices.IsSortedFunc(first.Messages, func(a, b causal.Message) int { return cmpInt64(a.Time, b.Time) }) {
			t.Fatalf("messages not sorted by time")
		}
		var written bytes.Buffer
		if err := msgtrace.Write(&written, first); err != nil {
			t.Fatalf("Write of a trace Read accepted: %v", err)
		}
		second, err := msgtrace.Read(bytes.NewReader(written.Bytes()), "fuzz")
		if err != nil {
			t.Fatalf("Read of written trace: %v\n%q", err, written.Bytes())
		}
		if !reflect.DeepEqual(rows(first), rows(second)) {
			t.Fatalf("round trip changed messages:\nfirst  %v\nsecond %v", rows(first), rows(second))
		}
		for _, tables := range [][2][]string{
			{first.Nodes, second.Nodes}, {first.CallIDs, second.CallIDs}, {first.PathIDs, second.PathIDs},
		} {
			if a, b := sorted(tables[0]), sorted(tables[1]); !slices.Equal(a, b) {
				t.Fatalf("round trip changed a table: %q became %q", a, b)
			}
		}
		var rewritten bytes.Buffer
		if err := msgtrace.Write(&rewritten, second); err != nil {
			t.Fatalf("second Write: %v", err)
		}
		if !bytes.Equal(written.Bytes(), rewritten.Bytes()) {
			t.Fatalf("second round trip changed the file:\n%q\n%q", written.Bytes(), rewritten.Bytes())
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
