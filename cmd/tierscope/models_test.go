package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/testbed/config"
)

// The testbed's own truth: each transaction's flows with the requests one
// transaction request makes of them, replicated writes twice.
func TestParseTruthOfTheTestbed(t *testing.T) {
	data, err := json.Marshal(config.Default().Truth())
	if err != nil {
		t.Fatal(err)
	}
	truth, err := parseTruth(data)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]map[string]float64{}
	for _, tx := range truth.transactions {
		byName[tx.name] = tx.flows
	}
	want := map[string]map[string]float64{
		"Home":     {"web Home": 1, "app catalog": 1, "db list_items": 1},
		"ViewItem": {"web ViewItem": 1, "app item": 3, "db get_item": 3},
		"PutBid":   {"web PutBid": 1, "app bid": 1, "db insert_bid": 2, "worker notify": 1, "db insert_notice": 2},
	}
	for name, flows := range want {
		if got := byName[name]; !equalFlows(got, flows) {
			t.Errorf("%s: flows %v, want %v", name, got, flows)
		}
	}
	cfg := config.Default()
	if got, want := truth.burn["app search"], cfg.Ops["search"].CPUMC; got != want {
		t.Errorf("app search burns %v Mc, the configuration says %v", got, want)
	}
	if truthKey("db /query/get_item") != "db get_item" || truthKey("web /txn/Home") != "web Home" {
		t.Errorf("truthKey: %q, %q", truthKey("db /query/get_item"), truthKey("web /txn/Home"))
	}
}

func equalFlows(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Against a fresh exporter every section says why it is empty and how to
// fill it, and the what-if says it needs an experiment.
func TestModelsOnAFreshExporter(t *testing.T) {
	base := startPerfmodel(t)
	data, err := json.Marshal(config.Default().Truth())
	if err != nil {
		t.Fatal(err)
	}
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	if err := os.WriteFile(truthFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"models", "--api", base, "--truth", truthFile, "--what-if", "link:web->app=+10"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"Work factors", "none yet: they need SERVER spans and CPU utilization",
		"Signatures", "none yet: no SERVER spans",
		"Gradients", "tierscope experiment start --element",
		"What if link:web->app=+10?", "no prediction", "run an experiment first",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code := run([]string{"models", "--what-if", "web->app"}, nil, &stdout, &stderr); code != exitBadUsage {
		t.Errorf("a what-if without a delta: exit %d, want %d", code, exitBadUsage)
	}
}
