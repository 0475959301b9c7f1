// Package sharedcomponent lets the pipelines of one component share one
// instance of it, as the collector's own receivers and exporters do when one
// configuration serves several signals (the pattern of the collector's
// internal sharedcomponent, which other modules cannot import).
//
// A Registry belongs to a factory, not to the process: the factory creates
// it and every create function of that factory looks the instance up in it.
// The instance starts with the first pipeline that starts, shuts down with
// the last one that shuts down, and leaves the registry then, so that a
// later create (a reloaded configuration) builds a fresh one.
package sharedcomponent // import "github.com/tierscope/tierscope/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// Registry holds the live instances by key (a component ID, say).
type Registry[K comparable, V component.Component] struct {
	mu        sync.Mutex
	instances map[K]*Shared[V]
}

// NewRegistry returns an empty registry.
func NewRegistry[K comparable, V component.Component]() *Registry[K, V] {
	return &Registry[K, V]{instances: map[K]*Shared[V]{}}
}

// GetOrCreate returns the instance registered under key, or registers the
// one create returns.
func (r *Registry[K, V]) GetOrCreate(key K, create func() (V, error)) (*Shared[V], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.instances[key]; ok {
		return s, nil
	}
	v, err := create()
	if err != nil {
		return nil, err
	}
	s := &Shared[V]{value: v}
	s.forget = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.instances[key] == s {
			delete(r.instances, key)
		}
	}
	r.instances[key] = s
	return s, nil
}

// Len is how many instances are live.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.instances)
}

// Shared is one instance and the pipelines that started it.
type Shared[V component.Component] struct {
	value  V
	forget func()

	mu      sync.Mutex
	started int  // pipelines started and not yet shut down
	ended   bool // shut down: later calls do nothing
	hosts   fanOutHost
}

// Unwrap is the instance.
func (s *Shared[V]) Unwrap() V { return s.value }

// Start starts the instance with the first pipeline; later pipelines only
// add their host, which then hears the instance's status reports too.
func (s *Shared[V]) Start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts.add(host)
	s.started++
	if s.started > 1 {
		return nil
	}
	return s.value.Start(ctx, &s.hosts)
}

// Shutdown shuts the instance down with the last started pipeline (or at
// once when none started) and removes it from its registry.
func (s *Shared[V]) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started > 1 {
		s.started--
		return nil
	}
	if s.ended {
		return nil
	}
	s.started, s.ended = 0, true
	s.forget()
	return s.value.Shutdown(ctx)
}

// fanOutHost is the first pipeline's host, whose status reports reach
// every pipeline's host that takes them.
type fanOutHost struct {
	mu    sync.Mutex
	hosts []component.Host
}

var (
	_ component.Host           = (*fanOutHost)(nil)
	_ componentstatus.Reporter = (*fanOutHost)(nil)
)

func (h *fanOutHost) add(host component.Host) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts = append(h.hosts, host)
}

// GetExtensions are the first host's: every pipeline of one collector has
// the same.
func (h *fanOutHost) GetExtensions() map[component.ID]component.Component {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.hosts) == 0 {
		return nil
	}
	return h.hosts[0].GetExtensions()
}

// Report passes a status event to every host that reports.
func (h *fanOutHost) Report(ev *componentstatus.Event) {
	h.mu.Lock()
	hosts := append([]component.Host(nil), h.hosts...)
	h.mu.Unlock()
	for _, host := range hosts {
		if r, ok := host.(componentstatus.Reporter); ok {
			r.Report(ev)
		}
	}
}
