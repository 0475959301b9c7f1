package stitcheval

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A message broker (Params.QueueWorkers): the CONSUMER spans of a topic in one
// process are served by a pool of consumer threads over a FIFO queue, as a
// Kafka consumer's partitions or a RabbitMQ queue with a prefetch of one are.
// The requests are generated one at a time, so the queue is played once they
// are placed in time, and each CONSUMER span (with everything under it) is
// moved to when a thread takes its message.

// subscriber is the one service (the entry excepted) that consumes the topic
// of service svc under a broker.
func (g *generator) subscriber(svc int) int {
	return 1 + (5*svc+2)%(len(g.svcs)-1)
}

// queueTransit is the broker's delay from a publish to the queue, in hops.
const queueTransit = 2

// queues plays each (topic, consuming process) queue in the order the
// messages were published, with QueueWorkers threads, and moves every
// CONSUMER span to its turn.
func (g *generator) queues() {
	k := g.p.QueueWorkers
	if k <= 0 {
		return
	}
	type message struct {
		consumer int32
		ready    int64 // placed time the message is in the queue
	}
	queues := map[[2]int][]message{}
	children := map[int32][]int32{}
	for i := range g.spans {
		sp := &g.spans[i]
		if sp.parent >= 0 {
			children[sp.parent] = append(children[sp.parent], int32(i))
		}
		if sp.kind != ptrace.SpanKindConsumer || sp.parent < 0 {
			continue
		}
		pr := &g.spans[sp.parent]
		key := [2]int{int(g.res[sp.res].proc), int(g.res[pr.res].svc)}
		ready := g.offset[pr.req] + pr.start + int64(queueTransit*g.hop)
		queues[key] = append(queues[key], message{int32(i), ready})
	}
	keys := make([][2]int, 0, len(queues))
	for key := range queues {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	free := make([]int64, k)
	for _, key := range keys {
		q := queues[key]
		slices.SortStableFunc(q, func(a, b message) int { return cmp.Compare(a.ready, b.ready) })
		clear(free)
		for _, m := range q {
			sp := &g.spans[m.consumer]
			w := 0
			for i := range free {
				if free[i] < free[w] {
					w = i
				}
			}
			start := max(m.ready, free[w])
			shift := start - (g.offset[sp.req] + sp.start)
			free[w] = start + sp.end - sp.start
			g.shiftSubtree(children, m.consumer, shift)
		}
	}
}

// shiftSubtree moves span i and everything under it by d.
func (g *generator) shiftSubtree(children map[int32][]int32, i int32, d int64) {
	g.spans[i].start += d
	g.spans[i].end += d
	for _, c := range children[i] {
		g.shiftSubtree(children, c, d)
	}
}

// messageIDs are the attributes by which the producer and the consumer of the
// next message of service svc's topic name it, when the topic records them
// (Params.MessageIDs, drawn per topic without a random stream): Kafka's
// partition and offset, under the current or the legacy names. False when the
// topic does not.
func (g *generator) messageIDs(svc int, producerLegacy, consumerLegacy bool) ([2][]kv, bool) {
	if float64((37*svc+11)%100)/100 >= g.p.MessageIDs {
		return [2][]kv{}, false
	}
	if g.sent == nil {
		g.sent = map[int]int{}
	}
	n := g.sent[svc]
	g.sent[svc]++
	side := func(legacy bool) []kv {
		if legacy {
			return []kv{str("messaging.kafka.partition", "0"), num("messaging.kafka.message.offset", n)}
		}
		return []kv{str("messaging.destination.partition.id", "0"), num("messaging.kafka.offset", n)}
	}
	return [2][]kv{side(producerLegacy), side(consumerLegacy)}, true
}
