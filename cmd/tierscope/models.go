package main

import (
	"encoding/json"
	"fmt"
	"io"
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
	var truth map[string]float64
	if *truthFile != "" {
		data, err := os.ReadFile(*truthFile)
		if err != nil {
			return err
		}
		if truth, err = knownBurns(data); err != nil {
			return fmt.Errorf("%s: %w", *truthFile, err)
		}
	}
	token := os.Getenv("TIERSCOPE_TOKEN")
	if *tokenFile != "" {
		data, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(data))
	}
	c, err := newExperimentClient(*apiURL, token, *timeout)
	if err != nil {
		return usageError{err.Error()}
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

// knownBurns reads `testbed truth`: every request kind's CPU burn in
// megacycles, keyed "service name" as the flows' service and the last element
// of their transaction ("web Home" for "web /txn/Home").
func knownBurns(data []byte) (map[string]float64, error) {
	type node struct {
		Service string  `json:"service"`
		Name    string  `json:"name"`
		CPUMC   float64 `json:"cpu_mc"`
		Calls   []struct {
			Callee *node `json:"callee"`
		} `json:"calls"`
	}
	var t struct {
		Transactions []struct {
			Tree *node `json:"tree"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("not the testbed's truth: %w", err)
	}
	out := map[string]float64{}
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		out[n.Service+" "+n.Name] = n.CPUMC
		for _, c := range n.Calls {
			walk(c.Callee)
		}
	}
	for _, tx := range t.Transactions {
		walk(tx.Tree)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no transactions in the truth")
	}
	return out, nil
}

// truthKey maps a flow ("web /txn/Home", "db POST /query/get_item") to the
// truth's key ("web Home", "db get_item").
func truthKey(flow string) string {
	service, tx, _ := strings.Cut(flow, " ")
	return service + " " + path.Base(tx)
}

func printWorkFactors(w io.Writer, wf api.WorkFactors, truth map[string]float64) {
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
			fmt.Fprintln(tw, "    flow\testimate Mc\tknown burn Mc\testimate − burn\t")
		} else {
			fmt.Fprintln(tw, "    flow\testimate Mc\t")
		}
		flows := slices.Clone(m.Flows)
		slices.SortFunc(flows, func(a, b api.FlowWorkFactor) int { return strings.Compare(a.Flow, b.Flow) })
		for _, f := range flows {
			note := ""
			if f.Combined {
				note = "  (solved together with collinear flows)"
			}
			if truth == nil {
				fmt.Fprintf(tw, "    %s\t%.2f\t%s\n", f.Flow, f.WorkFactor, note)
				continue
			}
			burn, ok := truth[truthKey(f.Flow)]
			if !ok {
				fmt.Fprintf(tw, "    %s\t%.2f\t—\t\t%s\n", f.Flow, f.WorkFactor, note)
				continue
			}
			fmt.Fprintf(tw, "    %s\t%.2f\t%.2f\t%+.2f\t%s\n", f.Flow, f.WorkFactor, burn, f.WorkFactor-burn, note)
		}
		tw.Flush()
	}
	if truth != nil {
		fmt.Fprintln(w, "    The burn is what the testbed's configuration busy-loops per request; a request also costs what is not burned")
		fmt.Fprintln(w, "    (HTTP, tracing, SQLite), which the estimate includes: WORKFACTORS=1 make run measures that part and checks the estimates.")
	}
	fmt.Fprintln(w)
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
