//go:generate go tool mdatagen metadata.yaml

// Package causalpathprocessor implements the `causalpath` processor. It repairs
// traces whose context was lost and tags every span with its causal path. Spans
// wait in a bounded buffer for `wait`, so that the spans that might be their
// parents arrive; then the orphans among them (spans with no parent) get the parent
// the nesting algorithm of paper 001 infers (see package internal/causal), written
// back as `reparent`, `link` or `annotate` (docs/formats.md §4).
package causalpathprocessor // import "github.com/tierscope/tierscope/processor/causalpathprocessor"
