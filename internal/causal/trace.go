package causal

import "fmt"

// Op is the operation of one traced message (docs/formats.md §1).
type Op uint8

const (
	// OpCall is CALL_SENT: the call of an RPC.
	OpCall Op = iota + 1
	// OpReturn is RET_SENT: the return of an RPC.
	OpReturn
	// OpMessage is MSG_SENT: a one-way message, used only by the convolution algorithm.
	OpMessage
)

// String returns the operation's name as written in a message trace.
func (o Op) String() string {
	switch o {
	case OpCall:
		return "CALL_SENT"
	case OpReturn:
		return "RET_SENT"
	case OpMessage:
		return "MSG_SENT"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp maps an operation name to its Op; ok is false for an unknown name.
func ParseOp(s string) (op Op, ok bool) {
	switch s {
	case "CALL_SENT":
		return OpCall, true
	case "RET_SENT":
		return OpReturn, true
	case "MSG_SENT":
		return OpMessage, true
	}
	return 0, false
}

// NodeID indexes Trace.Nodes.
type NodeID int32

// NoID is the CallID and PathID of a message that has none ("-" or an absent column).
const NoID = 0

// Message is one traced message. Strings are interned in the owning Trace so that a
// message is a fixed 32 bytes and a trace of millions of messages stays compact.
type Message struct {
	Time     int64  // nanoseconds since the Unix epoch
	Sender   NodeID // index into Trace.Nodes
	Receiver NodeID // index into Trace.Nodes
	CallID   uint32 // index into Trace.CallIDs; NoID when absent
	PathID   uint32 // index into Trace.PathIDs (ground truth); NoID when absent
	Op       Op
}

// Trace is a message trace with interned node names, call ids and path ids.
// CallIDs[0] and PathIDs[0] are the empty string, standing for "no id".
type Trace struct {
	Nodes    []string
	CallIDs  []string
	PathIDs  []string
	Messages []Message
}
