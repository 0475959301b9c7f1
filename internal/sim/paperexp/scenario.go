// Package paperexp replays the experiments of paper 002 §5 (Pacifici et al.,
// "Dynamic estimation of CPU demand of web traffic") as a deterministic
// simulation, so the work-factor estimator can be scored against known truth.
//
// What comes from the paper:
//
//   - 16 flows A–P in 9 clusters on 4 machines (xd008–xd011) of 4,585 standard
//     MHz, three server processes per machine (Tables 1, 2 and 12);
//   - the relative throughputs of Table 2, with C and D collapsed onto B in the
//     experiments without collinearity, scaled so that flow A runs at about 35.5
//     requests per second, as in Tables 6–9 (the paper's absolute rates; its
//     phase powers of roughly 550, 710, 1720, 620 and 1570 standard MHz follow);
//   - 11 request kinds with the work factors of Table 3, bound to flows per phase
//     as in Table 4 (no collinearity), Table 11 (first collinearity experiment) and
//     Table 13 (second);
//   - 5 phases of 2 hours, 1-minute periods, a 30-minute transient and a
//     90-minute tail per phase;
//   - Poisson arrivals of sessions, each a geometric number of requests separated
//     by think times.
//
// What the paper leaves open, chosen here (Noise and Config document each):
//
//   - Sessions have 3 requests on average (geometric) and 7 s of mean think
//     time. Each flow has its own Poisson stream of sessions, as §5.2 says "all
//     the arrival process parameters are identical across the flows, except for
//     the mean session arrival rate"; this reproduces the spread of Table 6 (A
//     between 31.9 and 39.2 requests per second over 30 minutes). Its other
//     sentence, "each request is randomly chosen from among the flows", is
//     Config.SharedSessions: one stream, which correlates the flows' rates but
//     spreads A's only over 32.8–36.8.
//   - A request runs on one process of its flow's cluster, chosen at random, and
//     costs its kind's work factor times a gamma variate of mean 1 (coefficient of
//     variation 0.3).
//   - Background CPU not caused by requests: an operating-system baseline per
//     machine, a slow random drift, per-second jitter, an idle cost per server
//     process, and rare bursts (cron jobs, log rotation) of one core for 20–60 s.
//     The steady part (0.65% of Ω) is calibrated on the bias of the paper's own
//     estimates (DefaultNoise); Noise.Scaled varies it.
//   - Readings: machine utilization is read over the minute shifted by 2 s from
//     the throughput minute; per-process readings by a random 0–10 s (the paper
//     found them less well synchronized); readings are rounded to 0.01%.
//   - Phase 1 starts cold, as in the paper (its phase-1 transient errors are far
//     below the other phases'): the estimator has seen nothing before. A period
//     in which a flow has no estimate yet is not scored (the paper's error is
//     that of "the alpha estimate produced from that period"); Row.Missing
//     counts them.
//   - The second collinearity experiment (Tables 12 and 13) gives only A–D's
//     kinds; E–P keep their Table 11 phase-1 kinds, and it runs one 4-hour phase.
package paperexp

// Machines of §5.2.
var Machines = []string{"xd008", "xd009", "xd010", "xd011"}

// CapacityMHz is every machine's power, in standard MHz (§5.2).
const CapacityMHz = 4585

// KindAlpha is Table 3: the work factor of request kinds 1–11, in standard
// megacycles (index 0 unused).
var KindAlpha = [12]float64{0, 39.0, 18.2, 13.5, 11.1, 5.2, 5.0, 3.8, 6.3, 3.3, 3.3, 3.2}

// FlowSpec is one flow of Table 2.
type FlowSpec struct {
	Name    string
	Cluster string
	// Rel is the relative throughput.
	Rel float64
}

// Scenario is one experiment's placement, flows and bindings.
type Scenario struct {
	Name string
	// Placement lists the clusters with a process on each machine.
	Placement map[string][]string
	Flows     []FlowSpec
	// Kinds[p][f] is the request kind of flow f (index into Flows) in phase p.
	Kinds [][]int
	// PhaseSec is the length of a phase in seconds.
	PhaseSec int
	// TransientSec is the length of the transient stage of each phase.
	TransientSec int
	// WarmupSec is the unscored warm-up, bound as WarmupKinds, or as the last
	// phase when that is nil.
	WarmupSec   int
	WarmupKinds []int
}

var table1 = map[string][]string{
	"xd008": {"C1", "C3", "C7"},
	"xd009": {"C1", "C4", "C8"},
	"xd010": {"C2", "C5", "C9"},
	"xd011": {"C2", "C3", "C6"},
}

var table12 = map[string][]string{
	"xd008": {"C1", "C2", "C7"},
	"xd009": {"C1", "C2", "C8"},
	"xd010": {"C3", "C5", "C9"},
	"xd011": {"C3", "C4", "C6"},
}

// Table 2: cluster and relative throughputs with collinearity (C and D apart
// from B); without collinearity B carries C's and D's throughput too.
var table2 = []FlowSpec{
	{"A", "C1", 539304}, {"B", "C2", 277823}, {"C", "C2", 98055}, {"D", "C2", 22880},
	{"E", "C3", 22062}, {"F", "C4", 18794}, {"G", "C5", 9806}, {"H", "C2", 4086},
	{"I", "C6", 2697}, {"J", "C7", 2697}, {"K", "C2", 1389}, {"L", "C8", 82},
	{"M", "C9", 82}, {"N", "C9", 82}, {"O", "C1", 82}, {"P", "C1", 82},
}

// Table 4, flows A B E F G H I J K L M N O P.
var table4 = [][]int{
	{8, 4, 9, 3, 7, 6, 2, 5, 1, 5, 1, 2, 4, 3},
	{6, 2, 8, 3, 7, 1, 9, 5, 4, 1, 3, 2, 5, 4},
	{1, 4, 5, 9, 8, 6, 3, 7, 2, 3, 4, 1, 5, 2},
	{3, 9, 5, 4, 2, 1, 7, 6, 8, 3, 5, 2, 1, 4},
	{1, 6, 4, 9, 7, 8, 2, 3, 5, 4, 3, 1, 2, 5},
}

// Table 11, flows A–P.
var table11 = [][]int{
	{4, 3, 11, 9, 10, 6, 2, 1, 8, 7, 5, 2, 4, 5, 3, 1},
	{5, 11, 6, 2, 3, 7, 8, 10, 1, 4, 9, 2, 1, 3, 5, 4},
	{8, 1, 9, 3, 5, 2, 11, 7, 10, 4, 6, 2, 3, 4, 5, 1},
	{10, 6, 5, 11, 7, 2, 8, 3, 4, 9, 1, 3, 2, 4, 1, 5},
	{1, 11, 6, 7, 10, 3, 4, 2, 9, 8, 5, 2, 1, 5, 4, 3},
}

// NoCollinearity is the baseline of §5.3 and §5.4: Table 1 placement, C and D
// collapsed onto B (14 flows), Table 4 bindings.
func NoCollinearity() Scenario {
	var flows []FlowSpec
	for _, f := range table2 {
		switch f.Name {
		case "B":
			f.Rel = 398758
		case "C", "D":
			continue
		}
		flows = append(flows, f)
	}
	return Scenario{Name: "no-collinearity", Placement: table1, Flows: flows, Kinds: table4,
		PhaseSec: 7200, TransientSec: 1800}
}

// Collinearity1 is the first experiment of §5.5: B, C and D apart on cluster
// C2 (16 flows), Table 1 placement, Table 11 bindings.
func Collinearity1() Scenario {
	return Scenario{Name: "collinearity-1", Placement: table1, Flows: table2, Kinds: table11,
		PhaseSec: 7200, TransientSec: 1800}
}

// Collinearity2 is the second experiment of §5.5: Table 12 placement (A's and
// B, C, D's clusters on the same two machines) and Table 13 bindings, A=4, B=3,
// C=2, D=1; the other flows keep their Table 11 phase-1 kinds. One 4-hour phase
// after a 1-hour warm-up bound as Table 11 phase 5.
func Collinearity2() Scenario {
	kinds := append([]int(nil), table11[0]...)
	kinds[0], kinds[1], kinds[2], kinds[3] = 4, 3, 2, 1
	return Scenario{Name: "collinearity-2", Placement: table12, Flows: table2,
		Kinds: [][]int{kinds}, WarmupKinds: table11[4], PhaseSec: 4 * 3600, TransientSec: 1800, WarmupSec: 3600}
}

// FlowNames returns the scenario's flow names in order.
func (s Scenario) FlowNames() []string {
	names := make([]string, len(s.Flows))
	for i, f := range s.Flows {
		names[i] = f.Name
	}
	return names
}
