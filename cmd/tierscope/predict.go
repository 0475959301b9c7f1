package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/internal/gradient"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// predictReport is predict's --format json output.
type predictReport struct {
	Predictions []gradient.Prediction `json:"predictions"`
	Routing     []gradient.Advice     `json:"routing,omitempty"`
}

// runPredict predicts response times after changes from measured gradients
// (docs/formats.md §7, paper 000 §5.3), and with --option routes each transaction
// to its fastest option (§5.5).
func runPredict(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("predict", `predict --gradients gradients.json --baseline-ms T1=120,T2=80 --change "app->db=+20ms" [--change ...] [--option NAME:CHANGE,CHANGE ...] [--format text|json] [--out FILE]`, stderr)
	var gradFiles, baselines, changes, options listFlag
	fs.Var(&gradFiles, "gradients", "gradient file(s): gradient measure output, an array or JSON lines of them, or an experiment result (repeatable, comma-separated)")
	fs.Var(&baselines, "baseline-ms", "current mean response time per transaction, T=ms or T=ms±se (repeatable, comma-separated)")
	fs.Var(&changes, "change", `a change: ELEMENT=+20ms (a link's latency), ELEMENT=-400MHz or @1.6GHz (CPU frequency), ELEMENT=-0.1 or @50% (capacity); an optional ±se gives its standard error (repeatable)`)
	fs.Var(&options, "option", "a routing option NAME:CHANGE,CHANGE…; with two or more, each transaction is routed to its fastest (repeatable)")
	format := fs.String("format", "text", "output format: text or json")
	out := fs.String("out", "", "output file (default standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(gradFiles) == 0 {
		return usagef("--gradients is required")
	}
	if len(baselines) == 0 {
		return usagef("--baseline-ms is required")
	}
	if len(changes) == 0 && len(options) == 0 {
		return usagef("give at least one --change (or --option)")
	}
	if *format != "text" && *format != "json" {
		return usagef("--format must be text or json, not %q", *format)
	}
	bases, err := parsePredictBaselines(baselines)
	if err != nil {
		return err
	}
	grads, err := loadGradientFiles(gradFiles)
	if err != nil {
		return err
	}
	basisOf := gradientBasisLookup(grads)
	nameUnnamedGradients(grads, basisOf, predictChangeSpecs(changes, options))
	chs, err := parsePredictChanges(changes, basisOf)
	if err != nil {
		return err
	}
	opts, err := parsePredictOptions(options, basisOf)
	if err != nil {
		return err
	}
	rep, err := buildPredictReport(bases, grads, chs, opts)
	if err != nil {
		return err
	}
	if *format == "json" {
		return writeGradientJSON(*out, stdout, rep)
	}
	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	writePredictText(o, rep)
	return o.commit()
}

// predictBaseline is one --baseline-ms entry: a transaction's current mean
// response time and its standard error, in ms.
type predictBaseline struct {
	tx     string
	ms, se float64
}

// parsePredictBaselines parses the --baseline-ms values, T=ms or T=ms±se,
// each possibly a comma-separated list.
func parsePredictBaselines(baselines listFlag) ([]predictBaseline, error) {
	var bases []predictBaseline
	for _, b := range splitList(baselines) {
		tx, v, ok := cutLast(b, "=")
		if !ok || tx == "" {
			return nil, usagef("--baseline-ms %q: want TRANSACTION=ms", b)
		}
		val, se, err := parseWithError(v, func(s string) (float64, error) {
			f, err := strconv.ParseFloat(strings.TrimSuffix(s, "ms"), 64)
			if err != nil {
				return 0, fmt.Errorf("bad number %q", s)
			}
			return f, nil
		})
		if err != nil {
			return nil, usagef("--baseline-ms %q: %v", b, err)
		}
		bases = append(bases, predictBaseline{tx, val, se})
	}
	return bases, nil
}

// loadGradientFiles reads every --gradients file, in order, and fails when
// they hold no gradient at all.
func loadGradientFiles(gradFiles listFlag) ([]gradient.Gradient, error) {
	var grads []gradient.Gradient
	for _, f := range splitList(gradFiles) {
		g, err := loadGradients(f)
		if err != nil {
			return nil, err
		}
		grads = append(grads, g...)
	}
	if len(grads) == 0 {
		return nil, fmt.Errorf("%s: no gradients", strings.Join(gradFiles, ","))
	}
	return grads, nil
}

// gradientBasisLookup returns a function giving the basis of the first
// gradient in grads on an element. It sees later renames in grads.
func gradientBasisLookup(grads []gradient.Gradient) func(element string) (gradient.Basis, bool) {
	return func(element string) (gradient.Basis, bool) {
		i := slices.IndexFunc(grads, func(g gradient.Gradient) bool { return g.Element == element })
		if i < 0 {
			return gradient.Basis{}, false
		}
		return grads[i].Basis, true
	}
}

// nameUnnamedGradients names, in place, the gradients without an element
// name (a bare gradient measure): they stand for the one element the change
// specs name that no named file does.
func nameUnnamedGradients(grads []gradient.Gradient, basisOf func(string) (gradient.Basis, bool), specs []string) {
	if _, ok := basisOf(""); !ok {
		return
	}
	var missing []string
	for _, c := range specs {
		el, _, _ := cutLast(c, "=")
		if _, ok := basisOf(el); !ok && !slices.Contains(missing, el) {
			missing = append(missing, el)
		}
	}
	if len(missing) == 1 {
		for i := range grads {
			if grads[i].Element == "" {
				grads[i].Element = missing[0]
			}
		}
	}
}

// predictChangeSpecs lists every change spec: the --change values, then
// those of each --option.
func predictChangeSpecs(changes, options listFlag) []string {
	var all []string
	all = append(all, changes...)
	for _, o := range options {
		if _, cs, ok := strings.Cut(o, ":"); ok {
			all = append(all, splitList([]string{cs})...)
		}
	}
	return all
}

// parsePredictChanges parses change specs against the gradients' bases.
func parsePredictChanges(specs []string, basisOf func(string) (gradient.Basis, bool)) ([]gradient.Change, error) {
	var out []gradient.Change
	for _, c := range specs {
		ch, err := parseChange(c, basisOf)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, nil
}

// parsePredictOptions parses the --option values, NAME:CHANGE,CHANGE.
func parsePredictOptions(options listFlag, basisOf func(string) (gradient.Basis, bool)) ([]gradient.Option, error) {
	var opts []gradient.Option
	for _, o := range options {
		name, cs, ok := strings.Cut(o, ":")
		if !ok || name == "" {
			return nil, usagef("--option %q: want NAME:CHANGE,CHANGE", o)
		}
		oc, err := parsePredictChanges(splitList([]string{cs}), basisOf)
		if err != nil {
			return nil, err
		}
		opts = append(opts, gradient.Option{Name: name, Changes: oc})
	}
	return opts, nil
}

// buildPredictReport predicts each baseline transaction under the changes
// and, with options, routes it to its fastest option.
func buildPredictReport(bases []predictBaseline, grads []gradient.Gradient, chs []gradient.Change, opts []gradient.Option) (predictReport, error) {
	var rep predictReport
	for _, b := range bases {
		if len(chs) > 0 {
			p, err := gradient.Predict(b.tx, b.ms, b.se, grads, chs)
			if err != nil {
				return rep, err
			}
			rep.Predictions = append(rep.Predictions, p)
		}
		if len(opts) > 0 {
			a, err := gradient.Route(b.tx, b.ms, b.se, grads, opts)
			if err != nil {
				return rep, err
			}
			rep.Routing = append(rep.Routing, a)
		}
	}
	return rep, nil
}

// writePredictText writes predict's text output: a table of predictions,
// then one of routing advice, each with a header line.
func writePredictText(o io.Writer, rep predictReport) {
	if len(rep.Predictions) > 0 {
		fmt.Fprintln(o, "# transaction\tbaseline_ms\tpredicted_ms\tci95_low_ms\tci95_high_ms")
		for _, p := range rep.Predictions {
			fmt.Fprintf(o, "%s\t%.2f\t%.2f\t%.2f\t%.2f\n", p.Transaction, p.BaselineMs, p.PredictedMs, p.CI95[0], p.CI95[1])
		}
	}
	if len(rep.Routing) > 0 {
		fmt.Fprintln(o, "# routing (paper 000 §5.5): transaction\tbest\tmargin_ms\tdecisive\toption=predicted_ms[ci95]...")
		for _, a := range rep.Routing {
			fmt.Fprintf(o, "%s\t%s\t%.2f\t%v", a.Transaction, a.Best, a.MarginMs, a.Decisive)
			for _, op := range a.Options {
				fmt.Fprintf(o, "\t%s=%.2f[%.2f,%.2f]", op.Option, op.PredictedMs, op.CI95[0], op.CI95[1])
			}
			fmt.Fprintln(o)
		}
	}
}

// splitList splits each value at commas and drops empty parts.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+len(sep):]), true
}

// parseWithError splits "v±se" (or "v+-se") and parses both parts.
func parseWithError(s string, num func(string) (float64, error)) (float64, float64, error) {
	v, se, hasSE := strings.Cut(s, "±")
	if !hasSE {
		v, se, hasSE = strings.Cut(s, "+-")
	}
	val, err := num(strings.TrimSpace(v))
	if err != nil {
		return 0, 0, err
	}
	if !hasSE {
		return val, 0, nil
	}
	e, err := num(strings.TrimSpace(se))
	if err != nil || e < 0 {
		return 0, 0, fmt.Errorf("bad standard error %q", se)
	}
	return val, e, nil
}

// parseChange parses ELEMENT=[+|-|@]NUMBER[UNIT][±SE] in the unit of the
// element's basis: ms for a link (s, us also), MHz for a CPU frequency
// (GHz, kHz also), a fraction for a capacity (% also). "@" gives the new
// value instead of a change.
func parseChange(spec string, basisOf func(string) (gradient.Basis, bool)) (gradient.Change, error) {
	el, v, ok := cutLast(spec, "=")
	if !ok || el == "" || v == "" {
		return gradient.Change{}, usagef("change %q: want ELEMENT=+20ms", spec)
	}
	b, ok := basisOf(el)
	if !ok {
		return gradient.Change{}, fmt.Errorf("change %q: no gradient on element %q", spec, el)
	}
	c := gradient.Change{Element: el}
	if strings.HasPrefix(v, "@") {
		c.Absolute, v = true, v[1:]
	}
	val, se, err := parseWithError(v, func(s string) (float64, error) { return parseUnit(s, b.Kind) })
	if err != nil {
		return c, usagef("change %q: %v", spec, err)
	}
	if c.Absolute {
		c.Value = val
	} else {
		c.Delta = val
	}
	c.StdErr = se
	return c, nil
}

// parseUnit parses a number with an optional unit into the basis unit.
func parseUnit(s string, kind gradient.Kind) (float64, error) {
	type unit struct {
		suffix string
		scale  float64
	}
	var units []unit
	switch kind {
	case gradient.KindLink:
		units = []unit{{"ms", 1}, {"us", 1e-3}, {"µs", 1e-3}, {"s", 1000}, {"", 1}}
	case gradient.KindCPUFreq:
		units = []unit{{"GHz", 1000}, {"MHz", 1}, {"kHz", 1e-3}, {"", 1}}
	case gradient.KindCapacity:
		units = []unit{{"%", 0.01}, {"", 1}}
	default:
		return 0, fmt.Errorf("unknown basis kind %q", kind)
	}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), 64)
			if err != nil {
				continue
			}
			return v * u.scale, nil
		}
	}
	return 0, fmt.Errorf("%q is not a number in the unit of a %s (e.g. %s)", s, kind, map[gradient.Kind]string{
		gradient.KindLink: "+20ms", gradient.KindCPUFreq: "-400MHz", gradient.KindCapacity: "-10%"}[kind])
}

// loadGradients reads one gradient file: a gradient measure document, an
// experiment result, the exporter's gradient list (/api/v1/gradients), a
// gradient record, or an array or JSON lines of any of these. A record
// without a basis is a link's; one without std_err takes it from its ci95.
func loadGradients(path string) ([]gradient.Gradient, error) {
	data, err := readFileCapped(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []gradient.Gradient
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, gradientJSONLine(data, err), err)
		}
		g, err := gradientsOf(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		out = append(out, g...)
	}
	return out, nil
}

func gradientsOf(raw json.RawMessage) ([]gradient.Gradient, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		var out []gradient.Gradient
		for _, it := range items {
			g, err := gradientsOf(it)
			if err != nil {
				return nil, err
			}
			out = append(out, g...)
		}
		return out, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("a gradient document must be a JSON object or array: %v", err)
	}
	switch {
	case keys["transactions"] != nil:
		var m gradient.Measurement
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if m.Basis.Kind == "" {
			m.Basis = gradient.Link()
		}
		return m.Gradients(), nil
	case keys["elements"] != nil:
		var r gradient.Result
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		var out []gradient.Gradient
		for _, e := range r.Elements {
			out = append(out, e.Gradients()...)
		}
		return out, nil
	case keys["gradients"] != nil: // the exporter's /api/v1/gradients, or one experiment
		return gradientsOf(keys["gradients"])
	case keys["gradient"] != nil && keys["transaction"] != nil:
		var g struct {
			gradient.Gradient
			CI95 *[2]float64 `json:"ci95"`
		}
		var side struct {
			Basis struct {
				Side string `json:"side"`
			} `json:"basis"`
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &side); err != nil {
			return nil, err
		}
		if g.Basis.Kind == "" {
			g.Basis = gradient.Link()
		}
		// The exporter names a capacity wave's side (api.Basis.Side).
		if side.Basis.Side != "" {
			g.Basis = g.Basis.WithSide(side.Basis.Side)
		}
		if g.StdErr == 0 && g.CI95 != nil { // records that carry only the interval
			g.StdErr = gradient.StdErrFromCI95(g.Gradient.Gradient, *g.CI95)
		}
		return []gradient.Gradient{g.Gradient}, nil
	}
	return nil, errors.New(`not a gradient document: want "transactions" (gradient measure), "elements" (an experiment), "gradients", or "gradient" and "transaction"`)
}
