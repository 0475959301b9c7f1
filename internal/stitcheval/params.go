package stitcheval

import (
	"fmt"
	"math"
	"time"
)

// FanOut is how an operation issues its downstream calls.
type FanOut uint8

const (
	// FanOutMixed draws a style per operation: sequential, parallel, or a
	// sequential prefix then a parallel group.
	FanOutMixed FanOut = iota
	// FanOutSequential makes each call after the previous one returned.
	FanOutSequential
	// FanOutParallel issues all calls at once and waits for the slowest.
	FanOutParallel
)

var fanOutNames = []string{"mixed", "sequential", "parallel"}

func (f FanOut) String() string { return enumName(fanOutNames, uint8(f)) }

// Semconv is the attribute style of a service's spans.
type Semconv uint8

const (
	// SemconvMixed draws current or legacy per service.
	SemconvMixed Semconv = iota
	// SemconvCurrent: server.address/server.port, url.full, http.request.method,
	// http.route, url.path, rpc.*, db.system.name.
	SemconvCurrent
	// SemconvLegacy: net.peer.name/net.peer.port, http.url, http.target,
	// http.method, net.host.name, peer.service, db.system.
	SemconvLegacy
)

var semconvNames = []string{"mixed", "current", "legacy"}

func (s Semconv) String() string { return enumName(semconvNames, uint8(s)) }

// DBReport is the resource under which a service's database and cache CLIENT
// spans are reported. They always run in the caller's process.
type DBReport uint8

const (
	// DBReportMixed draws one of the others per service.
	DBReportMixed DBReport = iota
	// DBReportOwn reports them in the caller's own resource (the OTel SDKs).
	DBReportOwn
	// DBReportBackendPID reports them under the back end's service.name
	// ("mysql", "redis") with the caller's host.name and process.pid only.
	DBReportBackendPID
	// DBReportBackendHost is DBReportBackendPID with host.name alone shared.
	DBReportBackendHost
)

var dbReportNames = []string{"mixed", "own", "backend-pid", "backend-host"}

func (d DBReport) String() string { return enumName(dbReportNames, uint8(d)) }

// Platform is how a service's resources say where it runs.
type Platform uint8

const (
	// PlatformMixed draws one of the others per service.
	PlatformMixed Platform = iota
	// PlatformK8s: k8s.pod.name, k8s.pod.uid, k8s.namespace.name, container.id,
	// host.name = the pod's name, process.pid 1.
	PlatformK8s
	// PlatformHost: processes on shared virtual machines, host.name = the machine,
	// distinct process.pid.
	PlatformHost
	// PlatformDocker: container.id, host.name = its short id, process.pid 1.
	PlatformDocker
)

var platformNames = []string{"mixed", "k8s", "host", "docker"}

func (p Platform) String() string { return enumName(platformNames, uint8(p)) }

func enumName(names []string, v uint8) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%d", v)
}

// Params describe a synthetic application and its load. DefaultParams gives a
// realistic default; every field is documented with it.
type Params struct {
	// Services is the number of application services, the entry (a gateway)
	// included; Operations the endpoints of each, Instances its processes (calls
	// are load-balanced over them at random). Default 8, 3, 2.
	Services, Operations, Instances int
	// Depth is the number of service levels below the entry: an operation calls
	// services of deeper levels only, so calls form no cycle. Default 3.
	Depth int
	// MinCalls and MaxCalls bound the downstream calls of an operation above the
	// last level (uniform); a service that no operation calls then gets a caller
	// in the level above, so that every service takes part. Default 1 and 2.
	MinCalls, MaxCalls int
	// FanOut is how operations issue their calls. Default mixed.
	FanOut FanOut
	// Internal is the probability that an operation runs its handler in an
	// INTERNAL span under its SERVER span (handler → internal → client), and
	// that a database statement is wrapped in a repository INTERNAL span.
	// Default 0.7.
	Internal float64
	// DB and Cache are the probabilities that an operation queries its SQL
	// database (1–3 statements) and looks up its cache (Redis). Default 0.6, 0.3.
	DB, Cache float64
	// DBReport is the resource of database and cache CLIENT spans. Default mixed.
	DBReport DBReport
	// Async is the probability that an operation fires work it does not wait
	// for: an INTERNAL span, or a PRODUCER span whose message a CONSUMER span of
	// another service processes, both outliving their parent. Default 0.1.
	Async float64
	// GRPC is the share of services (the entry excepted) that speak gRPC rather
	// than HTTP. Default 0.3.
	GRPC float64
	// Semconv is the attribute style. Default mixed.
	Semconv Semconv
	// PeerService is the share of legacy-style services whose CLIENT spans name
	// the callee in peer.service. Default 0.3.
	PeerService float64
	// InstanceID is the share of services whose resources carry
	// service.instance.id. Default 0.5.
	InstanceID float64
	// Platform is how resources say where they run. Default mixed.
	Platform Platform
	// CallerSocket is the share of services whose SERVER spans record the
	// caller's address and port (sockets.go). Default 0.5.
	CallerSocket float64
	// ThreadIDs is the share of services whose spans record the thread that
	// started them (thread.id, thread.name), as the Java agent does (threads.go).
	// Default 0.
	ThreadIDs float64
	// Unkinded is the share of services (the entry excepted) whose spans are
	// all INTERNAL, the default kind of a manual tracer. Default 0.
	Unkinded float64
	// CoarseClock is the share of services whose clocks stamp every span on a
	// whole millisecond. Default 0.
	CoarseClock float64
	// EventLoop is the share of services that are reactive: their spans start
	// on any of a few event-loop threads. Default 0.
	EventLoop float64
	// AsyncWork is the share of asynchronous INTERNAL spans (Async) that make
	// a database call of their own, beside the handler's calls. Default 0.
	AsyncWork float64
	// MessageIDs is the share of topics whose PRODUCER and CONSUMER spans
	// record the message's identity, Kafka's partition and offset (current or
	// legacy attribute names). Default 0.
	MessageIDs float64
	// TargetIDs is the share of HTTP operations whose route carries an
	// identifier (/api/cart/get0/{id}), which the client's url.full and the
	// server's url.path (http.url, http.target) record alike, as REST paths
	// do. Default 0: no target names more than its route.
	TargetIDs float64
	// TargetPool is how many identifiers a route's targets draw from: 10,000
	// makes concurrent calls' targets differ, a few makes them repeat.
	// Default 10,000.
	TargetPool int
	// QueueWorkers is how CONSUMER spans take their messages. 0: each after a
	// delay of its own (2–20 hops), so messages overtake one another and any
	// service may consume a topic. k ≥ 1: a message broker. Each topic has one
	// subscribing service, each of its processes runs k consumer threads over a
	// FIFO queue, and a message waits 2 hops in transit, then for the
	// messages before it and a free thread. Default 0.
	QueueWorkers int
	// HopDelay is the mean one-way network delay; every duration scales with it
	// (work in an operation is 1–10 hops, a database statement 1–5), so one knob
	// goes from microsecond hops to second-long calls. Default 500 µs, a hop
	// between pods in one cluster with its serialisation.
	HopDelay time.Duration
	// Noise is the σ of the log-normal factor (mean 1) on every duration.
	// Default 0.5.
	Noise float64
	// Skew bounds the clock offset of each process, uniform in ±Skew; a process's
	// database spans share its clock. Default 0.5 ms, machines kept by NTP in
	// one data centre.
	Skew time.Duration
	// RoundServerStart is the share of services whose SERVER spans start on a
	// whole millisecond, as some SDKs stamp them. Default 0.1.
	RoundServerStart float64
	// Concurrency is the target overlap (see the package comment): arrivals are
	// Poisson at the rate that reaches it, and requests run concurrently in
	// every process (servers are multithreaded). Default 4.
	Concurrency float64
	// ShiftTo, when > 0, is the overlap of the second half of the requests: a
	// load shift in the middle of the run, so that the models learn from both
	// loads at once. Default 0 (steady load).
	ShiftTo float64
	// Requests is the number of requests at the entry. Default 300.
	Requests int
	// Uninstrumented is the number of services (middle tiers first, never the
	// entry) whose spans are all dropped; the true parent of their callees' spans
	// becomes the nearest surviving ancestor. Default 0.
	Uninstrumented int
	// Drop is the fraction of the remaining spans dropped at random (lost by an
	// exporter). Default 0.
	Drop float64
	// Batch is how each resource exports its spans. Default DefaultBatching.
	Batch Batching
}

// DefaultParams returns the default application: eight services on three levels
// below a gateway, two instances each, mixed styles, 500 µs hops, ±0.5 ms skew
// and four other requests in flight per process.
func DefaultParams() Params {
	return Params{
		Services: 8, Operations: 3, Instances: 2, Depth: 3, MinCalls: 1, MaxCalls: 2,
		Internal: 0.7, DB: 0.6, Cache: 0.3, Async: 0.1, GRPC: 0.3, PeerService: 0.3, InstanceID: 0.5, CallerSocket: 0.5,
		HopDelay: 500 * time.Microsecond, Noise: 0.5, Skew: 500 * time.Microsecond, RoundServerStart: 0.1,
		Concurrency: 4, Requests: 300, TargetPool: 10000, Batch: DefaultBatching(),
	}
}

// Validate reports the first field that cannot be used, by name.
func (p Params) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("stitcheval: Params.%s = %v, want %s", field, v, want)
	}
	prob := func(field string, v float64) error {
		if !(v >= 0 && v <= 1) {
			return bad(field, v, "a probability in [0, 1]")
		}
		return nil
	}
	switch {
	case p.Services < 2 || p.Services > 1000:
		return bad("Services", p.Services, "2 to 1000")
	case p.Operations < 1 || p.Operations > 100:
		return bad("Operations", p.Operations, "1 to 100")
	case p.Instances < 1 || p.Instances > 100:
		return bad("Instances", p.Instances, "1 to 100")
	case p.Depth < 1 || p.Depth > p.Services-1:
		return bad("Depth", p.Depth, fmt.Sprintf("1 to Services-1 (%d)", p.Services-1))
	case p.MinCalls < 0:
		return bad("MinCalls", p.MinCalls, "≥ 0")
	case p.MaxCalls < p.MinCalls || p.MaxCalls > 20:
		return bad("MaxCalls", p.MaxCalls, fmt.Sprintf("MinCalls (%d) to 20", p.MinCalls))
	case p.FanOut > FanOutParallel:
		return bad("FanOut", p.FanOut, "mixed, sequential or parallel")
	case p.DBReport > DBReportBackendHost:
		return bad("DBReport", p.DBReport, "mixed, own, backend-pid or backend-host")
	case p.Semconv > SemconvLegacy:
		return bad("Semconv", p.Semconv, "mixed, current or legacy")
	case p.Platform > PlatformDocker:
		return bad("Platform", p.Platform, "mixed, k8s, host or docker")
	case p.HopDelay <= 0 || p.HopDelay > time.Minute:
		return bad("HopDelay", p.HopDelay, "in (0, 1m]")
	case !(p.Noise >= 0 && p.Noise <= 3):
		return bad("Noise", p.Noise, "in [0, 3]")
	case p.Skew < 0 || p.Skew > time.Hour:
		return bad("Skew", p.Skew, "in [0, 1h]")
	case !(p.Concurrency >= 0) || math.IsInf(p.Concurrency, 0) || p.Concurrency > 1000:
		return bad("Concurrency", p.Concurrency, "in [0, 1000]")
	case !(p.ShiftTo >= 0) || math.IsInf(p.ShiftTo, 0) || p.ShiftTo > 1000:
		return bad("ShiftTo", p.ShiftTo, "in [0, 1000]")
	case p.TargetPool < 1 || p.TargetPool > 10000:
		return bad("TargetPool", p.TargetPool, "1 to 10,000")
	case p.QueueWorkers < 0 || p.QueueWorkers > 1000:
		return bad("QueueWorkers", p.QueueWorkers, "in [0, 1000]")
	case p.Requests < 1 || p.Requests > 1_000_000:
		return bad("Requests", p.Requests, "1 to 1,000,000")
	case p.Uninstrumented < 0 || p.Uninstrumented > p.Services-1:
		return bad("Uninstrumented", p.Uninstrumented, fmt.Sprintf("0 to Services-1 (%d)", p.Services-1))
	case !(p.Drop >= 0 && p.Drop < 1):
		return bad("Drop", p.Drop, "in [0, 1)")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Internal", p.Internal}, {"DB", p.DB}, {"Cache", p.Cache}, {"Async", p.Async}, {"AsyncWork", p.AsyncWork}, {"MessageIDs", p.MessageIDs}, {"TargetIDs", p.TargetIDs}, {"GRPC", p.GRPC},
		{"PeerService", p.PeerService}, {"InstanceID", p.InstanceID}, {"CallerSocket", p.CallerSocket}, {"ThreadIDs", p.ThreadIDs}, {"EventLoop", p.EventLoop}, {"Unkinded", p.Unkinded}, {"CoarseClock", p.CoarseClock}, {"RoundServerStart", p.RoundServerStart}} {
		if err := prob(f.name, f.v); err != nil {
			return err
		}
	}
	return p.Batch.validate("stitcheval: Params.Batch")
}

// MarshalText and UnmarshalText write and read the enums by name in reports.
func (f FanOut) MarshalText() ([]byte, error)   { return []byte(f.String()), nil }
func (s Semconv) MarshalText() ([]byte, error)  { return []byte(s.String()), nil }
func (d DBReport) MarshalText() ([]byte, error) { return []byte(d.String()), nil }
func (p Platform) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (f *FanOut) UnmarshalText(b []byte) error   { return parseEnum(fanOutNames, b, (*uint8)(f)) }
func (s *Semconv) UnmarshalText(b []byte) error  { return parseEnum(semconvNames, b, (*uint8)(s)) }
func (d *DBReport) UnmarshalText(b []byte) error { return parseEnum(dbReportNames, b, (*uint8)(d)) }
func (p *Platform) UnmarshalText(b []byte) error { return parseEnum(platformNames, b, (*uint8)(p)) }

func parseEnum(names []string, b []byte, v *uint8) error {
	for i, n := range names {
		if n == string(b) {
			*v = uint8(i)
			return nil
		}
	}
	return fmt.Errorf("stitcheval: %q is none of %v", b, names)
}
