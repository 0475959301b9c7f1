package span

// Kind is the role of a span in an RPC, as in OpenTelemetry.
type Kind uint8

const (
	KindUnspecified Kind = iota
	KindInternal
	KindServer
	KindClient
	KindProducer
	KindConsumer
)

// RemoteEntry reports whether a span of this kind is entered from another process,
// so that its parent, if any, is a CLIENT or PRODUCER span elsewhere.
func (k Kind) RemoteEntry() bool { return k == KindServer || k == KindConsumer }

// RemoteCaller reports whether a span of this kind calls another process. Such a
// span is a leaf inside its own process: only a SERVER or CONSUMER span of
// another process nests in it.
func (k Kind) RemoteCaller() bool { return k == KindClient || k == KindProducer }

// Span is a span as span stitching sees it: a call pair seen from one side. The
// adapter that builds it interns names into small integers.
type Span struct {
	Start, End int64 // nanoseconds
	Service    int32 // the service the span belongs to (service.name)
	// Instance is the process the span ran in: local parents share it. Spans of
	// different services may share a process (an SDK that reports in-process
	// database clients under the database's name).
	Instance int32
	// Host is the machine the process runs on, -1 when unknown. A process that
	// never serves requests (a client-only service) is looked for among the
	// processes of its host.
	Host int32
	Name int32 // the span name (operation)
	Kind Kind
	Peer int32 // for CLIENT/PRODUCER: the service it calls when known, else -1
	// Endpoint is an interned address (host:port), -1 when unknown: for a CLIENT
	// span the address it called, for a SERVER span the address it answered on.
	Endpoint int32
	// For a SERVER span, the address its request came from (CallerAddress) and
	// that address with its port (Caller, the connection), interned, -1 when
	// unknown: a connection belongs to one calling process.
	Caller, CallerAddress int32
	// Op and OpClass name the operation called (CLIENT/PRODUCER) or served
	// (SERVER/CONSUMER) in a form both sides share, -1 when unknown: Op the
	// method (an RPC method, an HTTP path with its identifiers masked, a
	// messaging destination), OpClass a coarser class (the RPC service, the HTTP
	// method). A caller and a callee whose keys are both known and differ are
	// not a call pair.
	Op, OpClass int32
	// Thread is the thread the span started on (thread.id), -1 when unknown.
	// A synchronous child starts on its parent's thread.
	Thread int32
	Parent int32 // index of the parent known from context, else -1
	// Orphan marks a span whose context was lost, so its parent is inferred. A
	// span with no parent that is not marked stays a root.
	Orphan bool
}

// Node says what a span is on a causal path (docs/formats.md §2 and §4).
type Node uint8

const (
	// NodeNone: the span is transparent; its children hang from its nearest
	// ancestor that is a node (INTERNAL spans, calls whose callee's span is in
	// the trace).
	NodeNone Node = iota
	// NodeService: the span is a node named by its own service.
	NodeService
	// NodeCallee: the span is a node named by its callee (a database, an
	// uninstrumented back end).
	NodeCallee
)

// NodeOf is the one rule for the nodes of a path: a span entered from another
// process, or a root, is its service; a call that no span of the trace answers
// (no SERVER or CONSUMER child) is its callee; any other span is transparent.
func NodeOf(k Kind, root, answered bool) Node {
	switch {
	case k.RemoteEntry() || root:
		return NodeService
	case k.RemoteCaller() && !answered:
		return NodeCallee
	}
	return NodeNone
}
