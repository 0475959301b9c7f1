// Package tpcwsim replays the case study of paper 004 (§IV, §VIII) as a
// deterministic discrete-event simulation, to produce the monitoring windows
// (docs/formats.md §6) that application signatures are built from.
//
// What it simulates:
//   - The 14 TPC-W transactions (paper 004 Table II, numbered as there), each
//     with a mean front-server CPU demand, a number of outbound database calls
//     and a database demand per call. The demands are this package's choice
//     (the paper does not list them); they are set so that the front server's
//     one-minute utilization spans the ranges of Table IV.
//   - Emulated browsers (EBs) as in TPC-W: each thinks for an exponential time
//     (mean 7 s, truncated at 70 s, TPC-W clause 5.3.2.1), then issues one
//     transaction drawn from its mix, waits for the reply, and thinks again.
//     The browsing, shopping and ordering mixes use the TPC-W transaction
//     frequencies (clause 5.2.4.1); draws are independent with those
//     frequencies rather than following the full navigation graph.
//   - The non-stationary workloads of Table III: three base processes with a
//     fixed number of EBs each (browsing, shopping, ordering), and the random
//     process of figure 2 running the shopping mix with random(150, 700) EBs
//     for random(20, 30) minutes, then sleeping random(10, 20) minutes, for
//     three hours. When the random process sleeps its EBs finish the
//     transaction they are in and leave.
//   - The front server as one processor-sharing CPU (paper 004 §VI: Linux
//     time slicing in the limit), simulated exactly with a virtual-time PS
//     queue: every job in service progresses at rate 1/n. A transaction
//     alternates CPU bursts at the front with its database calls; its front
//     demand is split evenly over the bursts and varies as an Erlang-4 (CV
//     0.5). A small background load (1% by default: daemons, GC) shares the
//     CPU. Utilization is the CPU's busy fraction in each one-minute window.
//   - The database server as a second processor-sharing CPU, and a network
//     round trip on every call, so the outbound latency that equation 1
//     subtracts includes queueing and communication, as in paper 004 fig. 5.
//   - A non-CPU bottleneck: Execute Search runs inside a critical section of
//     LockCapacity slots (a searcher pool), held from its first burst to its
//     last. It costs nothing at low load and adds waiting at high load: the
//     paper's §IX Execute Search false alarm.
//   - A new version adds deterministic CPU time to chosen transactions (the
//     paper's "CPU-hungry loop" in Home, §VIII).
//
// Every run is deterministic for its seed.
package tpcwsim

// Transaction is one TPC-W transaction type.
type Transaction struct {
	ID       int    // the paper's number (Table II)
	Name     string // as in Table II
	Browsing bool   // browsing or ordering type (Table II)
	// FrontMs is the mean CPU demand at the front server.
	FrontMs float64
	// DBCalls is the number of outbound database calls, and DBMs the mean
	// database CPU demand of each.
	DBCalls int
	DBMs    float64
}

// Transactions are the 14 TPC-W transactions, indexed by ID−1.
var Transactions = []Transaction{
	{1, "Admin Request", false, 5.5, 1, 2.0},
	{2, "Admin Confirm", false, 13.0, 3, 4.0},
	{3, "Best Sellers", true, 6.5, 1, 11.0},
	{4, "Buy Confirm", false, 8.5, 4, 3.0},
	{5, "Buy Request", false, 7.0, 3, 2.0},
	{6, "Customer Registration", false, 2.8, 0, 0},
	{7, "Execute Search", true, 7.5, 1, 7.5},
	{8, "Home", true, 7.5, 2, 1.5},
	{9, "New Products", true, 5.5, 1, 7.5},
	{10, "Order Display", false, 4.6, 2, 2.2},
	{11, "Order Inquiry", false, 2.3, 0, 0},
	{12, "Product Detail", true, 3.7, 1, 1.2},
	{13, "Search Request", true, 3.2, 1, 0.8},
	{14, "Shopping Cart", false, 6.0, 2, 2.0},
}

// ByName returns the index of the named transaction, or -1.
func ByName(name string) int {
	for i, t := range Transactions {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// Mix is the frequency of each transaction, in percent, indexed by ID−1.
type Mix struct {
	Name string
	Pct  [14]float64
}

// The TPC-W mixes (clause 5.2.4.1). Order: Admin Request, Admin Confirm, Best
// Sellers, Buy Confirm, Buy Request, Customer Registration, Execute Search
// (Search Results), Home, New Products, Order Display, Order Inquiry, Product
// Detail, Search Request, Shopping Cart.
var (
	Browsing = Mix{"browsing", [14]float64{0.10, 0.09, 11.00, 0.69, 0.75, 0.82, 11.00, 29.00, 11.00, 0.25, 0.30, 21.00, 12.00, 2.00}}
	Shopping = Mix{"shopping", [14]float64{0.10, 0.09, 5.00, 1.20, 2.60, 3.00, 17.00, 16.00, 5.00, 0.66, 0.75, 17.00, 20.00, 11.60}}
	Ordering = Mix{"ordering", [14]float64{0.12, 0.11, 0.46, 10.18, 12.73, 12.86, 13.08, 9.12, 0.46, 0.22, 0.25, 12.35, 14.53, 13.53}}
)

// Workload is a non-stationary transaction mix of paper 004 Table III.
type Workload struct {
	Name                                  string
	BrowsingEBs, ShoppingEBs, OrderingEBs int
	// RandomMinEBs and RandomMaxEBs are the range of the random process of
	// figure 2, which runs the shopping mix.
	RandomMinEBs, RandomMaxEBs int
}

// The three workloads of Table III, and a heavier one that drives the front
// server to high utilization (the §IX false-alarm regime).
var (
	MixI   = Workload{"Mix I", 20, 30, 50, 150, 700}
	MixII  = Workload{"Mix II", 50, 50, 50, 150, 700}
	MixIII = Workload{"Mix III", 50, 30, 100, 150, 700}
	// MixHeavy keeps Mix III's base processes and lets the random process
	// reach 1100 EBs: up to about 90% front utilization.
	MixHeavy = Workload{"Mix heavy", 50, 30, 100, 400, 1100}
)

// Mixes are the three workloads of Table III.
var Mixes = []Workload{MixI, MixII, MixIII}
