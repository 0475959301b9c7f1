package causal

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
)

func zzRead(t *testing.T, path string) *Trace {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := NewTraceBuilder()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := bytes.Split(line, []byte{'\t'})
		sec, _ := strconv.ParseFloat(string(f[0][:10]), 64)
		frac, _ := strconv.ParseInt(string(f[0][11:]), 10, 64)
		op := map[string]Op{"CALL_SENT": OpCall, "RET_SENT": OpReturn, "MSG_SENT": OpMessage}[string(f[1])]
		b.Add(Message{Time: int64(sec)*1e9 + frac, Op: op, Sender: b.Node(f[2]), Receiver: b.Node(f[3]), CallID: b.CallID(f[4])})
	}
	return b.Trace()
}
