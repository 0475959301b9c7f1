package config

// Truth is the ground truth a configuration implies, what `testbed truth` prints.
type Truth struct {
	CPUMHz       float64             `json:"cpu_mhz"`
	Replication  string              `json:"replication"`
	DropContext  []string            `json:"drop_context"`
	Versions     map[string][]string `json:"versions"` // service -> declared versions
	Transactions []TxnTruth          `json:"transactions"`
}

// TxnTruth is one transaction's ground truth. Costs count every execution a request
// causes, asynchronous ones (worker, async replication) included: they are demand
// on the tiers even though they are not in the response time.
type TxnTruth struct {
	Name  string `json:"name"`
	Class string `json:"class"`
	Route string `json:"route"`
	// Nodes are the services the request reaches, in call order.
	Nodes []string `json:"nodes"`
	// Edges are the expanded calls per request, merged by caller, callee and what
	// is called; Count is the number of calls one request makes.
	Edges []Edge `json:"edges"`
	// CPUMC is the calibrated busy work per request, in standard megacycles, per
	// service; BusyMS is the same at cpu_mhz, in milliseconds.
	CPUMC  map[string]float64 `json:"cpu_mc"`
	BusyMS map[string]float64 `json:"busy_ms"`
	// ExtraMS is service -> version -> the extra busy time per request that version
	// adds at that service (0 for a declared version that adds nothing).
	ExtraMS map[string]map[string]float64 `json:"extra_ms"`
	// Tree is the call tree: what each request does, node by node.
	Tree Node `json:"tree"`
}

// Edge is a caller -> callee call in the expanded graph.
type Edge struct {
	From           string `json:"from"`
	To             string `json:"to"`
	Name           string `json:"name"` // op, topic or query called
	Pattern        string `json:"pattern"`
	Count          int    `json:"count"`
	Async          bool   `json:"async"`
	Connection     string `json:"connection,omitempty"`
	Transport      string `json:"transport,omitempty"` // grpc; absent for http
	ContextDropped bool   `json:"context_dropped"`
}

// Node is one execution at a service: a transaction at web, an op at app, a topic
// at worker, a query at db (Role primary or backup).
type Node struct {
	Service string  `json:"service"`
	Role    string  `json:"role,omitempty"`
	Name    string  `json:"name"`
	CPUMC   float64 `json:"cpu_mc"`
	Calls   []Call  `json:"calls,omitempty"`
}

// Call is Count calls from a node to Callee, with Pattern; Async calls are not
// waited for (a publish to the queue, async replication).
type Call struct {
	Pattern        string `json:"pattern"`
	Count          int    `json:"count"`
	Async          bool   `json:"async"`
	Connection     string `json:"connection,omitempty"`
	Transport      string `json:"transport,omitempty"` // grpc; absent for http
	ContextDropped bool   `json:"context_dropped"`
	Callee         Node   `json:"callee"`
}

// Truth computes the ground truth.
func (c *Config) Truth() Truth {
	t := Truth{
		CPUMHz:      c.MHz(),
		Replication: c.Replication,
		DropContext: append([]string{}, c.DropContext...),
		Versions:    map[string][]string{},
	}
	for _, svc := range sortedKeys(c.Versions) {
		t.Versions[svc] = sortedKeys(c.Versions[svc])
	}
	for _, txn := range c.Transactions {
		t.Transactions = append(t.Transactions, c.txnTruth(txn, t.CPUMHz))
	}
	return t
}

// Tree is the call tree of one transaction.
func (c *Config) Tree(txn Transaction) Node {
	n := Node{Service: Web, Name: txn.Name, CPUMC: txn.Web.CPUMC}
	for _, s := range txn.Steps {
		if s.Publish != "" {
			n.Calls = append(n.Calls, Call{
				Pattern: s.Pattern, Count: s.Count, Async: true,
				ContextDropped: c.Dropped(Web, Worker),
				Callee:         c.opNode(Worker, s.Publish, c.Topics[s.Publish]),
			})
			continue
		}
		transport := s.Transport
		if transport == TransportHTTP {
			transport = ""
		}
		n.Calls = append(n.Calls, Call{
			Pattern: s.Pattern, Count: s.Count, Connection: s.Connection, Transport: transport,
			ContextDropped: c.Dropped(Web, App),
			Callee:         c.opNode(App, s.Op, c.Ops[s.Op]),
		})
	}
	return n
}

// opNode is an op at app or a topic at worker. Async tasks are the tier's own
// work (their cpu_mc counts at the tier); an async publish is an async call to
// the worker. Cache calls are not calls: the cache, like the queue, is a black
// box without spans.
func (c *Config) opNode(service, name string, op Op) Node {
	n := Node{Service: service, Name: name, CPUMC: op.CPUMC}
	for _, d := range op.DB {
		n.Calls = append(n.Calls, Call{
			Pattern: d.Pattern, Count: d.Count, Connection: op.Connection,
			ContextDropped: c.Dropped(service, DB),
			Callee:         c.queryNode(d.Query, "primary"),
		})
	}
	for _, a := range op.Async {
		n.CPUMC += a.CPUMC
		if a.Publish != "" {
			n.Calls = append(n.Calls, Call{
				Pattern: PatternSync, Count: 1, Async: true,
				ContextDropped: c.Dropped(service, Worker),
				Callee:         c.opNode(Worker, a.Publish, c.Topics[a.Publish]),
			})
		}
	}
	return n
}

func (c *Config) queryNode(name, role string) Node {
	q := c.Queries[name]
	n := Node{Service: DB, Role: role, Name: name, CPUMC: q.CPUMC}
	if q.Write && role == "primary" && c.Replication != ReplNone {
		n.Calls = append(n.Calls, Call{
			Pattern: PatternSync, Count: 1, Async: c.Replication == ReplAsync,
			Connection:     ConnPooled,
			ContextDropped: c.Dropped(DB, DB),
			Callee:         c.queryNode(name, "backup"),
		})
	}
	return n
}

func (c *Config) txnTruth(txn Transaction, mhz float64) TxnTruth {
	tt := TxnTruth{
		Name: txn.Name, Class: txn.Class, Route: "/txn/" + txn.Name,
		CPUMC: map[string]float64{}, BusyMS: map[string]float64{},
		ExtraMS: map[string]map[string]float64{},
		Tree:    c.Tree(txn),
	}
	type edgeKey struct {
		from, to, name, pattern, conn, transport string
		async, dropped                           bool
	}
	edges := map[edgeKey]int{}
	var order []edgeKey
	seen := map[string]bool{}
	var walk func(n Node, times int)
	walk = func(n Node, times int) {
		if !seen[n.Service] {
			seen[n.Service] = true
			tt.Nodes = append(tt.Nodes, n.Service)
		}
		tt.CPUMC[n.Service] += n.CPUMC * float64(times)
		for ver := range c.Versions[n.Service] {
			if tt.ExtraMS[n.Service] == nil {
				tt.ExtraMS[n.Service] = map[string]float64{}
			}
			tt.ExtraMS[n.Service][ver] += c.Versions[n.Service][ver].ExtraMS[n.Name] * float64(times)
		}
		for _, call := range n.Calls {
			k := edgeKey{n.Service, call.Callee.Service, call.Callee.Name, call.Pattern, call.Connection, call.Transport, call.Async, call.ContextDropped}
			if _, ok := edges[k]; !ok {
				order = append(order, k)
			}
			edges[k] += times * call.Count
			walk(call.Callee, times*call.Count)
		}
	}
	walk(tt.Tree, 1)
	for _, k := range order {
		tt.Edges = append(tt.Edges, Edge{
			From: k.from, To: k.to, Name: k.name, Pattern: k.pattern, Count: edges[k],
			Async: k.async, Connection: k.conn, Transport: k.transport, ContextDropped: k.dropped,
		})
	}
	for s, mc := range tt.CPUMC {
		tt.BusyMS[s] = mc / mhz * 1000
	}
	return tt
}
