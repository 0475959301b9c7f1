package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	sigV1      = "../../testdata/signature/tpcw-v1-mix1.csv"
	sigV2      = "../../testdata/signature/tpcw-v2-home+2ms-mix2.csv"
	sigInsuff  = "../../testdata/signature/insufficient.csv"
	sigExample = "window_start,service,version,transaction,count,latency_ms,outbound_calls,outbound_latency_ms,cpu_utilization\n"
)

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v\n%s", err, s)
	}
	return m
}

func TestSignatureContract(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sig.json")
	code, _, errs := runCLI(t, "", "signature", "--in", sigV1, "--out", out, "--max-utilization", "0.8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := decodeJSON(t, string(data))
	sigs := doc["signatures"].([]any)
	if len(sigs) != 1 {
		t.Fatalf("%d signatures, want one per (service, version)", len(sigs))
	}
	app := sigs[0].(map[string]any)
	if app["service"] != "tpcw" || app["version"] != "v1" {
		t.Fatalf("%v %v", app["service"], app["version"])
	}
	txs := app["transactions"].([]any)
	if len(txs) != 14 {
		t.Fatalf("%d transactions, want the 14 of TPC-W", len(txs))
	}
	for _, x := range txs {
		tx := x.(map[string]any)
		// docs/formats.md §6 fields.
		for _, f := range []string{"transaction", "service_time_ms", "buckets_used", "spread", "profile"} {
			if _, ok := tx[f]; !ok {
				t.Fatalf("%v lacks %q", tx["transaction"], f)
			}
		}
		for _, p := range tx["profile"].([]any) {
			if len(p.([]any)) != 3 {
				t.Fatalf("profile entry %v is not [utilization_bucket, count, mean_front_latency_ms]", p)
			}
		}
		if tx["status"] != "ok" {
			t.Fatalf("%v: %v", tx["transaction"], tx["reason"])
		}
	}
	opts := doc["options"].(map[string]any)
	if opts["max_utilization"] != 0.8 || opts["weighting"] != "count" {
		t.Fatalf("options %v", opts)
	}
}

func TestSignatureCompareFlagsOnlyHome(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, c := range [][]string{{sigV1, a}, {sigV2, b}} {
		if code, _, errs := runCLI(t, "", "signature", "--in", c[0], "--out", c[1]); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
	}
	code, out, errs := runCLI(t, "", "signature", "compare", "--base", a, "--candidate", b)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	doc := decodeJSON(t, out)
	if doc["base_version"] != "v1" || doc["candidate_version"] != "v2-home+2ms" {
		t.Fatalf("versions %v %v", doc["base_version"], doc["candidate_version"])
	}
	changed := doc["changed"].([]any)
	if len(changed) != 1 || changed[0] != "Home" {
		t.Fatalf("changed %v, want [Home]", changed)
	}
	for _, x := range doc["transactions"].([]any) {
		tx := x.(map[string]any)
		for _, f := range []string{"delta_ms", "delta_pct", "changed", "confidence", "verdict", "test"} {
			if _, ok := tx[f]; !ok {
				t.Fatalf("%v lacks %q", tx["transaction"], f)
			}
		}
		if tx["transaction"] == "Home" {
			d := tx["delta_ms"].(float64)
			if d < 1.5 || d > 2.5 || tx["confidence"].(float64) < 0.99 || tx["verdict"] != "changed" {
				t.Fatalf("Home: %v", tx)
			}
			test := tx["test"].(map[string]any)
			if test["name"] != "mann-whitney-u" || test["p_value"].(float64) >= 0.01 {
				t.Fatalf("Home test %v", test)
			}
		}
	}
}

func TestSignatureCompareOneFileTwoVersions(t *testing.T) {
	v1, _ := os.ReadFile(sigV1)
	v2, _ := os.ReadFile(sigV2)
	both := string(v1) + strings.SplitN(string(v2), "\n", 2)[1] // one header
	in := writeFile(t, "both.csv", both)
	sig := filepath.Join(t.TempDir(), "both.json")
	if code, _, errs := runCLI(t, "", "signature", "--in", in, "--out", sig); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs := runCLI(t, "", "signature", "compare", "--base", sig, "--candidate", sig)
	if code != 2 || !strings.Contains(errs, "--base-version") {
		t.Fatalf("ambiguous versions: exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, "", "signature", "compare", "--base", sig, "--candidate", sig, "--base-version", "v1", "--candidate-version", "v2-home+2ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if ch := decodeJSON(t, out)["changed"].([]any); len(ch) != 1 || ch[0] != "Home" {
		t.Fatalf("changed %v", ch)
	}
	code, _, errs = runCLI(t, "", "signature", "compare", "--base", sig, "--candidate", sig, "--base-version", "v9", "--candidate-version", "v1")
	if code != 1 || !strings.Contains(errs, "v9") {
		t.Fatalf("missing version: exit %d: %s", code, errs)
	}
}

// Utilization ≥ 1, empty windows and too little data give an explicit
// "insufficient data" and no number.
func TestSignatureInsufficientData(t *testing.T) {
	code, out, errs := runCLI(t, "", "signature", "--in", sigInsuff)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	doc := decodeJSON(t, out)
	skipped := doc["skipped_windows"].(map[string]any)
	if skipped["saturated"] != 2.0 || skipped["empty"] != 2.0 {
		t.Fatalf("skipped %v", skipped)
	}
	want := map[string]string{"Home": "ok", "Cart": "insufficient data", "Login": "insufficient data", "Search": "insufficient data"}
	for _, x := range doc["signatures"].([]any)[0].(map[string]any)["transactions"].([]any) {
		tx := x.(map[string]any)
		name := tx["transaction"].(string)
		if tx["status"] != want[name] {
			t.Fatalf("%s: status %v (%v)", name, tx["status"], tx["reason"])
		}
		if want[name] == "ok" {
			if s := tx["service_time_ms"].(float64); s < 16 || s > 20 {
				t.Fatalf("Home service time %v", s)
			}
			continue
		}
		if tx["service_time_ms"] != nil || tx["spread"] != nil || tx["reason"] == "" {
			t.Fatalf("%s: a number for insufficient data: %v", name, tx)
		}
	}
	// Compared against itself: the thin transactions stay "insufficient data".
	sig := writeFile(t, "s.json", out)
	code, cmpOut, errs := runCLI(t, out, "signature", "compare", "--base", sig, "--candidate", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, x := range decodeJSON(t, cmpOut)["transactions"].([]any) {
		tx := x.(map[string]any)
		if tx["transaction"] != "Home" && (tx["verdict"] != "insufficient data" || tx["delta_ms"] != nil || tx["changed"] != false) {
			t.Fatalf("%v", tx)
		}
	}
}

func TestSignaturePercentWarning(t *testing.T) {
	in := sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,120,35.2,240,4.1,31\n"
	code, out, errs := runCLI(t, in, "signature", "--in", "-")
	if code != 0 || !strings.Contains(errs, "not a percentage") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"insufficient data"`) {
		t.Fatal(out)
	}
}

func TestSignatureBadInput(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"letters", sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,abc,35.2,240,4.1,0.3\n", "x.csv:2: count"},
		{"negative utilization", sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,5,35.2,0,0,-0.3\n", "x.csv:2: "},
		{"nan", sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,5,NaN,0,0,0.3\n", "x.csv:2: latency_ms"},
		{"short row", sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,5\n", "x.csv:2: "},
		{"missing column", "window_start,service,version,transaction,count\n", "x.csv:1: header lacks column"},
		{"empty", "", "empty input"},
		{"header only", sigExample, "no windows"},
		{"bad time", sigExample + "yesterday,shop,v1,Home,5,35.2,0,0,0.3\n", "x.csv:2: window_start"},
		{"third line", sigExample + "2026-01-01T00:00:00Z,shop,v1,Home,5,35.2,0,0,0.3\n2026-01-01T00:01:00Z,shop,v1,Home,5,35.2,0,0,x\n", "x.csv:3: cpu_utilization"},
	} {
		p := filepath.Join(t.TempDir(), "x.csv")
		os.WriteFile(p, []byte(c.body), 0o644)
		code, _, errs := runCLI(t, "", "signature", "--in", p)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: exit %d, stderr %q, want exit 1 and %q", c.name, code, errs, c.want)
		}
	}
	notSig := writeFile(t, "n.json", `{"hello": 1}`)
	if code, _, errs := runCLI(t, "", "signature", "compare", "--base", notSig, "--candidate", notSig); code != 1 || !strings.Contains(errs, "not a signature file") {
		t.Errorf("not a signature: exit %d: %s", code, errs)
	}
}

func TestSignatureBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"signature"},
		{"signature", "--in", sigV1, "--max-utilization", "1.5"},
		{"signature", "--in", sigV1, "--max-utilization", "0"},
		{"signature", "--in", sigV1, "--weighting", "sqrt"},
		{"signature", "--in", sigV1, "extra"},
		{"signature", "compare", "--base", "a.json"},
		{"signature", "compare", "--base", "a.json", "--candidate", "b.json", "--alpha", "2"},
	} {
		if code, _, errs := runCLI(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, _ := runCLI(t, "", "signature", "-h"); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
}
