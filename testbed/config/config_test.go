package config

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierscope/tierscope/testbed"
)

func TestDefaultParses(t *testing.T) {
	c := Default()
	if len(c.Transactions) != 6 || c.Replication != ReplSync || len(c.DropContext) != 0 {
		t.Fatalf("default: %d transactions, replication %q, drop %v", len(c.Transactions), c.Replication, c.DropContext)
	}
	if c.Ops["store"].Connection != ConnNew || c.Ops["item"].Connection != ConnPooled {
		t.Errorf("connections: store %q, item %q", c.Ops["store"].Connection, c.Ops["item"].Connection)
	}
	if got := c.Classes(); len(got[ClassBrowsing]) != 3 || len(got[ClassOrdering]) != 3 {
		t.Errorf("classes %v", got)
	}
	if c.Extra(Web, "v2", "Home").Milliseconds() != 2 || c.Extra(Web, "v1", "Home") != 0 || c.Extra(App, "v2", "catalog") != 0 {
		t.Error("version extra times")
	}
	if !c.HasVersion("v2") || c.HasVersion("v3") {
		t.Error("HasVersion")
	}
	if m := c.MHz(); !(m > 0) {
		t.Errorf("MHz %g", m)
	}
	// The file on disk is the embedded one.
	disk, err := os.ReadFile("../testbed.yaml")
	if err != nil || string(disk) != string(testbed.DefaultYAML) {
		t.Errorf("embedded default differs from testbed/testbed.yaml (%v)", err)
	}
}

const minimal = `cpu_mhz: 1000
transactions:
  - name: T
    class: browsing
    steps: [{call: app, op: o}]
ops:
  o: {cpu_mc: 1, db: [{query: q}]}
queries:
  q: {sql: "SELECT 1", cpu_mc: 0.5}
`

// cpu_speed_file emulates DVFS: busy time follows the speed the file shows,
// re-read at most every 10 ms, and a file that is not a speed is refused by
// name.
func TestCPUSpeedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scaling_setspeed")
	if err := os.WriteFile(path, []byte("500000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]byte(minimal+"cpu_speed_file: "+path+"\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BusyTime(1); got != 2*time.Millisecond {
		t.Errorf("1 mc at 500 MHz: %v, want 2ms", got)
	}
	if err := os.WriteFile(path, []byte("1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * speedRefresh)
	if got := c.BusyTime(1); got != time.Millisecond {
		t.Errorf("1 mc at 1000 MHz: %v, want 1ms", got)
	}
	if err := os.WriteFile(path, []byte("<unsupported>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * speedRefresh)
	if got := c.BusyTime(1); got != time.Millisecond {
		t.Errorf("unreadable speed: %v, want the last good 1ms", got)
	}
	_, err = Parse([]byte(minimal+"cpu_speed_file: "+path+"\n"), "m.yaml")
	if err == nil || !strings.Contains(err.Error(), "m.yaml:") || !strings.Contains(err.Error(), "cpu_speed_file") || !strings.Contains(err.Error(), "<unsupported>") {
		t.Errorf("a file without a speed: error %v, want one naming cpu_speed_file and the content", err)
	}
}

func TestBadConfigs(t *testing.T) {
	if _, err := Parse([]byte(minimal), "m.yaml"); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown field", strings.Replace(minimal, "cpu_mc: 1,", "cpu_mcs: 1,", 1), []string{"m.yaml:7: field cpu_mcs not found"}},
		{"bad type", strings.Replace(minimal, "cpu_mhz: 1000", "cpu_mhz: fast", 1), []string{"m.yaml:1: ", "fast"}},
		{"duplicate key", minimal + "cpu_mhz: 2\n", []string{"cpu_mhz", "already defined"}},
		{"unknown op", strings.Replace(minimal, "op: o}", "op: nope}", 1), []string{"m.yaml:5: transactions[0].steps[0].op", `"nope"`}},
		{"class", strings.Replace(minimal, "browsing", "shopping", 1), []string{"m.yaml:4: transactions[0].class"}},
		{"serial without count", strings.Replace(minimal, "op: o}", "op: o, pattern: serial}", 1), []string{"m.yaml:5: transactions[0].steps[0].count", "serial"}},
		{"sync with count", strings.Replace(minimal, "op: o}", "op: o, count: 3}", 1), []string{"transactions[0].steps[0].count", "sync"}},
		{"pattern", strings.Replace(minimal, "{query: q}", "{query: q, pattern: burst, count: 2}", 1), []string{"m.yaml:7: ops.o.db[0].pattern", "burst"}},
		{"connection", strings.Replace(minimal, "{query: q}]}", "{query: q}], connection: reuse}", 1), []string{"ops.o.connection", "reuse"}},
		{"unknown query", strings.Replace(minimal, "{query: q}", "{query: r}", 1), []string{"m.yaml:7: ops.o.db[0].query", `"r"`}},
		{"hop", minimal + "drop_context: [web->db]\n", []string{"m.yaml:10: drop_context[0]", "web->db"}},
		{"replication", minimal + "replication: maybe\n", []string{"m.yaml:10: replication", "maybe"}},
		{"negative cpu", strings.Replace(minimal, "cpu_mc: 0.5", "cpu_mc: -1", 1), []string{"m.yaml:9: queries.q.cpu_mc"}},
		{"args count", strings.Replace(minimal, `cpu_mc: 0.5}`, `cpu_mc: 0.5, args: ["{1-2}"]}`, 1), []string{"queries.q.args", "1 args for 0 placeholders"}},
		{"missing class", strings.Replace(minimal, "    class: browsing\n", "", 1), []string{"m.yaml:3: transactions[0].class"}},
		{"version service", minimal + "versions: {cache: {v1: {}}}\n", []string{"versions.cache", "unknown service"}},
		{"version key", minimal + "versions: {app: {v2: {extra_ms: {T: 1}}}}\n", []string{"m.yaml:10: versions.app.v2.extra_ms.T", `unknown op "T"`}},
		{"publish topic", strings.Replace(minimal, "{call: app, op: o}", "{publish: nope}", 1), []string{"transactions[0].steps[0].publish", "unknown topic"}},
		{"no transactions", "cpu_mhz: 1\n", []string{"transactions", "at least one"}},
		{"empty", "", []string{"m.yaml: empty configuration"}},
		{"duplicate transaction", strings.Replace(minimal, "ops:", "  - {name: T, class: ordering}\nops:", 1), []string{"m.yaml:6: transactions[1].name", "duplicate"}},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.yaml), "m.yaml")
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tc.name, err, w)
			}
		}
	}
}

func TestArgs(t *testing.T) {
	mid := func(n int64) int64 { return n / 2 }
	for tmpl, want := range map[string]any{
		"{1-1000}":     int64(501),
		"%item {1-9}%": "%item 5%",
		"user{1-100}":  "user51",
		"plain":        "plain",
		"":             "",
	} {
		a, err := ParseArg(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Value(mid); got != want {
			t.Errorf("%q: %v (%T), want %v", tmpl, got, got, want)
		}
	}
	if _, err := ParseArg("{5-1}"); err == nil {
		t.Error("empty range accepted")
	}
}

func TestTruth(t *testing.T) {
	c := Default()
	c.CPUMHz = 2000
	raw, err := json.Marshal(c.Truth())
	if err != nil {
		t.Fatal(err)
	}
	// The JSON shape is the contract with other tools.
	var doc struct {
		CPUMHz       float64             `json:"cpu_mhz"`
		Replication  string              `json:"replication"`
		Versions     map[string][]string `json:"versions"`
		Transactions []struct {
			Name    string                        `json:"name"`
			Class   string                        `json:"class"`
			Nodes   []string                      `json:"nodes"`
			CPUMC   map[string]float64            `json:"cpu_mc"`
			BusyMS  map[string]float64            `json:"busy_ms"`
			ExtraMS map[string]map[string]float64 `json:"extra_ms"`
			Edges   []struct {
				From, To, Name, Pattern string
				Count                   int
				Async                   bool
				ContextDropped          bool `json:"context_dropped"`
			} `json:"edges"`
			Tree map[string]any `json:"tree"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.CPUMHz != 2000 || doc.Replication != "sync" || len(doc.Versions["web"]) != 2 || len(doc.Transactions) != 6 {
		t.Fatalf("truth header: %s", raw)
	}
	byName := map[string]int{}
	for i, tx := range doc.Transactions {
		byName[tx.Name] = i
		if tx.Tree["service"] != "web" || tx.Tree["name"] != tx.Name {
			t.Errorf("%s: tree root %v", tx.Name, tx.Tree)
		}
	}
	home := doc.Transactions[byName["Home"]]
	if home.Class != "browsing" || strings.Join(home.Nodes, ",") != "web,app,db" {
		t.Errorf("Home: %+v", home)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(home.CPUMC["web"], 1) || !near(home.CPUMC["app"], 2) || !near(home.CPUMC["db"], 0.5) || !near(home.BusyMS["app"], 1) {
		t.Errorf("Home cpu: %v busy %v", home.CPUMC, home.BusyMS)
	}
	if home.ExtraMS["web"]["v2"] != 2 || home.ExtraMS["web"]["v1"] != 0 || home.ExtraMS["app"]["v1"] != 0 {
		t.Errorf("Home extra: %v", home.ExtraMS)
	}

	view := doc.Transactions[byName["ViewItem"]]
	if len(view.Edges) != 2 || view.Edges[0].Pattern != "serial" || view.Edges[0].Count != 3 ||
		view.Edges[1].From != "app" || view.Edges[1].To != "db" || view.Edges[1].Count != 3 {
		t.Errorf("ViewItem edges: %+v", view.Edges)
	}
	if !near(view.CPUMC["app"], 3) || !near(view.CPUMC["db"], 0.6) {
		t.Errorf("ViewItem cpu: %v", view.CPUMC)
	}

	bid := doc.Transactions[byName["PutBid"]]
	edges := map[string]int{}
	async := map[string]bool{}
	for _, e := range bid.Edges {
		k := e.From + "->" + e.To + ":" + e.Name
		edges[k] += e.Count
		async[k] = e.Async
	}
	want := map[string]int{"web->app:bid": 1, "app->db:insert_bid": 1, "db->db:insert_bid": 1,
		"web->worker:notify": 1, "worker->db:insert_notice": 1, "db->db:insert_notice": 1}
	for k, n := range want {
		if edges[k] != n {
			t.Errorf("PutBid edge %s: %d, want %d (%v)", k, edges[k], n, edges)
		}
	}
	if !async["web->worker:notify"] || async["db->db:insert_bid"] || async["web->app:bid"] {
		t.Errorf("PutBid async flags: %v", async)
	}
	if !near(bid.CPUMC["db"], 0.5+0.5+0.3+0.3) || !near(bid.CPUMC["worker"], 1) {
		t.Errorf("PutBid cpu (replication doubles db writes): %v", bid.CPUMC)
	}

	// drop_context and async replication show on the edges.
	c.DropContext = []string{"web->app"}
	c.Replication = ReplAsync
	for _, e := range c.Truth().Transactions[3].Edges {
		if (e.From == "web" && e.To == "app") != e.ContextDropped {
			t.Errorf("edge %+v: context_dropped", e)
		}
		if e.From == "db" && !e.Async {
			t.Errorf("edge %+v: async replication", e)
		}
	}
}
