package maketrace

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultStart is the Unix time, in seconds, of t=0 when a config does not set `start`.
const DefaultStart = 1700000000

// Config is a parsed, validated tracelet configuration.
type Config struct {
	File      string        // the name used in error messages
	Duration  time.Duration // trace length; 0 when the file does not set it
	Start     int64         // Unix seconds of t=0
	CallIDs   bool          // write call ids; false writes "-" so returns match the earliest open call
	Tracelets []Tracelet
	// Forwarding is the forwarding delay of relay nodes: a one-way call sent by one
	// of these nodes, without a delay of its own, waits a sample of it.
	Forwarding map[string][]Mode
}

// Tracelet is one transaction template run by Instances closed-loop clients.
type Tracelet struct {
	Name      string
	Instances int
	ThinkMin  time.Duration // uniform think time before each run, including the first
	ThinkMax  time.Duration
	Root      *Call
}

// Call is one RPC of a tracelet and, recursively, the calls its callee makes.
type Call struct {
	From          string    // the caller; set on the root only
	To            []string  // the alternative callees; one is chosen per run
	Weights       []float64 // same length as To; nil means uniform
	Delay         Gaussian  // at the caller, from its previous event to this call
	DelayByCaller map[string]Gaussian
	Reply         Gaussian // at the callee, from its last event to its return
	Parallel      bool     // children all start from this call's arrival
	Calls         []*Call
	// OneWay makes the call a MSG_SENT message with no return (a queue, a
	// pub/sub topic, a mail relay): the callee's calls follow its arrival, and
	// the caller moves on as soon as it has sent it.
	OneWay bool
	// DelayModes, when set, replaces Delay with a mixture: each sample first
	// picks a mode by weight. HasDelay records that `delay` was written, so that
	// a relay's Forwarding delay applies only where it was not.
	DelayModes []Mode
	HasDelay   bool
}

// Gaussian is a delay distribution; samples are clamped at zero.
type Gaussian struct {
	Mean, Std time.Duration
}

// Mode is one component of a multi-modal delay: a Gaussian chosen with
// probability proportional to Weight.
type Mode struct {
	Weight float64
	Gaussian
}

// parser walks a yaml.Node tree so that every error can name the file, line and field.
type parser struct{ file string }

type configError struct {
	file  string
	line  int
	field string
	msg   string
}

func (e *configError) Error() string {
	if e.field == "" {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.file, e.line, e.field, e.msg)
}

func (p *parser) errf(n *yaml.Node, field, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &configError{p.file, line, field, fmt.Sprintf(format, args...)}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseConfig parses and validates a YAML tracelet configuration. file names the
// source in error messages, which have the form "file:line: field: problem".
func ParseConfig(data []byte, file string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// Rewrite yaml.v3's "yaml: line N: msg" into the file:line form used everywhere else.
		var te *yaml.TypeError
		msg := err.Error()
		if !errors.As(err, &te) {
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				return nil, fmt.Errorf("%s:%s: %s", file, m[1], m[2])
			}
		}
		return nil, fmt.Errorf("%s: %s", file, msg)
	}
	p := &parser{file: file}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s:1: empty config: tracelets are required", file)
	}
	return p.config(doc.Content[0])
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// errUnknown is returned by a fields callback for a key it does not know.
var errUnknown = errors.New("unknown field")

// fields checks that n is a mapping without duplicate keys and calls set for each key
// in document order; a key that set rejects with errUnknown is reported with the list
// of known fields.
func (p *parser) fields(n *yaml.Node, field string, known []string, set func(key string, k, v *yaml.Node) error) error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return p.errf(n, field, "expected a mapping, got %s", kindName(n))
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		key := k.Value
		sub := join(field, key)
		if seen[key] {
			return p.errf(k, sub, "duplicate field")
		}
		seen[key] = true
		if err := set(key, k, v); err == errUnknown {
			return p.errf(k, field, "unknown field %q (known: %s)", key, strings.Join(known, ", "))
		} else if err != nil {
			return err
		}
	}
	return nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an unexpected node"
}

func (p *parser) scalar(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, field, "expected a value, got %s", kindName(n))
	}
	return n.Value, nil
}

func (p *parser) duration(n *yaml.Node, field string) (time.Duration, error) {
	s, err := p.scalar(n, field)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, p.errf(n, field, "invalid duration %q (use Go syntax such as 15ms or 1.5s)", s)
	}
	if d < 0 {
		return 0, p.errf(n, field, "must not be negative, got %s", s)
	}
	return d, nil
}

func (p *parser) int(n *yaml.Node, field string) (int64, error) {
	s, err := p.scalar(n, field)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, p.errf(n, field, "expected an integer, got %q", s)
	}
	return v, nil
}

func (p *parser) bool(n *yaml.Node, field string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, p.errf(n, field, "expected true or false, got %s", kindName(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, p.errf(n, field, "expected true or false, got %q", n.Value)
	}
	return b, nil
}

func (p *parser) nodeName(n *yaml.Node, field string) (string, error) {
	s, err := p.scalar(n, field)
	if err != nil {
		return "", err
	}
	if err := checkNodeName(s); err != nil {
		return "", p.errf(n, field, "%v", err)
	}
	return s, nil
}

// checkNodeName enforces what the TSV trace format can carry in a node column.
func checkNodeName(s string) error {
	if s == "" {
		return errors.New("node name is empty")
	}
	if strings.ContainsAny(s, "\t\n\r") {
		return fmt.Errorf("node name %q contains a tab or newline", s)
	}
	return nil
}

func (p *parser) config(root *yaml.Node) (*Config, error) {
	cfg := &Config{File: p.file, Start: DefaultStart, CallIDs: true}
	var tracelets *yaml.Node
	var forwarding *yaml.Node
	err := p.fields(root, "", []string{"duration", "start", "call_ids", "forwarding", "tracelets"}, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "duration":
			cfg.Duration, err = p.duration(v, key)
			if err == nil && cfg.Duration == 0 {
				err = p.errf(v, key, "must be positive")
			}
		case "start":
			cfg.Start, err = p.int(v, key)
			if err == nil && (cfg.Start < 0 || cfg.Start > math.MaxInt64/int64(time.Second)-1e6) {
				err = p.errf(v, key, "out of range: %d", cfg.Start)
			}
		case "call_ids":
			cfg.CallIDs, err = p.bool(v, key)
		case "tracelets":
			tracelets = v
		case "forwarding":
			forwarding = v
		default:
			return errUnknown
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var forwardingNames []*yaml.Node
	if forwarding != nil {
		if cfg.Forwarding, err = p.forwarding(forwarding); err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(forwarding.Content); i += 2 {
			forwardingNames = append(forwardingNames, forwarding.Content[i])
		}
	}
	if tracelets == nil || tracelets.Kind == yaml.ScalarNode && tracelets.Tag == "!!null" {
		n := root
		if tracelets != nil {
			n = tracelets
		}
		return nil, p.errf(n, "tracelets", "at least one tracelet is required")
	}
	if tracelets.Kind != yaml.SequenceNode {
		return nil, p.errf(tracelets, "tracelets", "expected a list, got %s", kindName(tracelets))
	}
	if len(tracelets.Content) == 0 {
		return nil, p.errf(tracelets, "tracelets", "at least one tracelet is required")
	}
	names := map[string]bool{}
	for i, tn := range tracelets.Content {
		t, err := p.tracelet(resolve(tn), fmt.Sprintf("tracelets[%d]", i), i)
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			return nil, p.errf(tn, fmt.Sprintf("tracelets[%d].name", i), "duplicate tracelet name %q", t.Name)
		}
		names[t.Name] = true
		cfg.Tracelets = append(cfg.Tracelets, t)
	}
	// A forwarding delay applies to the one-way calls a node sends; on a node that
	// sends none it would never apply, which is almost certainly a mistake.
	senders := map[string]bool{}
	for _, t := range cfg.Tracelets {
		onewaySenders(t.Root, []string{t.Root.From}, senders)
	}
	for _, k := range forwardingNames {
		if !senders[k.Value] {
			return nil, p.errf(k, "forwarding."+k.Value, "%q sends no one-way message in any tracelet, so its forwarding delay never applies", k.Value)
		}
	}
	return cfg, nil
}

// onewaySenders adds the possible callers of c's one-way calls to set; callers are
// the nodes that may make c.
func onewaySenders(c *Call, callers []string, set map[string]bool) {
	if c.OneWay {
		for _, n := range callers {
			set[n] = true
		}
	}
	for _, ch := range c.Calls {
		onewaySenders(ch, c.To, set)
	}
}

func (p *parser) tracelet(n *yaml.Node, field string, index int) (Tracelet, error) {
	t := Tracelet{Name: fmt.Sprintf("tracelet%d", index+1), Instances: 1}
	var rootNode *yaml.Node
	err := p.fields(n, field, []string{"name", "instances", "think", "root"}, func(key string, k, v *yaml.Node) error {
		sub := join(field, key)
		switch key {
		case "name":
			s, err := p.scalar(v, sub)
			if err != nil {
				return err
			}
			if s == "" {
				return p.errf(v, sub, "must not be empty")
			}
			t.Name = s
		case "instances":
			i, err := p.int(v, sub)
			if err != nil {
				return err
			}
			if i < 1 || i > 1<<20 {
				return p.errf(v, sub, "must be between 1 and %d, got %d", 1<<20, i)
			}
			t.Instances = int(i)
		case "think":
			var minN *yaml.Node
			err := p.fields(v, sub, []string{"min", "max"}, func(key string, k, v *yaml.Node) error {
				if key != "min" && key != "max" {
					return errUnknown
				}
				d, err := p.duration(v, join(sub, key))
				if key == "min" {
					t.ThinkMin, minN = d, v
				} else {
					t.ThinkMax = d
				}
				return err
			})
			if err != nil {
				return err
			}
			if t.ThinkMin > t.ThinkMax {
				if minN == nil {
					minN = v
				}
				return p.errf(minN, sub, "min (%s) is greater than max (%s)", t.ThinkMin, t.ThinkMax)
			}
		case "root":
			rootNode = v
		default:
			return errUnknown
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if rootNode == nil {
		return t, p.errf(n, field+".root", "required")
	}
	t.Root, err = p.call(rootNode, field+".root", nil)
	if err != nil {
		return t, err
	}
	if t.ThinkMax == 0 && !advances(t.Root) {
		return t, p.errf(n, field, "zero think time and zero delays: the tracelet would never advance time")
	}
	return t, nil
}

// advances reports whether a run of the call tree can take a positive amount of time.
func advances(c *Call) bool {
	pos := func(g Gaussian) bool { return g.Mean > 0 || g.Std > 0 }
	if pos(c.Delay) || pos(c.Reply) {
		return true
	}
	for _, m := range c.DelayModes {
		if pos(m.Gaussian) {
			return true
		}
	}
	for _, g := range c.DelayByCaller {
		if pos(g) {
			return true
		}
	}
	for _, ch := range c.Calls {
		if advances(ch) {
			return true
		}
	}
	return false
}

func (p *parser) gaussian(n *yaml.Node, field string) (Gaussian, error) {
	var g Gaussian
	err := p.fields(n, field, []string{"mean", "std"}, func(key string, k, v *yaml.Node) error {
		if key != "mean" && key != "std" {
			return errUnknown
		}
		d, err := p.duration(v, join(field, key))
		if key == "mean" {
			g.Mean = d
		} else {
			g.Std = d
		}
		return err
	})
	return g, err
}

// call parses one call; parent is nil for the root.
func (p *parser) call(n *yaml.Node, field string, parent *Call) (*Call, error) {
	c := &Call{}
	isRoot := parent == nil
	known := []string{"to", "weights", "delay", "delay_by_caller", "reply", "parallel", "oneway", "calls"}
	if isRoot {
		known = []string{"from", "to", "weights", "reply", "parallel", "oneway", "calls"}
	}
	var toN, weightsN, byCallerN, callsN, fromN, replyN *yaml.Node
	err := p.fields(n, field, known, func(key string, k, v *yaml.Node) error {
		sub := join(field, key)
		var err error
		switch key {
		case "from":
			if !isRoot {
				return p.errf(k, sub, "only the root call has a caller (from); a child's caller is its parent's callee")
			}
			fromN = v
			c.From, err = p.nodeName(v, sub)
		case "to":
			toN = v
		case "weights":
			weightsN = v
		case "delay":
			if isRoot {
				return p.errf(k, field, "unknown field %q on the root call (the tracelet's think time precedes it)", key)
			}
			c.HasDelay = true
			c.Delay, c.DelayModes, err = p.delay(v, sub)
		case "delay_by_caller":
			if isRoot {
				return errUnknown
			}
			byCallerN = v
		case "reply":
			replyN = v
			c.Reply, err = p.gaussian(v, sub)
		case "parallel":
			c.Parallel, err = p.bool(v, sub)
		case "oneway":
			c.OneWay, err = p.bool(v, sub)
		case "calls":
			callsN = v
		default:
			return errUnknown
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if isRoot && fromN == nil {
		return nil, p.errf(n, field+".from", "required on the root call")
	}
	if c.OneWay && replyN != nil {
		return nil, p.errf(replyN, field+".reply", "a one-way call has no return, so no reply delay")
	}
	if toN == nil {
		return nil, p.errf(n, field+".to", "required")
	}
	if c.To, err = p.callees(toN, field+".to"); err != nil {
		return nil, err
	}
	if weightsN != nil {
		if c.Weights, err = p.weights(weightsN, field+".weights", len(c.To)); err != nil {
			return nil, err
		}
	}
	if byCallerN != nil {
		if c.DelayByCaller, err = p.delayByCaller(byCallerN, field+".delay_by_caller", parent); err != nil {
			return nil, err
		}
	}
	if callsN != nil {
		sub := field + ".calls"
		if callsN.Kind == yaml.ScalarNode && callsN.Tag == "!!null" {
			return c, nil
		}
		if callsN.Kind != yaml.SequenceNode {
			return nil, p.errf(callsN, sub, "expected a list of calls, got %s", kindName(callsN))
		}
		for i, e := range callsN.Content {
			ch, err := p.call(resolve(e), fmt.Sprintf("%s[%d]", sub, i), c)
			if err != nil {
				return nil, err
			}
			c.Calls = append(c.Calls, ch)
		}
	}
	return c, nil
}

// callees parses a call's to: a node name or a non-empty list of distinct
// names.
func (p *parser) callees(toN *yaml.Node, field string) ([]string, error) {
	switch toN.Kind {
	case yaml.ScalarNode:
		s, err := p.nodeName(toN, field)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	case yaml.SequenceNode:
		if len(toN.Content) == 0 {
			return nil, p.errf(toN, field, "must not be empty")
		}
		var to []string
		for i, e := range toN.Content {
			sub := fmt.Sprintf("%s[%d]", field, i)
			s, err := p.nodeName(resolve(e), sub)
			if err != nil {
				return nil, err
			}
			for _, prev := range to {
				if prev == s {
					return nil, p.errf(e, sub, "duplicate callee %q", s)
				}
			}
			to = append(to, s)
		}
		return to, nil
	}
	return nil, p.errf(toN, field, "expected a node name or a list of node names, got %s", kindName(toN))
}

// weights parses a call's weights: one positive number per callee.
func (p *parser) weights(weightsN *yaml.Node, field string, callees int) ([]float64, error) {
	if weightsN.Kind != yaml.SequenceNode {
		return nil, p.errf(weightsN, field, "expected a list of numbers, got %s", kindName(weightsN))
	}
	if len(weightsN.Content) != callees {
		return nil, p.errf(weightsN, field, "has %d entries but to has %d", len(weightsN.Content), callees)
	}
	var ws []float64
	for i, e := range weightsN.Content {
		e = resolve(e)
		s, err := p.scalar(e, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		w, err := strconv.ParseFloat(s, 64)
		if err != nil || !(w > 0) || math.IsInf(w, 0) {
			return nil, p.errf(e, fmt.Sprintf("%s[%d]", field, i), "must be a positive number, got %q", s)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// delayByCaller parses a child call's delay_by_caller: {mean, std} per caller,
// each one of the parent call's callees.
func (p *parser) delayByCaller(byCallerN *yaml.Node, field string, parent *Call) (map[string]Gaussian, error) {
	if byCallerN.Kind != yaml.MappingNode {
		return nil, p.errf(byCallerN, field, "expected a mapping from caller node to {mean, std}, got %s", kindName(byCallerN))
	}
	by := map[string]Gaussian{}
	for i := 0; i+1 < len(byCallerN.Content); i += 2 {
		k, v := byCallerN.Content[i], resolve(byCallerN.Content[i+1])
		name, err := p.nodeName(k, field)
		if err != nil {
			return nil, err
		}
		if _, dup := by[name]; dup {
			return nil, p.errf(k, field+"."+name, "duplicate caller")
		}
		// The caller of a child is one of its parent's callees; any other key could
		// never apply and is almost certainly a typo.
		if !slices.Contains(parent.To, name) {
			return nil, p.errf(k, field+"."+name, "%q is not a callee of the parent call (%s), so it never makes this call", name, strings.Join(parent.To, ", "))
		}
		if by[name], err = p.gaussian(v, field+"."+name); err != nil {
			return nil, err
		}
	}
	return by, nil
}

// delay parses a call's delay: a Gaussian {mean, std}, or a mixture
// {modes: [{weight, mean, std}, ...]}. For a mixture the returned Gaussian is
// its mean, which only sizes the trace estimate.
func (p *parser) delay(n *yaml.Node, field string) (Gaussian, []Mode, error) {
	n = resolve(n)
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "modes" {
				modes, err := p.modes(n, field)
				if err != nil {
					return Gaussian{}, nil, err
				}
				return mixtureMean(modes), modes, nil
			}
		}
	}
	g, err := p.gaussian(n, field)
	return g, nil, err
}

// modes parses {modes: [{weight, mean, std}, ...]}.
func (p *parser) modes(n *yaml.Node, field string) ([]Mode, error) {
	var list *yaml.Node
	err := p.fields(n, field, []string{"modes"}, func(key string, k, v *yaml.Node) error {
		if key != "modes" {
			return errUnknown
		}
		list = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	sub := field + ".modes"
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		return nil, p.errf(list, sub, "expected a non-empty list of {weight, mean, std}, got %s", kindName(list))
	}
	var modes []Mode
	for i, e := range list.Content {
		e = resolve(e)
		f := fmt.Sprintf("%s[%d]", sub, i)
		m := Mode{Weight: 1}
		err := p.fields(e, f, []string{"weight", "mean", "std"}, func(key string, k, v *yaml.Node) error {
			switch key {
			case "weight":
				s, err := p.scalar(v, join(f, key))
				if err != nil {
					return err
				}
				w, err := strconv.ParseFloat(s, 64)
				if err != nil || !(w > 0) || math.IsInf(w, 0) {
					return p.errf(v, join(f, key), "must be a positive number, got %q", s)
				}
				m.Weight = w
			case "mean":
				d, err := p.duration(v, join(f, key))
				if err != nil {
					return err
				}
				m.Mean = d
			case "std":
				d, err := p.duration(v, join(f, key))
				if err != nil {
					return err
				}
				m.Std = d
			default:
				return errUnknown
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// mixtureMean is the Gaussian with a mixture's mean (and no spread).
func mixtureMean(modes []Mode) Gaussian {
	var sum, w float64
	for _, m := range modes {
		sum += m.Weight * float64(m.Mean)
		w += m.Weight
	}
	return Gaussian{Mean: time.Duration(sum / w)}
}

// forwarding parses the top-level map from relay node to forwarding delay.
func (p *parser) forwarding(n *yaml.Node) (map[string][]Mode, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "forwarding", "expected a mapping from node to delay, got %s", kindName(n))
	}
	out := map[string][]Mode{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		name, err := p.nodeName(k, "forwarding")
		if err != nil {
			return nil, err
		}
		sub := "forwarding." + name
		if _, dup := out[name]; dup {
			return nil, p.errf(k, sub, "duplicate node")
		}
		g, modes, err := p.delay(v, sub)
		if err != nil {
			return nil, err
		}
		if modes == nil {
			modes = []Mode{{Weight: 1, Gaussian: g}}
		}
		out[name] = modes
	}
	return out, nil
}
