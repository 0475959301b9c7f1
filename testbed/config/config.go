// Package config is the testbed's configuration: parsing (strict YAML), defaults,
// validation whose errors name the field and its line, and the ground truth the
// configuration implies (truth.go).
//
// Version extra times are keyed by what a tier serves, because that is all a tier
// knows about a request: web by transaction, app by op, worker by topic, db by query.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tierscope/tierscope/testbed"
)

// Service names: the nodes of the ground-truth call graph and the service.name of spans.
const (
	Web    = "web"
	App    = "app"
	DB     = "db"
	Worker = "worker"
)

// Call patterns, connection kinds, replication modes and transaction classes.
const (
	PatternSync     = "sync"
	PatternSerial   = "serial"
	PatternParallel = "parallel"

	ConnPooled = "pooled"
	ConnNew    = "new"

	ReplSync  = "sync"
	ReplAsync = "async"
	ReplNone  = "none"

	ClassBrowsing = "browsing"
	ClassOrdering = "ordering"
)

// Hops that drop_context may name: the edges of the call graph (the queue is not a
// node, so losing the message's context is web->worker, or app->worker for an
// op's async publish; db->db is replication).
var Hops = []string{"web->app", "app->db", "web->worker", "worker->db", "db->db", "app->worker"}

// Transports of a web step, semantic-convention generations, in-process client
// libraries and where an async task starts.
const (
	TransportHTTP = "http"
	TransportGRPC = "grpc"

	SemconvCurrent = "current" // server.address, url.full, http.request.method, ...
	SemconvLegacy  = "legacy"  // net.peer.name, http.url, http.method, ... (semconv < 1.21)

	ClientCache = "cache" // the ops' cache calls (Op.Cache)
	ClientDB    = "db"    // the app's and the worker's calls to the db tier

	ShareProcess = "process" // host.name, process.pid and container.id of the caller's process
	ShareHost    = "host"    // host.name only

	StartBegin = "begin" // before the op's busy work
	StartEnd   = "end"   // after its cache and db calls, just before it answers
)

// Cache commands an op may send to the cache tier.
var CacheCommands = []string{"GET", "SET", "DEL"}

// DefaultMHz is the capacity used when cpu_mhz is 0 and /proc/cpuinfo has no clock.
const DefaultMHz = 2000

// MaxCount bounds serial and parallel fan-out so a typo cannot melt the machine.
const MaxCount = 100

// Config is testbed.yaml.
type Config struct {
	CPUMHz float64 `yaml:"cpu_mhz"`
	// CPUSpeedFile, when set, is a file holding the CPU's speed now in kHz,
	// as cpufreq's scaling_setspeed or scaling_cur_freq do. Busy time then
	// follows it (mc / speed), which emulates DVFS on a kernel without
	// cpufreq: the injector's cpufreq lease writes a fake sysfs tree and the
	// tier slows down as a real CPU would.
	CPUSpeedFile string                        `yaml:"cpu_speed_file"`
	Versions     map[string]map[string]Version `yaml:"versions"`
	DropContext  []string                      `yaml:"drop_context"`
	Transactions []Transaction                 `yaml:"transactions"`
	Ops          map[string]Op                 `yaml:"ops"`
	Topics       map[string]Op                 `yaml:"topics"`
	Queries      map[string]Query              `yaml:"queries"`
	Replication  string                        `yaml:"replication"`
	// Semconv is per service (web, app, db, worker) the generation of attribute
	// names on its CLIENT and SERVER spans: current (the default) or legacy.
	Semconv map[string]string `yaml:"semconv"`
	// Clients are in-process client libraries (cache, db) that report their
	// CLIENT spans under their back end's service.name, as some SDKs do.
	Clients map[string]Client `yaml:"clients"`

	speed *speedFile
}

// Client is an in-process client library reporting under its own service.name
// (e.g. "redis") with no service.instance.id; Resource says what it shares with
// the process it runs in: process (host.name, process.pid, container.id; the
// default) or host (host.name only).
type Client struct {
	ServiceName string `yaml:"service_name"`
	Resource    string `yaml:"resource"`
}

// Version is the extra busy time, in milliseconds, a version adds per served name.
type Version struct {
	ExtraMS map[string]float64 `yaml:"extra_ms"`
}

// Transaction is one web route, /txn/{Name}.
type Transaction struct {
	Name  string `yaml:"name"`
	Class string `yaml:"class"`
	Web   Work   `yaml:"web"`
	Steps []Step `yaml:"steps"`
}

// Work is busy work at a tier.
type Work struct {
	CPUMC float64 `yaml:"cpu_mc"`
}

// Step is one thing web does: a call to app (Call, Op) or a publish to a topic.
type Step struct {
	Call       string `yaml:"call"`
	Op         string `yaml:"op"`
	Publish    string `yaml:"publish"`
	Pattern    string `yaml:"pattern"`
	Count      int    `yaml:"count"`
	Connection string `yaml:"connection"`
	// Transport of a call to app: http (default, also "") or grpc.
	Transport string `yaml:"transport"`
}

// Op is an app op or a worker topic: busy work, then cache calls, then db calls
// in order over Connection; Async tasks run beside it, fire and forget.
type Op struct {
	CPUMC      float64     `yaml:"cpu_mc"`
	Cache      []CacheCall `yaml:"cache"`
	DB         []DBCall    `yaml:"db"`
	Connection string      `yaml:"connection"`
	Async      []Async     `yaml:"async"`
}

// CacheCall is one command to the cache tier, run Count times with Pattern; Key
// is an argument template ("item:{1-1000}").
type CacheCall struct {
	Command string `yaml:"command"`
	Key     string `yaml:"key"`
	Pattern string `yaml:"pattern"`
	Count   int    `yaml:"count"`
}

// Async is work an op starts and does not wait for: a Task (an INTERNAL span of
// that name: busy work, a wait, cache calls) or a Publish to a topic (a PRODUCER
// span; app ops only). Start is begin or end (the default).
type Async struct {
	Task    string      `yaml:"task"`
	Publish string      `yaml:"publish"`
	Start   string      `yaml:"start"`
	CPUMC   float64     `yaml:"cpu_mc"`
	Wait    Wait        `yaml:"wait_ms"`
	Cache   []CacheCall `yaml:"cache"`
}

// DBCall is one named query, run Count times with Pattern.
type DBCall struct {
	Query   string `yaml:"query"`
	Pattern string `yaml:"pattern"`
	Count   int    `yaml:"count"`
}

// Query is named SQL run by the db tier; writes are replicated to the backup.
type Query struct {
	SQL   string   `yaml:"sql"`
	CPUMC float64  `yaml:"cpu_mc"`
	Write bool     `yaml:"write"`
	Args  []string `yaml:"args"`
	// Wait is time off the CPU after the busy work (a disk read, say):
	// natural variance in the response times that costs no CPU.
	Wait Wait `yaml:"wait_ms"`
}

// Wait is a normally distributed wait in milliseconds, truncated at 0.
type Wait struct {
	Mean float64 `yaml:"mean"`
	SD   float64 `yaml:"sd"`
}

// Draw returns one wait, given a standard normal variate z.
func (w Wait) Draw(z float64) time.Duration {
	ms := w.Mean + w.SD*z
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// Default returns the embedded testbed/testbed.yaml.
func Default() *Config {
	c, err := Parse(testbed.DefaultYAML, "testbed.yaml")
	if err != nil {
		panic("embedded testbed.yaml: " + err.Error())
	}
	return c
}

// Stitch returns the embedded testbed/stitch.yaml: the opt-in configuration with
// the features span stitching is evaluated on (gRPC, async tasks, in-process
// clients under their own service.name, both semantic conventions).
func Stitch() *Config {
	c, err := Parse(testbed.StitchYAML, "stitch.yaml")
	if err != nil {
		panic("embedded stitch.yaml: " + err.Error())
	}
	return c
}

// Load reads and parses a file; an empty path means the embedded default.
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(testbed.DefaultYAML, "testbed.yaml")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes strictly (unknown fields and duplicate keys are errors), fills
// defaults and validates. name prefixes every error as in "name:LINE: field: ...".
func Parse(data []byte, name string) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty configuration", name)
		}
		return nil, decodeError(name, err)
	}
	lines := map[string]int{}
	if len(root.Content) > 0 {
		indexLines(root.Content[0], "", lines)
	}
	c.fillDefaults()
	v := &validator{name: name, lines: lines}
	c.validate(v)
	if len(v.errs) > 0 {
		return nil, errors.Join(v.errs...)
	}
	return &c, nil
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

// decodeError rewrites yaml's "line N: field x not found in type config.Op" as
// "name:N: field x not found in type config.Op", one line per problem.
func decodeError(name string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %v", name, err)
	}
	errs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := lineRE.FindStringSubmatch(e); m != nil {
			errs = append(errs, fmt.Errorf("%s:%s: %s", name, m[1], e[len(m[0]):]))
		} else {
			errs = append(errs, fmt.Errorf("%s: %s", name, e))
		}
	}
	return errors.Join(errs...)
}

// indexLines records the line of every mapping value and sequence item under its
// path ("transactions[1].steps[0].count"), so validation can say where a field is.
func indexLines(n *yaml.Node, path string, lines map[string]int) {
	lines[path] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			lines[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, lines)
			lines[p] = n.Content[i].Line
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			indexLines(item, fmt.Sprintf("%s[%d]", path, i), lines)
		}
	}
}

type validator struct {
	name  string
	lines map[string]int
	errs  []error
}

// errorf reports a problem at path, with the line of the nearest enclosing field
// that exists in the file (a missing field is reported at its parent).
func (v *validator) errorf(path, format string, args ...any) {
	line := 0
	for p := path; ; {
		if l, ok := v.lines[p]; ok {
			line = l
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		v.errs = append(v.errs, fmt.Errorf("%s:%d: %s: %s", v.name, line, path, msg))
	} else {
		v.errs = append(v.errs, fmt.Errorf("%s: %s: %s", v.name, path, msg))
	}
}

func (c *Config) fillDefaults() {
	if c.Replication == "" {
		c.Replication = ReplSync
	}
	for name, cl := range c.Clients {
		if cl.Resource == "" {
			cl.Resource = ShareProcess
			c.Clients[name] = cl
		}
	}
	for i := range c.Transactions {
		for j := range c.Transactions[i].Steps {
			s := &c.Transactions[i].Steps[j]
			s.Pattern, s.Count = defaultPattern(s.Pattern, s.Count)
			if s.Connection == "" && s.Call != "" {
				s.Connection = ConnPooled
			}
		}
	}
	for _, m := range []map[string]Op{c.Ops, c.Topics} {
		for k, op := range m {
			if op.Connection == "" {
				op.Connection = ConnPooled
			}
			for j := range op.DB {
				op.DB[j].Pattern, op.DB[j].Count = defaultPattern(op.DB[j].Pattern, op.DB[j].Count)
			}
			defaultCache(op.Cache)
			for j := range op.Async {
				if op.Async[j].Start == "" {
					op.Async[j].Start = StartEnd
				}
				defaultCache(op.Async[j].Cache)
			}
			m[k] = op
		}
	}
}

func defaultCache(calls []CacheCall) {
	for i := range calls {
		calls[i].Pattern, calls[i].Count = defaultPattern(calls[i].Pattern, calls[i].Count)
		calls[i].Command = strings.ToUpper(calls[i].Command)
	}
}

func defaultPattern(p string, n int) (string, int) {
	if p == "" {
		p = PatternSync
	}
	if n == 0 && p == PatternSync {
		n = 1
	}
	return p, n
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// validate checks the whole configuration, section by section, collecting
// every problem in v in the order the sections appear.
func (c *Config) validate(v *validator) {
	c.validateHost(v)
	seenTxn := c.validateTransactions(v)
	c.validateOpsAndTopics(v)
	c.validateSemconv(v)
	c.validateClients(v)
	c.validateQueries(v)
	c.validateVersions(v, seenTxn)
}

// validateHost checks the host-wide settings: CPU speed, replication and the
// hops that drop trace context. It opens cpu_speed_file once to prove it is readable.
func (c *Config) validateHost(v *validator) {
	if c.CPUMHz < 0 {
		v.errorf("cpu_mhz", "must be 0 (from /proc/cpuinfo) or positive, not %g", c.CPUMHz)
	}
	if c.CPUSpeedFile != "" {
		c.speed = &speedFile{path: c.CPUSpeedFile}
		if _, err := c.speed.read(); err != nil {
			v.errorf("cpu_speed_file", "%v", err)
		}
	}
	switch c.Replication {
	case ReplSync, ReplAsync, ReplNone:
	default:
		v.errorf("replication", "must be sync, async or none, not %q", c.Replication)
	}
	seenHop := map[string]bool{}
	for i, h := range c.DropContext {
		p := fmt.Sprintf("drop_context[%d]", i)
		if !contains(Hops, h) {
			v.errorf(p, "unknown hop %q (one of %s)", h, strings.Join(Hops, ", "))
		}
		if seenHop[h] {
			v.errorf(p, "duplicate hop %q", h)
		}
		seenHop[h] = true
	}
}

// validateTransactions checks each transaction and its steps, and returns
// the set of transaction names seen (versions may refer to them).
func (c *Config) validateTransactions(v *validator) map[string]bool {
	if len(c.Transactions) == 0 {
		v.errorf("transactions", "at least one transaction is required")
	}
	seenTxn := map[string]bool{}
	for i, t := range c.Transactions {
		p := fmt.Sprintf("transactions[%d]", i)
		switch {
		case t.Name == "":
			v.errorf(p+".name", "is required")
		case !nameRE.MatchString(t.Name):
			v.errorf(p+".name", "%q must match %s (it is a URL path segment)", t.Name, nameRE)
		case seenTxn[t.Name]:
			v.errorf(p+".name", "duplicate transaction %q", t.Name)
		}
		seenTxn[t.Name] = true
		if t.Class != ClassBrowsing && t.Class != ClassOrdering {
			v.errorf(p+".class", "must be browsing or ordering, not %q", t.Class)
		}
		checkMC(v, p+".web.cpu_mc", t.Web.CPUMC)
		for j, s := range t.Steps {
			c.validateStep(v, fmt.Sprintf("%s.steps[%d]", p, j), s)
		}
	}
	return seenTxn
}

// validateStep checks one transaction step at path sp: a call to the app
// (with its op, connection and transport) or a publish to a topic, never both.
func (c *Config) validateStep(v *validator, sp string, s Step) {
	switch {
	case s.Call != "" && s.Publish != "":
		v.errorf(sp, "has both call and publish; a step is one of them")
	case s.Call != "":
		if s.Call != App {
			v.errorf(sp+".call", "web calls app, not %q", s.Call)
		}
		if _, ok := c.Ops[s.Op]; !ok {
			v.errorf(sp+".op", "unknown op %q (not under ops)", s.Op)
		}
		checkConn(v, sp+".connection", s.Connection)
		switch s.Transport {
		case "", TransportHTTP:
		case TransportGRPC:
			// One HTTP/2 connection multiplexes every call.
			if s.Connection != ConnPooled {
				v.errorf(sp+".connection", "a grpc call is always pooled")
			}
		default:
			v.errorf(sp+".transport", "must be http or grpc, not %q", s.Transport)
		}
	case s.Publish != "":
		if _, ok := c.Topics[s.Publish]; !ok {
			v.errorf(sp+".publish", "unknown topic %q (not under topics)", s.Publish)
		}
		if s.Op != "" {
			v.errorf(sp+".op", "a publish step has no op")
		}
		if s.Connection != "" {
			v.errorf(sp+".connection", "a publish step always uses the pooled queue client")
		}
		if s.Pattern == PatternParallel {
			v.errorf(sp+".pattern", "publish is sync or serial")
		}
		if s.Transport != "" {
			v.errorf(sp+".transport", "a publish step always uses http")
		}
	default:
		v.errorf(sp, "needs call or publish")
	}
	checkPattern(v, sp, s.Pattern, s.Count)
}

// validateOpsAndTopics checks the app's ops and then the worker's topics,
// each in name order, with their database calls and async tasks.
func (c *Config) validateOpsAndTopics(v *validator) {
	for _, kind := range []struct {
		field string
		m     map[string]Op
	}{{"ops", c.Ops}, {"topics", c.Topics}} {
		for _, name := range sortedKeys(kind.m) {
			op := kind.m[name]
			p := kind.field + "." + name
			if !nameRE.MatchString(name) {
				v.errorf(p, "name %q must match %s", name, nameRE)
			}
			checkMC(v, p+".cpu_mc", op.CPUMC)
			checkConn(v, p+".connection", op.Connection)
			checkCache(v, p+".cache", op.Cache)
			for j, d := range op.DB {
				dp := fmt.Sprintf("%s.db[%d]", p, j)
				if _, ok := c.Queries[d.Query]; !ok {
					v.errorf(dp+".query", "unknown query %q (not under queries)", d.Query)
				}
				checkPattern(v, dp, d.Pattern, d.Count)
			}
			for j, a := range op.Async {
				c.validateAsync(v, fmt.Sprintf("%s.async[%d]", p, j), kind.field, a)
			}
		}
	}
}

// validateAsync checks one async task at path ap of an op or topic (field
// is "ops" or "topics"): a task or a publish, and only an app op publishes.
func (c *Config) validateAsync(v *validator, ap, field string, a Async) {
	switch {
	case (a.Task == "") == (a.Publish == ""):
		v.errorf(ap, "needs exactly one of task and publish")
	case a.Publish != "":
		if field != "ops" {
			v.errorf(ap+".publish", "only an app op publishes")
		} else if _, ok := c.Topics[a.Publish]; !ok {
			v.errorf(ap+".publish", "unknown topic %q (not under topics)", a.Publish)
		}
		if a.CPUMC != 0 || a.Wait != (Wait{}) || len(a.Cache) > 0 {
			v.errorf(ap, "a publish has no cpu_mc, wait_ms or cache")
		}
	}
	if a.Start != StartBegin && a.Start != StartEnd {
		v.errorf(ap+".start", "must be begin or end, not %q", a.Start)
	}
	checkMC(v, ap+".cpu_mc", a.CPUMC)
	checkWait(v, ap+".wait_ms", a.Wait)
	checkCache(v, ap+".cache", a.Cache)
}

// validateSemconv checks the per-service semantic-convention generation.
func (c *Config) validateSemconv(v *validator) {
	for _, svc := range sortedKeys(c.Semconv) {
		if !contains([]string{Web, App, DB, Worker}, svc) {
			v.errorf("semconv."+svc, "unknown service %q (web, app, db or worker)", svc)
		}
		if g := c.Semconv[svc]; g != SemconvCurrent && g != SemconvLegacy {
			v.errorf("semconv."+svc, "must be current or legacy, not %q", g)
		}
	}
}

// validateClients checks the client-span settings of the cache and db clients.
func (c *Config) validateClients(v *validator) {
	for _, name := range sortedKeys(c.Clients) {
		cl, p := c.Clients[name], "clients."+name
		if name != ClientCache && name != ClientDB {
			v.errorf(p, "unknown client %q (cache or db)", name)
		}
		if !nameRE.MatchString(cl.ServiceName) {
			v.errorf(p+".service_name", "%q must match %s", cl.ServiceName, nameRE)
		}
		if cl.Resource != ShareProcess && cl.Resource != ShareHost {
			v.errorf(p+".resource", "must be process or host, not %q", cl.Resource)
		}
	}
}

// validateQueries checks each query: its SQL, cost, and that its arguments
// match the SQL's placeholders and parse.
func (c *Config) validateQueries(v *validator) {
	for _, name := range sortedKeys(c.Queries) {
		q := c.Queries[name]
		p := "queries." + name
		if !nameRE.MatchString(name) {
			v.errorf(p, "name %q must match %s", name, nameRE)
		}
		if strings.TrimSpace(q.SQL) == "" {
			v.errorf(p+".sql", "is required")
		}
		checkMC(v, p+".cpu_mc", q.CPUMC)
		checkWait(v, p+".wait_ms", q.Wait)
		if q.Args != nil && len(q.Args) != strings.Count(q.SQL, "?") {
			v.errorf(p+".args", "has %d args for %d placeholders", len(q.Args), strings.Count(q.SQL, "?"))
		}
		for j, a := range q.Args {
			if _, err := ParseArg(a); err != nil {
				v.errorf(fmt.Sprintf("%s.args[%d]", p, j), "%v", err)
			}
		}
	}
}

// validateVersions checks each service's versions: every name an extra
// delay refers to must be something that service serves (seenTxn holds the
// transactions), and each delay must be within 0–10000 ms.
func (c *Config) validateVersions(v *validator, seenTxn map[string]bool) {
	served := map[string]func(string) bool{
		Web:    func(n string) bool { return seenTxn[n] },
		App:    func(n string) bool { _, ok := c.Ops[n]; return ok },
		Worker: func(n string) bool { _, ok := c.Topics[n]; return ok },
		DB:     func(n string) bool { _, ok := c.Queries[n]; return ok },
	}
	what := map[string]string{Web: "transaction", App: "op", Worker: "topic", DB: "query"}
	for _, svc := range sortedKeys(c.Versions) {
		p := "versions." + svc
		known, ok := served[svc]
		if !ok {
			v.errorf(p, "unknown service %q (web, app, db or worker)", svc)
			continue
		}
		for _, ver := range sortedKeys(c.Versions[svc]) {
			vp := p + "." + ver
			if !nameRE.MatchString(ver) {
				v.errorf(vp, "version %q must match %s", ver, nameRE)
			}
			for _, n := range sortedKeys(c.Versions[svc][ver].ExtraMS) {
				np := vp + ".extra_ms." + n
				if !known(n) {
					v.errorf(np, "unknown %s %q", what[svc], n)
				}
				if ms := c.Versions[svc][ver].ExtraMS[n]; ms < 0 || ms > 10000 {
					v.errorf(np, "must be between 0 and 10000 ms, not %g", ms)
				}
			}
		}
	}
}

func checkMC(v *validator, path string, mc float64) {
	if mc < 0 || mc > 1e5 {
		v.errorf(path, "must be between 0 and 100000 megacycles, not %g", mc)
	}
}

func checkWait(v *validator, path string, w Wait) {
	if w.Mean < 0 || w.SD < 0 || w.Mean > 1e4 || w.SD > 1e4 {
		v.errorf(path, "mean and sd must be between 0 and 10000 ms, not %g and %g", w.Mean, w.SD)
	}
}

func checkCache(v *validator, path string, calls []CacheCall) {
	for i, c := range calls {
		p := fmt.Sprintf("%s[%d]", path, i)
		if !contains(CacheCommands, c.Command) {
			v.errorf(p+".command", "must be one of %s, not %q", strings.Join(CacheCommands, ", "), c.Command)
		}
		if c.Key == "" {
			v.errorf(p+".key", "is required")
		} else if _, err := ParseArg(c.Key); err != nil {
			v.errorf(p+".key", "%v", err)
		}
		checkPattern(v, p, c.Pattern, c.Count)
	}
}

func checkConn(v *validator, path, conn string) {
	if conn != ConnPooled && conn != ConnNew {
		v.errorf(path, "must be pooled or new, not %q", conn)
	}
}

func checkPattern(v *validator, path, pattern string, count int) {
	switch pattern {
	case PatternSync:
		if count != 1 {
			v.errorf(path+".count", "must be 1 (or absent) for pattern sync, not %d", count)
		}
	case PatternSerial, PatternParallel:
		if count < 1 || count > MaxCount {
			v.errorf(path+".count", "must be between 1 and %d for pattern %s, not %d", MaxCount, pattern, count)
		}
	default:
		v.errorf(path+".pattern", "must be sync, serial or parallel, not %q", pattern)
	}
}

// MHz is the capacity that turns megacycles into busy time: cpu_mhz, else the
// first "cpu MHz" of /proc/cpuinfo, else DefaultMHz.
func (c *Config) MHz() float64 {
	if c.CPUMHz > 0 {
		return c.CPUMHz
	}
	return cpuinfoMHz()
}

func cpuinfoMHz() float64 {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return DefaultMHz
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, val, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "cpu MHz" {
			if mhz, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil && mhz > 0 {
				return mhz
			}
		}
	}
	return DefaultMHz
}

// BusyTime is the thread CPU time that mc megacycles take at MHz(), or at
// the speed cpu_speed_file shows now.
func (c *Config) BusyTime(mc float64) time.Duration {
	mhz := c.MHz()
	if c.speed != nil {
		mhz = c.speed.mhz(mhz)
	}
	return time.Duration(mc / mhz * float64(time.Second))
}

// speedFile reads a cpufreq-style speed file (kHz) at most once per
// speedRefresh, so a request costs no file read.
type speedFile struct {
	path string
	mu   sync.Mutex
	at   time.Time
	last float64 // MHz
}

const speedRefresh = 10 * time.Millisecond

func (f *speedFile) read() (float64, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return 0, err
	}
	khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || !(khz > 0) {
		return 0, fmt.Errorf("%s: want a speed in kHz, got %q", f.path, strings.TrimSpace(string(b)))
	}
	return khz / 1000, nil
}

// mhz is the speed last read; a file that cannot be read keeps the last
// good value (or fallback before any).
func (f *speedFile) mhz(fallback float64) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.at) >= speedRefresh {
		f.at = now
		if v, err := f.read(); err == nil {
			f.last = v
		}
	}
	if f.last > 0 {
		return f.last
	}
	return fallback
}

// Extra is the extra busy time version adds at service when serving name.
func (c *Config) Extra(service, version, name string) time.Duration {
	ms := c.Versions[service][version].ExtraMS[name]
	return time.Duration(ms * float64(time.Millisecond))
}

// HasVersion reports whether any service declares version, so a typo in --version
// is caught; a service that does not declare it runs it with no extra time.
func (c *Config) HasVersion(version string) bool {
	for _, vs := range c.Versions {
		if _, ok := vs[version]; ok {
			return true
		}
	}
	return len(c.Versions) == 0
}

// Dropped reports whether the hop "from->to" loses trace context.
// SetDropContext replaces drop_context, e.g. from a command-line flag.
func (c *Config) SetDropContext(hops []string) error {
	seen := map[string]bool{}
	for _, h := range hops {
		if !contains(Hops, h) {
			return fmt.Errorf("unknown hop %q (one of %s)", h, strings.Join(Hops, ", "))
		}
		if seen[h] {
			return fmt.Errorf("duplicate hop %q", h)
		}
		seen[h] = true
	}
	c.DropContext = hops
	return nil
}

func (c *Config) Dropped(from, to string) bool {
	return contains(c.DropContext, from+"->"+to)
}

// Legacy reports whether service's CLIENT and SERVER spans use the legacy
// attribute names.
func (c *Config) Legacy(service string) bool { return c.Semconv[service] == SemconvLegacy }

// UsesCache reports whether any op, topic or async task calls the cache tier.
func (c *Config) UsesCache() bool {
	for _, m := range []map[string]Op{c.Ops, c.Topics} {
		for _, op := range m {
			if len(op.Cache) > 0 {
				return true
			}
			for _, a := range op.Async {
				if len(a.Cache) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// UsesGRPC reports whether any web step calls app over gRPC.
func (c *Config) UsesGRPC() bool {
	for _, t := range c.Transactions {
		for _, s := range t.Steps {
			if s.Transport == TransportGRPC {
				return true
			}
		}
	}
	return false
}

// PublishesFromApp reports whether any app op publishes asynchronously.
func (c *Config) PublishesFromApp() bool {
	for _, op := range c.Ops {
		for _, a := range op.Async {
			if a.Publish != "" {
				return true
			}
		}
	}
	return false
}

// Transaction returns the named transaction.
func (c *Config) Transaction(name string) (Transaction, bool) {
	for _, t := range c.Transactions {
		if t.Name == name {
			return t, true
		}
	}
	return Transaction{}, false
}

// Classes maps each class to its transaction names, in file order (the load
// generator's Options.Classes).
func (c *Config) Classes() map[string][]string {
	m := map[string][]string{}
	for _, t := range c.Transactions {
		m[t.Class] = append(m[t.Class], t.Name)
	}
	return m
}

// Arg is a parsed query argument template: Text with "{LO-HI}" placeholders.
type Arg struct {
	parts []argPart
}

type argPart struct {
	lit    string
	lo, hi int64
	isRand bool
}

var argRE = regexp.MustCompile(`\{(-?\d+)-(-?\d+)\}`)

// ParseArg parses an argument template; "{LO-HI}" is a random integer in [LO, HI].
func ParseArg(s string) (Arg, error) {
	var a Arg
	last := 0
	for _, m := range argRE.FindAllStringSubmatchIndex(s, -1) {
		lo, _ := strconv.ParseInt(s[m[2]:m[3]], 10, 64)
		hi, _ := strconv.ParseInt(s[m[4]:m[5]], 10, 64)
		if hi < lo {
			return Arg{}, fmt.Errorf("range %s is empty", s[m[0]:m[1]])
		}
		if m[0] > last {
			a.parts = append(a.parts, argPart{lit: s[last:m[0]]})
		}
		a.parts = append(a.parts, argPart{lo: lo, hi: hi, isRand: true})
		last = m[1]
	}
	if last < len(s) || len(a.parts) == 0 {
		a.parts = append(a.parts, argPart{lit: s[last:]})
	}
	return a, nil
}

// Value draws the argument: an int64 when the template is exactly one range, else
// a string. intn(n) returns a uniform integer in [0, n).
func (a Arg) Value(intn func(int64) int64) any {
	if len(a.parts) == 1 && a.parts[0].isRand {
		p := a.parts[0]
		return p.lo + intn(p.hi-p.lo+1)
	}
	var b strings.Builder
	for _, p := range a.parts {
		if p.isRand {
			b.WriteString(strconv.FormatInt(p.lo+intn(p.hi-p.lo+1), 10))
		} else {
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
