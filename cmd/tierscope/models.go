package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tierscope/tierscope/internal/api"
)

const modelsUsage = `models [--api URL] [--truth truth.json] [--what-if 'link:web->app=+10'] [--from T --to T]`

// runModels prints what the perfmodel exporter's API knows beyond the paths:
// the work factors of every flow (beside its known CPU burn when --truth gives
// the testbed's ground truth), the signatures, the measured gradients and a
// what-if prediction. It is the text form of the provisioned dashboard's
// panels, for `make run` and for operators without Grafana.
func runModels(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("models", modelsUsage, stderr)
	var (
		apiURL    = fs.String("api", "http://127.0.0.1:8790", "the perfmodel exporter's API, with or without /api/v1")
		tokenFile = fs.String("token-file", "", "file holding the API's bearer token (default: $TIERSCOPE_TOKEN)")
		truthFile = fs.String("truth", "", "the testbed's ground truth (`testbed truth`): each flow's known CPU burn beside its work factor")
		from      = fs.String("from", "", "start of the range (unix seconds or RFC 3339; default: the API's, the last hour)")
		to        = fs.String("to", "", "end of the range (default: now)")
		timeout   = fs.Duration("timeout", 60*time.Second, "bound of each API call")
		whatIf    stringList
	)
	fs.Var(&whatIf, "what-if", "a change to predict, ELEMENT=DELTA (ms for a link), e.g. 'link:web->app=+10' (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	changes := make([]api.Change, 0, len(whatIf))
	for _, w := range whatIf {
		el, d, ok := strings.Cut(w, "=")
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(d), "ms"), 64)
		if !ok || el == "" || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return usagef("--what-if %q: want ELEMENT=DELTA, e.g. 'link:web->app=+10'", w)
		}
		changes = append(changes, api.Change{Element: el, Delta: v})
	}
	var truth *testbedTruth
	if *truthFile != "" {
		data, err := os.ReadFile(*truthFile)
		if err != nil {
			return err
		}
		t, err := parseTruth(data)
		if err != nil {
			return fmt.Errorf("%s: %w", *truthFile, err)
		}
		truth = &t
	}
	c, err := apiClient(*apiURL, *tokenFile, *timeout)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *from != "" {
		q.Set("from", *from)
	}
	if *to != "" {
		q.Set("to", *to)
	}
	rng := ""
	if len(q) > 0 {
		rng = "?" + q.Encode()
	}

	var wf api.WorkFactors
	if err := c.call(http.MethodGet, api.PathWorkFactors+rng, nil, &wf); err != nil {
		return err
	}
	printWorkFactors(stdout, wf, truth)
	var sigs api.Signatures
	if err := c.call(http.MethodGet, api.PathSignatures+rng, nil, &sigs); err != nil {
		return err
	}
	printSignatures(stdout, sigs)
	var grads api.Gradients
	if err := c.call(http.MethodGet, api.PathGradients, nil, &grads); err != nil {
		return err
	}
	printGradients(stdout, grads)
	if len(changes) > 0 {
		var p api.Prediction
		err := c.call(http.MethodPost, api.PathPredict, api.PredictRequest{Changes: changes}, &p)
		printPrediction(stdout, whatIf, p, err)
	}
	return nil
}

// testbedTruth is what `testbed truth` says of each request kind: the burn
// of one request of every flow ("service name", as truthKey names flows), and
// per transaction how many requests of each flow one request makes.
type testbedTruth struct {
	burn         map[string]float64
	transactions []truthTransaction
}

type truthTransaction struct {
	name  string
	flows map[string]float64 // flow → requests per transaction request
}

func parseTruth(data []byte) (testbedTruth, error) {
	type node struct {
		Service string  `json:"service"`
		Name    string  `json:"name"`
		CPUMC   float64 `json:"cpu_mc"`
		Calls   []struct {
			Count  int   `json:"count"`
			Callee *node `json:"callee"`
		} `json:"calls"`
	}
	var doc struct {
		Transactions []struct {
			Name string `json:"name"`
			Tree *node  `json:"tree"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return testbedTruth{}, fmt.Errorf("not the testbed's truth: %w", err)
	}
	t := testbedTruth{burn: map[string]float64{}}
	for _, tx := range doc.Transactions {
		flows := map[string]float64{}
		var walk func(n *node, times float64)
		walk = func(n *node, times float64) {
			if n == nil {
				return
			}
			key := n.Service + " " + n.Name
			t.burn[key] = n.CPUMC
			flows[key] += times
			for _, c := range n.Calls {
				walk(c.Callee, times*float64(max(c.Count, 1)))
			}
		}
		walk(tx.Tree, 1)
		t.transactions = append(t.transactions, truthTransaction{name: tx.Name, flows: flows})
	}
	if len(t.transactions) == 0 {
		return testbedTruth{}, fmt.Errorf("no transactions in the truth")
	}
	return t, nil
}

// truthKey maps a flow ("web /txn/Home", "db POST /query/get_item") to the
// truth's key ("web Home", "db get_item").
func truthKey(flow string) string {
	service, tx, _ := strings.Cut(flow, " ")
	return service + " " + path.Base(tx)
}

func printWorkFactors(w io.Writer, wf api.WorkFactors, truth *testbedTruth) {
	fmt.Fprintln(w, "Work factors: CPU megacycles per request of each flow (paper 002's regression of CPU on request rates)")
	if len(wf.Machines) == 0 || len(wf.Machines[0].Flows) == 0 {
		fmt.Fprintln(w, "    none yet: they need SERVER spans and CPU utilization (hostmetrics) of the same host.name over several windows,")
		fmt.Fprintln(w, "    and the CPU capacity (system.cpu.frequency or capacity_mhz); see the exporter's README")
		fmt.Fprintln(w)
		return
	}
	for _, m := range wf.Machines {
		fmt.Fprintf(w, "    on %s: R² %.2f over %d windows\n", m.Machine, m.R2, seriesLen(m))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		if truth != nil {
			fmt.Fprintln(tw, "    flow\testimate Mc\tknown burn Mc\t")
		} else {
			fmt.Fprintln(tw, "    flow\testimate Mc\t")
		}
		flows := slices.Clone(m.Flows)
		slices.SortFunc(flows, func(a, b api.FlowWorkFactor) int { return strings.Compare(a.Flow, b.Flow) })
		estimate := map[string]float64{}
		for _, f := range flows {
			estimate[truthKey(f.Flow)] = f.WorkFactor
			if truth == nil {
				fmt.Fprintf(tw, "    %s\t%.2f\t\n", f.Flow, f.WorkFactor)
			} else if burn, ok := truth.burn[truthKey(f.Flow)]; ok {
				fmt.Fprintf(tw, "    %s\t%.2f\t%.2f\t\n", f.Flow, f.WorkFactor, burn)
			} else {
				fmt.Fprintf(tw, "    %s\t%.2f\t—\t\n", f.Flow, f.WorkFactor)
			}
		}
		tw.Flush()
		for _, g := range m.Groups {
			fmt.Fprintf(w, "    solved as one (%s): %s\n", g.Reason, strings.Join(g.Flows, ", "))
		}
		if truth != nil {
			printTransactionCosts(w, truth, estimate)
		}
	}
	if truth != nil {
		fmt.Fprintln(w, "    The burn is what the testbed's configuration busy-loops per request; a request also costs what is not burned")
		fmt.Fprintln(w, "    (HTTP, tracing, SQLite), which the estimate includes. Flows that always run together (a transaction's web, app")
		fmt.Fprintln(w, "    and db requests, here in one process) cannot be told apart, only their sum: hence the totals per transaction.")
		fmt.Fprintln(w, "    WORKFACTORS=1 make run runs each tier as its own process and checks every flow against its measured cost.")
	}
	fmt.Fprintln(w)
}

// printTransactionCosts sums, per transaction, the work factors of the flows
// one request makes (their counts from the truth) beside the burn they are
// known to make; flows without an estimate (the worker serves no SERVER span)
// are named.
func printTransactionCosts(w io.Writer, truth *testbedTruth, estimate map[string]float64) {
	fmt.Fprintln(w, "    per transaction (the flows one request makes):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    transaction\testimate Mc\tknown burn Mc\testimate / burn\t")
	for _, tx := range truth.transactions {
		var est, burn float64
		var missing []string
		for _, flow := range slices.Sorted(maps.Keys(tx.flows)) {
			n := tx.flows[flow]
			e, ok := estimate[flow]
			if !ok {
				missing = append(missing, flow)
				continue
			}
			est += n * e
			burn += n * truth.burn[flow]
		}
		note := ""
		if len(missing) > 0 {
			note = "  without " + strings.Join(missing, ", ")
		}
		ratio := "—"
		if burn > 0 {
			ratio = fmt.Sprintf("%.2f", est/burn)
		}
		fmt.Fprintf(tw, "    %s\t%.2f\t%.2f\t%s\t%s\n", tx.name, est, burn, ratio, note)
	}
	tw.Flush()
}

func seriesLen(m api.MachineWorkFactors) int {
	n := 0
	for _, s := range m.Series {
		n = max(n, len(s.Times))
	}
	return n
}

func printSignatures(w io.Writer, sigs api.Signatures) {
	fmt.Fprintln(w, "Signatures: each transaction's service time with the load taken out (paper 004: latency against CPU utilization)")
	if len(sigs.Signatures) == 0 {
		fmt.Fprintln(w, "    none yet: no SERVER spans in the range")
		fmt.Fprintln(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    service\tversion\ttransaction\tservice time\tstatus\tutilization buckets")
	ok := 0
	for _, s := range sigs.Signatures {
		for _, t := range s.Transactions {
			st := "—"
			if t.ServiceTimeMs != nil {
				st = fmt.Sprintf("%.2f ms", *t.ServiceTimeMs)
				ok++
			}
			status := t.Status
			if t.Shape != "" && t.ServiceTimeMs != nil {
				status += ", " + t.Shape
			}
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%d\n", s.Service, s.Version, t.Transaction, st, status, t.BucketsUsed)
		}
	}
	tw.Flush()
	if ok == 0 {
		fmt.Fprintln(w, "    No transaction has enough utilization buckets (5 of ≥ 5 requests): the CPU utilization did not vary enough over")
		fmt.Fprintln(w, "    the range (a machine busy with other work stays near 100%); a longer run or a quieter machine gives them.")
	}
	fmt.Fprintln(w)
}

func printGradients(w io.Writer, g api.Gradients) {
	fmt.Fprintln(w, "Gradients: ms of response time per ms of delay on an element (paper 000, a spectral experiment)")
	if len(g.Gradients) == 0 {
		fmt.Fprintln(w, "    none yet: start an experiment with tierscope experiment start --element 'link:<caller>-><callee>'")
		fmt.Fprintln(w)
		return
	}
	gs := slices.Clone(g.Gradients)
	slices.SortFunc(gs, func(a, b api.Gradient) int {
		return strings.Compare(a.Element+"\x00"+a.Transaction, b.Element+"\x00"+b.Transaction)
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    element\ttransaction\tgradient\t95% interval\tSNR\tbins")
	for _, x := range gs {
		fmt.Fprintf(tw, "    %s\t%s\t%.3f\t[%.3f, %.3f]\t%.1f\t%d\n", x.Element, x.Transaction, x.Gradient, x.CI95[0], x.CI95[1], x.SNR, x.Bins)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func printPrediction(w io.Writer, whatIf []string, p api.Prediction, err error) {
	fmt.Fprintf(w, "What if %s? Predicted mean response times (paper 000 §5.3: baseline + gradient × change)\n", strings.Join(whatIf, " and "))
	if err != nil {
		fmt.Fprintf(w, "    no prediction: %v\n\n", err)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    transaction\tnow\tpredicted\t95% interval")
	for _, t := range p.Transactions {
		fmt.Fprintf(tw, "    %s\t%.2f ms\t%.2f ms\t[%.2f, %.2f] ms\n", t.Transaction, t.BaselineMs, t.PredictedMs, t.CI95[0], t.CI95[1])
	}
	tw.Flush()
	fmt.Fprintln(w)
}
