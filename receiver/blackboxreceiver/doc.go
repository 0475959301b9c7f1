//go:generate go tool mdatagen metadata.yaml

// Package blackboxreceiver implements the `blackbox` receiver: spans and link
// metrics for components that emit no telemetry at all (paper 001 §6, paper
// 000 §3), from four sources: live TCP capture, message-trace files, web
// server access logs and the connection inventory of /proc. See README.md.
//
// Choices the papers leave open, recorded here:
//
//   - A captured call gives a CLIENT span from the first request byte to the
//     last response byte and a SERVER span from the last request byte to the
//     first response byte, so that the SERVER span nests in its CLIENT span
//     and encloses whatever the server did meanwhile.
//   - The call pair is known (the connection and the order of messages on it
//     are the call identifier of paper 001 §5.1.1.1): the SERVER span is the
//     child of its CLIENT span unless pair_spans is off. Which call caused
//     which is not known and is left to the causalpath processor.
//   - Nodes are named by the services map; every address of a host should map
//     to one node. "service/*" (and every unnamed address) is a pool of
//     independent clients whose calls are all roots: each call gets an
//     instance of its own.
//   - Capture loss is detected from sequence holes and from acknowledgements
//     of bytes the capture never saw; the hole is skipped and counted, and a
//     gap inside a body of known length keeps the HTTP framing.
//   - Calls from several capture points leave in the order of their ends after
//     reorder_window, so that callers never reach the pipeline before their
//     callees.
//   - Access-log durations are exact: nginx stamps the end of a request and
//     Apache its start; the other end is derived from the logged response
//     time with integer arithmetic.
//   - In the connection inventory the server end of a connection is the one
//     listening; the client's port is zeroed when it is in the kernel's
//     ephemeral range.
package blackboxreceiver // import "github.com/tierscope/tierscope/receiver/blackboxreceiver"
