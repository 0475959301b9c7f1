// Package msgtrace reads and writes message traces, the text format in which
// tierscope takes its input (docs/formats.md §1). The format follows the message traces
// of paper 001, Aguilera et al., "Performance debugging for distributed systems of
// black boxes" (SOSP 2003), §6.5: one line per message with a timestamp, sender,
// receiver and call id, extended here with the operation and an optional
// ground-truth path id.
//
//	# timestamp	operation	sender	receiver	id	[path]
//	1047680084.482205	CALL_SENT	nodeA	nodeB	id37
//	1047680084.483575	RET_SENT	nodeB	nodeA	id37
//	1047680084.490000	MSG_SENT	nodeB	nodeC	-
//
// Columns are separated by single tabs; there are 5 or 6 and none may be empty.
// The operation is CALL_SENT, RET_SENT or MSG_SENT. Sender and receiver are node
// names of any characters but tab and newline. An id or path of "-", or an absent
// path column, means none. Lines starting with '#' and lines of only spaces and
// tabs are ignored; carriage returns at the end of a line are stripped, so CRLF
// files read the same as LF files. Lines may be out of order: [Read] sorts
// messages by time, stably, so messages with equal timestamps keep their file
// order. [Write] omits the path column when no message has a path id.
//
// Timestamps are seconds since the Unix epoch and are parsed into int64
// nanoseconds with exact integer arithmetic, never through a float64: a float64
// holds only about 16 significant digits, which at today's epoch seconds is a
// quarter of a microsecond, and would make round trips lossy. Digits beyond the
// ninth after the point are truncated (not rounded), so a time never moves into
// the next nanosecond. An exponent ("1.047e9") is accepted and evaluated the same
// exact way. Signs, NaN, infinities and values beyond the int64 range
// (9223372036.854775807 s) are rejected. [Write] prints every timestamp with
// exactly nine fraction digits, so a written trace reads back identically.
//
// A line may hold at most [MaxLineLen] bytes before its newline. The cap bounds
// the reader's memory whatever the input is (a binary file, a missing newline in a
// multi-gigabyte stream) and is far beyond any legitimate line.
//
// Errors in the input are reported as [*ParseError], whose message is
// "FILE:LINE: MSG" so that a command can print it as it is.
package msgtrace
