package msgtrace

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/internal/causal"
)

// Write writes t as a message trace: a header comment, then one line per message
// in slice order. The path column is written only when some message has a path id
// (or when an id ends in a carriage return, which a last column could not keep).
//
// Write checks the whole trace before writing anything and refuses what the format
// cannot represent: a negative time, an unknown operation, an out-of-range index,
// an empty name or id, an id of "-", or a string containing a tab or newline.
func Write(w io.Writer, t *causal.Trace) error {
	withPath, err := checkWritable(t)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(w, 64<<10)
	header := "# timestamp\toperation\tsender\treceiver\tid\n"
	if withPath {
		header = "# timestamp\toperation\tsender\treceiver\tid\tpath\n"
	}
	if _, err := out.WriteString(header); err != nil {
		return err
	}
	line := make([]byte, 0, 256)
	for _, m := range t.Messages {
		line = appendMessage(line[:0], t, m, withPath)
		if _, err := out.Write(line); err != nil {
			return err
		}
	}
	return out.Flush()
}

func appendMessage(line []byte, t *causal.Trace, m causal.Message, withPath bool) []byte {
	line = appendTimestamp(line, m.Time)
	line = append(line, '\t')
	line = append(line, m.Op.String()...)
	line = append(line, '\t')
	line = append(line, t.Nodes[m.Sender]...)
	line = append(line, '\t')
	line = append(line, t.Nodes[m.Receiver]...)
	line = append(line, '\t')
	line = appendID(line, t.CallIDs, m.CallID)
	if withPath {
		line = append(line, '\t')
		line = appendID(line, t.PathIDs, m.PathID)
	}
	return append(line, '\n')
}

func appendID(line []byte, table []string, id uint32) []byte {
	if id == causal.NoID {
		return append(line, '-')
	}
	return append(line, table[id]...)
}

// appendTimestamp appends ns (non-negative) as seconds with exactly nine fraction
// digits, so that every nanosecond survives a round trip.
func appendTimestamp(line []byte, ns int64) []byte {
	line = strconv.AppendInt(line, ns/1e9, 10)
	line = append(line, '.')
	frac := ns % 1e9
	for div := int64(1e8); div > 0; div /= 10 {
		line = append(line, byte('0'+frac/div%10))
	}
	return line
}

// checkWritable validates t for Write and reports whether the path column is needed.
func checkWritable(t *causal.Trace) (withPath bool, err error) {
	for i, name := range t.Nodes {
		if err := checkField("node", i, name); err != nil {
			return false, err
		}
	}
	// Index 0 of the id tables stands for "none" and is never written.
	for i := 1; i < len(t.CallIDs); i++ {
		if err := checkField("call id", i, t.CallIDs[i]); err != nil {
			return false, err
		}
		// With no path column the id is last on its line, where a reader strips a
		// trailing CR; a path column of "-" keeps such an id intact.
		if strings.HasSuffix(t.CallIDs[i], "\r") {
			withPath = true
		}
	}
	for i := 1; i < len(t.PathIDs); i++ {
		if err := checkField("path id", i, t.PathIDs[i]); err != nil {
			return false, err
		}
		if strings.HasSuffix(t.PathIDs[i], "\r") {
			return false, fmt.Errorf("msgtrace: path id %d %q ends in a carriage return, which the format cannot represent", i, t.PathIDs[i])
		}
	}
	for i, m := range t.Messages {
		switch {
		case m.Time < 0:
			return false, fmt.Errorf("msgtrace: message %d: negative time %d", i, m.Time)
		case m.Op != causal.OpCall && m.Op != causal.OpReturn && m.Op != causal.OpMessage:
			return false, fmt.Errorf("msgtrace: message %d: unknown operation %v", i, m.Op)
		case m.Sender < 0 || int(m.Sender) >= len(t.Nodes):
			return false, fmt.Errorf("msgtrace: message %d: sender %d out of range", i, m.Sender)
		case m.Receiver < 0 || int(m.Receiver) >= len(t.Nodes):
			return false, fmt.Errorf("msgtrace: message %d: receiver %d out of range", i, m.Receiver)
		case m.CallID != causal.NoID && int(m.CallID) >= len(t.CallIDs):
			return false, fmt.Errorf("msgtrace: message %d: call id %d out of range", i, m.CallID)
		case m.PathID != causal.NoID && int(m.PathID) >= len(t.PathIDs):
			return false, fmt.Errorf("msgtrace: message %d: path id %d out of range", i, m.PathID)
		}
		if m.PathID != causal.NoID {
			withPath = true
		}
	}
	return withPath, nil
}

// checkField rejects a name or id that would not read back as itself: empty (an
// empty column is an error), "-" for an id (it means none), or holding a tab or
// newline (they delimit columns and lines).
func checkField(kind string, index int, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("msgtrace: %s %d is empty, which the format cannot represent", kind, index)
	case s == "-" && kind != "node":
		return fmt.Errorf("msgtrace: %s %d is %q, which the format reads as no id", kind, index, s)
	case strings.ContainsAny(s, "\t\n"):
		return fmt.Errorf("msgtrace: %s %d %q contains a tab or newline, which the format cannot represent", kind, index, s)
	}
	return nil
}
