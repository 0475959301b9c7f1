package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/internal/api"
)

// writeDot renders one cluster per pattern in the style of paper 001 figure 8: a
// node's ellipse holds its name and mean latency, an edge its mean call delay, and
// the first edge also the pattern's instance count and total latency. Convolution
// patterns are drawn as figure 9 (writeConvolutionDot).
func writeDot(w io.Writer, r *api.PathsReport) error {
	if r.Algorithm == "convolution" {
		return writeConvolutionDot(w, r)
	}
	var b strings.Builder
	b.WriteString("digraph paths {\n  node [shape=ellipse];\n")
	for i, p := range r.Patterns {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", i, dotQuote(fmt.Sprintf("#%d %s", i+1, p.Signature)))
		next := 0
		var walk func(n api.PathNode, parent string, first bool)
		walk = func(n api.PathNode, parent string, first bool) {
			id := fmt.Sprintf("p%dn%d", i, next)
			next++
			label := n.Node
			if n.LatencyMs != nil {
				label += "\n" + ms(n.LatencyMs.Mean)
			}
			fmt.Fprintf(&b, "    %s [label=%s];\n", id, dotQuote(label))
			if parent != "" {
				edge := ""
				if n.CallDelayMs != nil {
					edge = ms(n.CallDelayMs.Mean)
				}
				if first {
					edge = fmt.Sprintf("%d × %s\n%s", p.Count, ms(p.TotalLatencyMs), edge)
				}
				fmt.Fprintf(&b, "    %s -> %s [label=%s];\n", parent, id, dotQuote(edge))
			}
			for k, c := range n.Children {
				walk(c, id, parent == "" && k == 0)
			}
		}
		walk(p.Root, "", false)
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func dotQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}

// writeText renders patterns as indented trees for people at a terminal.
func writeText(w io.Writer, r *api.PathsReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages, %d call pairs, %d discarded, mean parallelism %.2f, %d patterns shown\n",
		r.Messages, r.CallPairs, r.DiscardedMessages, r.MeanParallelism, len(r.Patterns))
	writePatternTrees(&b, r.Patterns)
	if t := r.Truth; t != nil {
		fmt.Fprintf(&b, "\ntruth: %d true patterns, %d false-positive patterns, false-negative instances %d/%d (%.2f%%), message attribution error %.2f%%, top-10 false negatives %d\n",
			t.TruthPatterns, t.FalsePositivePatterns, t.FalseNegativeInstances, t.TruthInstances, 100*t.FalseNegativeInstanceRate, 100*t.MessageAttributionError, t.TopNFalseNegatives[min(9, len(t.TopNFalseNegatives)-1)])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePatternTrees renders each pattern as an indented tree.
func writePatternTrees(b *strings.Builder, patterns []api.PathPattern) {
	for i, p := range patterns {
		fmt.Fprintf(b, "\n#%d  %s\n    %d instances, total latency %s\n", i+1, p.Signature, p.Count, ms(p.TotalLatencyMs))
		var walk func(n api.PathNode, prefix string, last bool, root bool)
		walk = func(n api.PathNode, prefix string, last bool, root bool) {
			branch, childPrefix := "", prefix
			if !root {
				branch = "├─ "
				childPrefix = prefix + "│  "
				if last {
					branch, childPrefix = "└─ ", prefix+"   "
				}
			}
			line := prefix + branch + n.Node
			if n.LatencyMs != nil {
				line = fmt.Sprintf("%-34s latency %s (p50 %s, p99 %s)  called after %s",
					line, ms(n.LatencyMs.Mean), ms(n.LatencyMs.P50), ms(n.LatencyMs.P99), ms(n.CallDelayMs.Mean))
			}
			b.WriteString("    " + line + "\n")
			for k, c := range n.Children {
				walk(c, childPrefix, k == len(n.Children)-1, false)
			}
		}
		walk(p.Root, "", true, true)
	}
}

// ms formats milliseconds with a sensible number of digits: three significant
// ones under 1 ms, in µs, so that sub-millisecond tiers do not all read 0.0x ms.
func ms(v float64) string {
	switch {
	case v >= 10000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	case v >= 0.9995 || v <= 0: // what would round to 1000 µs reads 1.00 ms
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case v >= 0.09995:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + " µs"
	case v >= 0.009995:
		return strconv.FormatFloat(v*1000, 'f', 1, 64) + " µs"
	default:
		return strconv.FormatFloat(v*1000, 'f', 2, 64) + " µs"
	}
}

// writeConvolutionDot renders one cluster per pattern in the style of paper 001
// figure 9: a chain of nodes, each edge labelled with the total count of its
// messages and its delays, ordered by declining frequency (the spikes' positions);
// the first edge carries the pattern's instance count instead, since nothing
// precedes it.
func writeConvolutionDot(w io.Writer, r *api.PathsReport) error {
	var b strings.Builder
	b.WriteString("digraph paths {\n  node [shape=ellipse];\n")
	for i, p := range r.Patterns {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%s;\n", i, dotQuote(fmt.Sprintf("#%d %s", i+1, p.Signature)))
		n, parent := p.Root, ""
		for k := 0; ; k++ {
			id := fmt.Sprintf("p%dn%d", i, k)
			fmt.Fprintf(&b, "    %s [label=%s];\n", id, dotQuote(n.Node))
			if parent != "" {
				label := fmt.Sprintf("%d", n.Messages)
				if len(n.DelaysMs) > 0 {
					delays := make([]string, len(n.DelaysMs))
					for j, d := range n.DelaysMs {
						delays[j] = ms(d)
					}
					label += "\n" + strings.Join(delays, ", ")
				}
				if k == 1 {
					label = fmt.Sprintf("%d × %s\n%s", p.Count, ms(p.TotalLatencyMs), label)
				}
				fmt.Fprintf(&b, "    %s -> %s [label=%s];\n", parent, id, dotQuote(label))
			}
			if len(n.Children) == 0 {
				break
			}
			n, parent = n.Children[0], id
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeConvolutionText renders convolution patterns as chains for people at a
// terminal: each node after the first with its edge's message count and delays.
func writeConvolutionText(w io.Writer, r *convolutionReport) error {
	var b strings.Builder
	c := r.Convolution
	fmt.Fprintf(&b, "%d messages, quantum %s (%d quanta, delays to %s), roots %s, %d vertices, %d patterns shown\n",
		r.Messages, ms(c.QuantumMs), c.Quanta, ms(c.MaxDelayMs), strings.Join(c.Roots, ", "), c.Vertices, len(r.Patterns))
	for i, p := range r.Patterns {
		fmt.Fprintf(&b, "\n#%d  %s\n    %d instances, total latency %s\n    %s", i+1, p.Signature, p.Count, ms(p.TotalLatencyMs), p.Root.Node)
		for n := p.Root; len(n.Children) > 0; {
			n = n.Children[0]
			delays := make([]string, len(n.DelaysMs))
			for j, d := range n.DelaysMs {
				delays[j] = ms(d)
			}
			edge := fmt.Sprintf("%d", n.Messages)
			if len(delays) > 0 {
				edge += "; " + strings.Join(delays, ", ")
			}
			fmt.Fprintf(&b, " -[%s]-> %s", edge, n.Node)
		}
		b.WriteString("\n")
	}
	if t := r.Truth; t != nil {
		fmt.Fprintf(&b, "\ntruth: %d true chains (%d with ≥%d instances), %d false-positive patterns (%d with ≥%d instances), %d frequent true chains missed, false-negative instances %d/%d (%.2f%%), message attribution error %.2f%%\n",
			t.TruthPatterns, t.FrequentTruthPatterns, t.Frequent, t.FalsePositivePatterns, t.FrequentFalsePositives, t.Frequent,
			t.FrequentFalseNegatives, t.FalseNegativeInstances, t.TruthInstances, 100*t.FalseNegativeInstanceRate, 100*t.MessageAttributionError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
