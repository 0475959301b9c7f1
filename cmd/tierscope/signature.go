package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/signature"
)

// signatureDoc is the output of `tierscope signature` (docs/formats.md §6): the
// options used, what was read, and one signature per (service, version).
type signatureDoc struct {
	Options        signature.Options        `json:"options"`
	Rows           int                      `json:"rows"`
	SkippedWindows map[string]int64         `json:"skipped_windows"`
	Signatures     []signature.AppSignature `json:"signatures"`
}

// compareDoc is the output of `tierscope signature compare`.
type compareDoc struct {
	Base      string `json:"base"`
	Candidate string `json:"candidate"`
	signature.AppComparison
}

func runSignature(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "compare" {
		return runSignatureCompare(args[1:], stdin, stdout, stderr)
	}
	fs := newFlagSet("signature", "signature --in windows.csv [--out signature.json] [--max-utilization 0.8]\n       tierscope signature compare --base a.json --candidate b.json [--out changes.json]", stderr)
	def := signature.DefaultOptions()
	var (
		in        = fs.String("in", "", "monitoring windows (docs/formats.md §6 CSV); - for standard input")
		out       = fs.String("out", "", "output file (default standard output)")
		maxU      = fs.Float64("max-utilization", def.MaxUtilization, "use only utilization buckets at or below this fraction (guard against high-utilization false alarms, paper 004 §IX)")
		minU      = fs.Float64("min-utilization", def.MinUtilization, "use only utilization buckets at or above this fraction")
		minCount  = fs.Int64("min-bucket-count", def.MinBucketCount, "fewest transactions a utilization bucket needs to be used")
		minBucket = fs.Int("min-buckets", def.MinBuckets, "fewest usable buckets for a signature; fewer give \"insufficient data\"")
		weighting = fs.String("weighting", string(def.Weighting), "weights of the per-bucket solutions in the median: count (transactions per bucket) or none (each bucket once)")
		spread    = fs.Float64("spread-threshold", def.SpreadThreshold, "interquartile range / median above which a transaction is \"spread\"")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	opts := signature.Options{MinUtilization: *minU, MaxUtilization: *maxU, MinBucketCount: *minCount,
		MinBuckets: *minBucket, Weighting: signature.Weighting(*weighting), SpreadThreshold: *spread}
	if err := opts.Validate(); err != nil {
		return usagef("%v", err)
	}
	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	profiles, st, err := signature.ReadProfiles(r, name)
	if err != nil {
		return err
	}
	if st.Rows == 0 {
		return fmt.Errorf("%s: no windows: the file has a header and no rows", name)
	}
	if st.AllSaturated {
		fmt.Fprintf(stderr, "tierscope signature: warning: %s: every row has cpu_utilization ≥ 1; it must be a fraction from 0 to 1, not a percentage\n", name)
	}
	apps, err := signature.Signatures(profiles, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	doc := signatureDoc{Options: opts, Rows: st.Rows, SkippedWindows: st.Skipped, Signatures: apps}
	return writeJSON(*out, stdout, doc)
}

func runSignatureCompare(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("signature compare", "signature compare --base a.json --candidate b.json [--out changes.json] [--service S] [--base-version V] [--candidate-version V]", stderr)
	def := signature.DefaultCompareOptions()
	var (
		basePath  = fs.String("base", "", "signature of the base version (output of tierscope signature)")
		candPath  = fs.String("candidate", "", "signature of the candidate version (may be the same file as --base)")
		out       = fs.String("out", "", "output file (default standard output)")
		service   = fs.String("service", "", "service to compare (needed when the files hold several)")
		baseVer   = fs.String("base-version", "", "version to take from --base (needed when it holds several of the service)")
		candVer   = fs.String("candidate-version", "", "version to take from --candidate (needed when it holds several of the service)")
		alpha     = fs.Float64("alpha", def.Alpha, "significance level of the Mann-Whitney U test")
		minEffMs  = fs.Float64("min-effect-ms", def.MinEffectMs, "minimum change of the service time, in ms")
		minEffPct = fs.Float64("min-effect-pct", def.MinEffectPct, "minimum change of the service time, in percent of the base")
		minBucket = fs.Int("min-buckets", def.MinBuckets, "fewest per-bucket solutions on each side for the test")
		common    = fs.Bool("common-range", def.CommonRange, "test only the buckets in the utilization range both sides cover")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *basePath == "" || *candPath == "" {
		return usagef("--base and --candidate are required")
	}
	opts := signature.CompareOptions{Alpha: *alpha, MinEffectMs: *minEffMs, MinEffectPct: *minEffPct,
		MinBuckets: *minBucket, CommonRange: *common}
	if err := opts.Validate(); err != nil {
		return usagef("%v", err)
	}
	baseDoc, err := readSignatureDoc(*basePath, stdin)
	if err != nil {
		return err
	}
	candDoc := baseDoc
	if *candPath != *basePath {
		if candDoc, err = readSignatureDoc(*candPath, stdin); err != nil {
			return err
		}
	}
	svc := *service
	if svc == "" {
		services := map[string]bool{}
		for _, d := range []*signatureDoc{baseDoc, candDoc} {
			for _, a := range d.Signatures {
				services[a.Service] = true
			}
		}
		if len(services) != 1 {
			return usagef("the signatures hold %d services (%s): choose one with --service", len(services), strings.Join(sortedKeys(services), ", "))
		}
		svc = sortedKeys(services)[0]
	}
	base, err := pickSignature(baseDoc, *basePath, svc, *baseVer, "--base-version")
	if err != nil {
		return err
	}
	cand, err := pickSignature(candDoc, *candPath, svc, *candVer, "--candidate-version")
	if err != nil {
		return err
	}
	if *basePath == *candPath && base.Version == cand.Version {
		return usagef("--base and --candidate name the same version %q of %q: choose two with --base-version and --candidate-version", base.Version, svc)
	}
	doc := compareDoc{Base: *basePath, Candidate: *candPath, AppComparison: signature.CompareApps(base, cand, opts)}
	return writeJSON(*out, stdout, doc)
}

// readSignatureDoc reads the output of `tierscope signature`.
func readSignatureDoc(path string, stdin io.Reader) (*signatureDoc, error) {
	r, name, closeIn, err := input(path, stdin)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	var doc signatureDoc
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: not a signature file: %v", name, err)
	}
	if doc.Signatures == nil {
		return nil, fmt.Errorf("%s: not a signature file: no \"signatures\" field", name)
	}
	for i := range doc.Signatures {
		for j := range doc.Signatures[i].Transactions {
			if err := completeTransaction(&doc.Signatures[i].Transactions[j], doc.Options); err != nil {
				a := doc.Signatures[i]
				return nil, fmt.Errorf("%s: %s %s: %v", name, a.Service, a.Version, err)
			}
		}
	}
	return &doc, nil
}

// completeTransaction checks a transaction read from a file and, when it
// carries only the docs/formats.md §6 profile triples and no "buckets", rebuilds
// the per-bucket solutions from them at each bucket's midpoint utilization.
func completeTransaction(t *signature.TransactionSignature, opts signature.Options) error {
	if t.Transaction == "" {
		return fmt.Errorf("a transaction has no name")
	}
	if t.Status == "" {
		t.Status = signature.StatusOK
		if t.ServiceTimeMs == nil {
			t.Status = signature.StatusInsufficientData
		}
	}
	if t.Status == signature.StatusOK && t.ServiceTimeMs == nil {
		return fmt.Errorf("%s: status ok without service_time_ms", t.Transaction)
	}
	if len(t.Buckets) > 0 || len(t.Profile) == 0 {
		return nil
	}
	maxU := opts.MaxUtilization
	if maxU == 0 {
		maxU = signature.DefaultMaxUtilization
	}
	for _, p := range t.Profile {
		k, n, r := p[0], p[1], p[2]
		if k < 0 || k >= signature.NumBuckets || n < 0 || r < 0 {
			return fmt.Errorf("%s: profile entry %v out of range", t.Transaction, p)
		}
		u := (k + 0.5) / signature.NumBuckets
		t.Buckets = append(t.Buckets, signature.BucketSolution{Bucket: int(k), Utilization: u, Count: int64(n),
			FrontLatencyMs: r, ServiceTimeMs: r * (1 - u), Used: n > 0 && u <= maxU})
	}
	return nil
}

func pickSignature(doc *signatureDoc, path, service, version, flag string) (*signature.AppSignature, error) {
	var found []*signature.AppSignature
	for i := range doc.Signatures {
		a := &doc.Signatures[i]
		if a.Service == service && (version == "" || a.Version == version) {
			found = append(found, a)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && version != "":
		return nil, fmt.Errorf("%s: no signature of %q version %q", path, service, version)
	case len(found) == 0:
		return nil, fmt.Errorf("%s: no signature of %q", path, service)
	}
	var versions []string
	for _, a := range found {
		versions = append(versions, a.Version)
	}
	return nil, usagef("%s holds %d versions of %q (%s): choose one with %s", path, len(found), service, strings.Join(versions, ", "), flag)
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

func writeJSON(path string, stdout io.Writer, v any) error {
	o, err := openOutput(path, stdout)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(o)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		o.abort()
		return err
	}
	return o.commit()
}
