package services

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Queue defaults.
const (
	DefaultQueueCapacity = 1000 // messages per topic
	MaxTopics            = 64
	ConsumeWait          = time.Second // long poll
	maxMessage           = 64 << 10
)

// Queue is an in-memory message queue over HTTP, a black box without spans:
// POST /publish/{topic} enqueues the body (503 and a drop when the topic is full),
// POST /consume/{topic} returns one message (200) or nothing after ConsumeWait
// (204). Delivery is at most once.
type Queue struct {
	capacity int
	mu       sync.Mutex
	topics   map[string]*topic
	mux      *http.ServeMux
}

type topic struct {
	ch                           chan []byte
	published, consumed, dropped atomic.Uint64
}

// TopicStats is one topic in GET /stats.
type TopicStats struct {
	Depth     int    `json:"depth"`
	Published uint64 `json:"published"`
	Consumed  uint64 `json:"consumed"`
	Dropped   uint64 `json:"dropped"`
}

// NewQueue makes a queue holding at most capacity messages per topic (0: default).
func NewQueue(capacity int) *Queue {
	if capacity <= 0 {
		capacity = DefaultQueueCapacity
	}
	q := &Queue{capacity: capacity, topics: map[string]*topic{}}
	q.mux = http.NewServeMux()
	q.mux.HandleFunc("POST /publish/{topic}", q.servePublish)
	q.mux.HandleFunc("POST /consume/{topic}", q.serveConsume)
	q.mux.HandleFunc("GET /stats", q.serveStats)
	q.mux.HandleFunc("GET /healthz", healthz)
	return q
}

// Handler serves the queue.
func (q *Queue) Handler() http.Handler { return q.mux }

// topic returns the named topic, creating it unless MaxTopics exist.
func (q *Queue) topic(name string) *topic {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.topics[name]
	if !ok {
		if len(q.topics) >= MaxTopics {
			return nil
		}
		t = &topic{ch: make(chan []byte, q.capacity)}
		q.topics[name] = t
	}
	return t
}

func (q *Queue) servePublish(w http.ResponseWriter, r *http.Request) {
	t := q.topic(r.PathValue("topic"))
	if t == nil {
		http.Error(w, "too many topics", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxMessage {
		http.Error(w, "message too large", http.StatusRequestEntityTooLarge)
		return
	}
	select {
	case t.ch <- body:
		t.published.Add(1)
		w.WriteHeader(http.StatusAccepted)
	default:
		t.dropped.Add(1)
		http.Error(w, "topic full, message dropped", http.StatusServiceUnavailable)
	}
}

func (q *Queue) serveConsume(w http.ResponseWriter, r *http.Request) {
	t := q.topic(r.PathValue("topic"))
	if t == nil {
		http.Error(w, "too many topics", http.StatusServiceUnavailable)
		return
	}
	timer := time.NewTimer(ConsumeWait)
	defer timer.Stop()
	select {
	case m := <-t.ch:
		t.consumed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(m)
	case <-timer.C:
		w.WriteHeader(http.StatusNoContent)
	case <-r.Context().Done():
	}
}

// Stats returns every topic's counters.
func (q *Queue) Stats() map[string]TopicStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]TopicStats, len(q.topics))
	for name, t := range q.topics {
		out[name] = TopicStats{Depth: len(t.ch), Published: t.published.Load(), Consumed: t.consumed.Load(), Dropped: t.dropped.Load()}
	}
	return out
}

func (q *Queue) serveStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(q.Stats()) // maps encode in key order
}
