package span

// Kind is the role of a span in an RPC, as in OpenTelemetry.
type Kind uint8

const (
	// KindUnspecified: no call kind. Stitching reads it as a span that
	// records a call without telling its side, so that it may be a server
	// (internal/stitch), and a span that records no call as KindInternal.
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

// Span is one span as Tierscope's algorithms see it: span stitching (package
// causal, a call pair seen from one side), the causalpath processor's path
// tags, `tierscope stitch`, and the perfmodel exporter's windows
// (internal/model). Its names are int32 ids into a Names table owned by
// whoever built it (internal/stitch from OTLP spans, the exporter's
// assembler); -1 is an unknown name. Stitching reads spans by the million:
// what it reads comes first, in the struct's first 68 bytes, and the fields
// only the exporter reads follow; the struct pads 4 bytes before the ids.
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
	// Peer names the callee of a CLIENT/PRODUCER span, -1 when unknown: the
	// service it calls when known, else what the reader names the callee by
	// (stitching a database as "database:" and its name; the exporter a
	// database or an address, which a path shows as a node when no span of the
	// trace answers the call).
	Peer int32
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
	// Identity names the one message or request a span is an end of, in a
	// form both ends record, interned, -1 when unknown: for a PRODUCER or
	// CONSUMER span the message (its destination with messaging.message.id,
	// or with the Kafka partition and offset); for an HTTP CLIENT or SERVER
	// span its request target, when that carries an identifier or a query.
	// A message id is unique; a target may repeat across requests.
	Identity int32
	Parent   int32 // index of the parent known from context, else -1
	Kind     Kind
	// Orphan marks a span whose context was lost, so its parent is inferred. A
	// span with no parent that is not marked stays a root.
	Orphan bool
	Error  bool // the span's status is an error
	// Database marks a call to a database (db.system.name / db.system).
	Database bool
	// Transaction names what a SERVER span serves (http.route, else the span
	// name) or a CONSUMER span consumes, -1 for other kinds. Version is
	// service.version, Machine the machine the exporter counts the span's
	// work on (host.name, else its configured host, else service.instance.id),
	// Process process.executable.name; -1 when unknown. They key the
	// exporter's work-factor flows and transaction signatures.
	Transaction, Version, Machine, Process int32
	// ID and ParentID are the span's and its parent's span ids as integers
	// (internal/stitch.SpanID), 0 when absent. Stitching keeps the OTLP ids
	// beside its spans and leaves these 0.
	ID, ParentID uint64
}

// Reintern moves s's names from the table from into the table to, so that a
// long-lived holder of spans can drop the names no span it holds uses.
func (s *Span) Reintern(from, to *Names) {
	for _, f := range [...]*int32{&s.Service, &s.Instance, &s.Host, &s.Name, &s.Peer, &s.Endpoint,
		&s.Caller, &s.CallerAddress, &s.Op, &s.OpClass, &s.Thread, &s.Identity,
		&s.Transaction, &s.Version, &s.Machine, &s.Process} {
		if *f >= 0 {
			*f = to.ID(from.Name(*f))
		}
	}
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
