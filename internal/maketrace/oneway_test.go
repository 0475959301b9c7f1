package maketrace

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
)

func hasOneWay(cfg *Config) bool {
	var walk func(c *Call) bool
	walk = func(c *Call) bool {
		if c.OneWay {
			return true
		}
		return slices.ContainsFunc(c.Calls, walk)
	}
	for _, t := range cfg.Tracelets {
		if walk(t.Root) {
			return true
		}
	}
	return false
}

// onewayChains groups a one-way trace by path id, in time order, checking that
// every message is a MSG_SENT without a call id.
func onewayChains(t *testing.T, tr *causal.Trace) map[uint32][]causal.Message {
	t.Helper()
	out := map[uint32][]causal.Message{}
	for _, m := range tr.Messages {
		if m.Op != causal.OpMessage || m.CallID != causal.NoID || m.PathID == causal.NoID {
			t.Fatalf("message %+v: want MSG_SENT with a path id and no call id", m)
		}
		out[m.PathID] = append(out[m.PathID], m)
	}
	return out
}

// checkChain matches a run, in time order, against the tracelet whose root it
// starts with: a chain of one-way calls, each sent by the previous callee to one
// of its call's callees, never before the message that caused it.
func checkChain(t *testing.T, cfg *Config, nodes []string, msgs []causal.Message) {
	t.Helper()
	var c *Call
	for i := range cfg.Tracelets {
		r := cfg.Tracelets[i].Root
		if r.From == nodes[msgs[0].Sender] && slices.Contains(r.To, nodes[msgs[0].Receiver]) {
			c = r
		}
	}
	for i, m := range msgs {
		if c == nil || !c.OneWay || !slices.Contains(c.To, nodes[m.Receiver]) {
			t.Fatalf("run %d: message %d %s→%s matches no one-way chain of the config", m.PathID, i, nodes[m.Sender], nodes[m.Receiver])
		}
		if i > 0 && (m.Sender != msgs[i-1].Receiver || m.Time < msgs[i-1].Time) {
			t.Fatalf("run %d: message %d %+v does not follow %+v", m.PathID, i, m, msgs[i-1])
		}
		c = nil
		if len(cfgCalls(cfg, msgs, i, nodes)) == 1 {
			c = cfgCalls(cfg, msgs, i, nodes)[0]
		}
	}
	if c != nil {
		t.Fatalf("run %d ends before its chain", msgs[0].PathID)
	}
}

// cfgCalls returns the calls that follow message i of a run: the children of
// the call that message i made, found by walking the run's tracelet.
func cfgCalls(cfg *Config, msgs []causal.Message, i int, nodes []string) []*Call {
	for k := range cfg.Tracelets {
		c := cfg.Tracelets[k].Root
		if c.From != nodes[msgs[0].Sender] || !slices.Contains(c.To, nodes[msgs[0].Receiver]) {
			continue
		}
		for j := 1; j <= i; j++ {
			if len(c.Calls) != 1 {
				return nil
			}
			c = c.Calls[0]
		}
		return c.Calls
	}
	return nil
}

const onewayConfig = `
duration: 10000s
forwarding:
  relay:
    modes:
      - {weight: 0.75, mean: 0s}
      - {weight: 0.25, mean: 10s}
  fast: {mean: 1s}
tracelets:
  - name: mail
    instances: 3
    think: {min: 20s, max: 40s}
    root:
      from: src
      to: relay
      oneway: true
      calls:
        - to: fast
          oneway: true
          calls:
            - {to: sink, oneway: true}
            - {to: sink, oneway: true, delay: {mean: 3s}}
  - name: rpc
    think: {min: 5s, max: 5s}
    root:
      from: client
      to: web
      reply: {mean: 100ms}
      calls:
        - {to: relay, oneway: true, delay: {mean: 10ms}}
        - {to: db, delay: {mean: 20ms}, reply: {mean: 30ms}}
`

// One-way calls are MSG_SENT without ids; a relay's forwarding delay applies to
// the one-way messages it sends without a delay of their own, multi-modal by
// weight; an explicit delay wins; serial children of a one-way call follow one
// another from its arrival; a one-way child of an RPC does not hold up the
// caller.
func TestOneWayAndForwarding(t *testing.T) {
	cfg := mustParse(t, onewayConfig)
	tr, st := mustGenerate(t, cfg, Options{Seed: 5})
	node := func(n string) causal.NodeID { return causal.NodeID(slices.Index(tr.Nodes, n)) }
	runs := map[uint32][]causal.Message{}
	for _, m := range tr.Messages {
		runs[m.PathID] = append(runs[m.PathID], m)
	}
	var zero, ten, other int
	for _, ms := range runs {
		if ms[0].Sender == node("client") {
			// client→web CALL at t, web→relay MSG at t+10ms, web→db CALL at
			// t+10ms+20ms (the one-way message takes no time of web's).
			var call, msg, db causal.Message
			for _, m := range ms {
				switch {
				case m.Op == causal.OpCall && m.Receiver == node("web"):
					call = m
				case m.Op == causal.OpMessage:
					msg = m
				case m.Op == causal.OpCall && m.Receiver == node("db"):
					db = m
				}
			}
			if msg.Time-call.Time != int64(10*time.Millisecond) || db.Time-call.Time != int64(30*time.Millisecond) || msg.CallID != causal.NoID {
				t.Fatalf("rpc run: call %d, message +%v, db call +%v", call.Time, time.Duration(msg.Time-call.Time), time.Duration(db.Time-call.Time))
			}
			continue
		}
		if len(ms) != 4 {
			t.Fatalf("mail run has %d messages", len(ms))
		}
		// src→relay at t; relay→fast after 0 or 10 s; fast→sink after 1 s
		// (forwarding), then fast→sink 3 s after that (explicit delay, serial).
		d := time.Duration(ms[1].Time - ms[0].Time)
		switch d {
		case 0:
			zero++
		case 10 * time.Second:
			ten++
		default:
			other++
		}
		if ms[2].Time-ms[1].Time != int64(time.Second) || ms[3].Time-ms[2].Time != int64(3*time.Second) {
			t.Fatalf("mail run delays %v, %v", time.Duration(ms[2].Time-ms[1].Time), time.Duration(ms[3].Time-ms[2].Time))
		}
		for _, m := range ms {
			if m.Op != causal.OpMessage || m.CallID != causal.NoID {
				t.Fatalf("mail message %+v", m)
			}
		}
	}
	n := zero + ten
	t.Logf("%d runs: %d forwarded at once, %d after 10 s", st.Runs, zero, ten)
	if other != 0 {
		t.Fatalf("%d forwarding delays neither 0 nor 10 s", other)
	}
	if p := float64(ten) / float64(n); math.Abs(p-0.25) > 3*math.Sqrt(0.25*0.75/float64(n)) {
		t.Errorf("%.3f of messages took the 10 s mode, want 0.25", p)
	}
	// Same seed, same trace.
	again, _ := mustGenerate(t, cfg, Options{Seed: 5})
	if !slices.Equal(tr.Messages, again.Messages) {
		t.Fatal("same seed, different traces")
	}
}

func TestOneWayConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"reply on one-way", "tracelets:\n  - root: {from: A, to: B, oneway: true, reply: {mean: 1ms}}\n", "no reply"},
		{"forwarding of a node that sends none", "forwarding: {B: {mean: 1s}}\ntracelets:\n  - think: {max: 1s}\n    root: {from: A, to: B, oneway: true}\n", `"B" sends no one-way`},
		{"forwarding not a mapping", "forwarding: [1]\ntracelets:\n  - root: {from: A, to: B}\n", "forwarding"},
		{"mode weight", "tracelets:\n  - think: {max: 1s}\n    root: {from: A, to: B, oneway: true, calls: [{to: C, oneway: true, delay: {modes: [{weight: 0, mean: 1s}]}}]}\n", "weight"},
		{"empty modes", "tracelets:\n  - think: {max: 1s}\n    root: {from: A, to: B, calls: [{to: C, delay: {modes: []}}]}\n", "non-empty"},
		{"mode field", "tracelets:\n  - think: {max: 1s}\n    root: {from: A, to: B, calls: [{to: C, delay: {modes: [{mean: 1s, sd: 1s}]}}]}\n", `"sd"`},
		{"oneway type", "tracelets:\n  - root: {from: A, to: B, oneway: 1}\n", "oneway"},
	} {
		_, err := ParseConfig([]byte(tc.src), "test.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "test.yaml:") {
			t.Errorf("%s: error %v, want one naming the line and containing %q", tc.name, err, tc.want)
		}
	}
	// A multi-modal delay on an RPC call, and a forwarding delay given as plain
	// {mean, std}, are accepted.
	mustParse(t, "forwarding: {B: {mean: 1s, std: 1ms}}\ntracelets:\n  - think: {max: 1s}\n    root: {from: A, to: B, calls: [{to: C, oneway: true}, {to: D, delay: {modes: [{mean: 1s}, {weight: 3, mean: 2s}]}}]}\n")
}
