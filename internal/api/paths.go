// Package api holds the JSON documents that the command-line tool, the perfmodel
// exporter's HTTP API and the Grafana datasource exchange. Field names are the
// public contract of docs/formats.md; add fields, never rename them.
package api

// PathsReport is the causal path pattern document of docs/formats.md §2.
type PathsReport struct {
	Algorithm         string        `json:"algorithm"`
	Messages          int           `json:"messages"`
	CallPairs         int           `json:"call_pairs"`
	DiscardedMessages int           `json:"discarded_messages"`
	Discarded         *Discards     `json:"discarded,omitempty"`
	MeanParallelism   float64       `json:"mean_parallelism"`
	Patterns          []PathPattern `json:"patterns"`
	Truth             *PathsTruth   `json:"truth,omitempty"`
}

// Discards breaks discarded_messages down by reason.
type Discards struct {
	ReturnWithoutCall int `json:"return_without_call"`
	CallWithoutReturn int `json:"call_without_return"`
	OneWay            int `json:"one_way"`
}

// PathPattern is one causal path pattern.
type PathPattern struct {
	Signature      string   `json:"signature"`
	Count          int      `json:"count"`
	TotalLatencyMs float64  `json:"total_latency_ms"`
	Root           PathNode `json:"root"`
}

// PathNode is one node of a pattern. The root carries only its name and children.
// Nesting fills the latency distributions; convolution fills DelaysMs and Messages.
type PathNode struct {
	Node        string     `json:"node"`
	LatencyMs   *Quantiles `json:"latency_ms,omitempty"`
	CallDelayMs *Quantiles `json:"call_delay_ms,omitempty"`
	DelaysMs    []float64  `json:"delays_ms,omitempty"`
	Messages    int        `json:"messages,omitempty"`
	Children    []PathNode `json:"children"`
}

// Quantiles summarises a distribution in milliseconds.
type Quantiles struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// PathsTruth scores inferred patterns against ground truth (paper 001 §7.5.1).
type PathsTruth struct {
	TopNFalseNegatives        []int   `json:"top_n_false_negatives"`
	FalsePositivePatterns     int     `json:"false_positive_patterns"`
	FalseNegativeInstances    int     `json:"false_negative_instances"`
	MessageAttributionError   float64 `json:"message_attribution_error"`
	FalsePositiveInstances    int     `json:"false_positive_instances"`
	TruthInstances            int     `json:"truth_instances"`
	TruthPatterns             int     `json:"truth_patterns"`
	FalseNegativeInstanceRate float64 `json:"false_negative_instance_rate"`
}

// StitchReport is the report of `tierscope stitch` (docs/formats.md §4).
type StitchReport struct {
	Spans          int           `json:"spans"`
	Orphans        int           `json:"orphans"`
	Inferred       int           `json:"inferred"`
	LeftOrphan     int           `json:"left_orphan"`
	Unresolved     int           `json:"unresolved"`
	Skipped        int           `json:"skipped"`
	ZeroDuration   int           `json:"zero_duration"`
	UnknownKind    int           `json:"unknown_kind"`
	LongAttributes int           `json:"long_attributes"`
	Patterns       []PathPattern `json:"patterns"`
	Truth          *StitchTruth  `json:"truth,omitempty"`
}

// StitchTruth scores stitching against the true parents carried by test data.
type StitchTruth struct {
	Links          int     `json:"links"`
	Correct        int     `json:"correct"`
	Accuracy       float64 `json:"accuracy"`
	OrphanLinks    int     `json:"orphan_links"`
	OrphanCorrect  int     `json:"orphan_correct"`
	OrphanAccuracy float64 `json:"orphan_accuracy"`
	RootsAttached  int     `json:"roots_attached"`
	// Written counts the inferred parents written (at or above the minimum
	// confidence), Precision the share of them that is right; BestCorrect the
	// lost links whose best candidate is right, written or not.
	Written     int                 `json:"written"`
	Precision   float64             `json:"precision"`
	BestCorrect int                 `json:"best_correct"`
	Calibration []CalibrationBucket `json:"calibration"`
}

// CalibrationBucket is the accuracy of inferred parents in one confidence range.
type CalibrationBucket struct {
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Inferred int     `json:"inferred"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
}
