package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter"
	"github.com/tierscope/tierscope/internal/api"
)

// startPerfmodel starts the real perfmodel exporter, built by its factory, with
// its API on a loopback port and one configured link, and returns the API's
// base URL as the exporter's README prints it (with /api/v1/).
func startPerfmodel(t *testing.T) string {
	t.Helper()
	factory := perfmodelexporter.NewFactory()
	cfg := factory.CreateDefaultConfig().(*perfmodelexporter.Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Storage.DSN = "sqlite://" + filepath.Join(t.TempDir(), "perfmodel.db")
	cfg.Storage.Shard = "cli-test"
	// No injector answers here: the experiment stays in training, where it
	// holds no lease, until it is aborted.
	cfg.Experiments.Injector = "http://127.0.0.1:9"
	cfg.Experiments.Links = map[string]perfmodelexporter.ExperimentLink{"web->app": {Address: "tcp://127.0.0.1:9"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	set := exportertest.NewNopSettings(factory.Type())
	set.ID = component.NewIDWithName(factory.Type(), "cli")
	set.Logger = zap.New(core)
	traces, err := factory.CreateTraces(context.Background(), set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := traces.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := traces.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	listening := logs.FilterMessage("perfmodel API listening").All()
	if len(listening) != 1 {
		t.Fatalf("the exporter logged its API address %d times", len(listening))
	}
	graphURL, _ := listening[0].ContextMap()["url"].(string)
	base, ok := strings.CutSuffix(graphURL, api.PathGraph)
	if !ok {
		t.Fatalf("unexpected API address %q", graphURL)
	}
	return base + api.VersionPrefix + "/"
}

// TestExperimentAgainstTheExporter starts, lists, follows and aborts a real
// experiment of the perfmodel exporter through the CLI alone.
func TestExperimentAgainstTheExporter(t *testing.T) {
	base := startPerfmodel(t)

	code, out, errs := runCLI(t, "", "experiment", "status", "--api", base)
	if code != 0 || !strings.Contains(out, "no experiments yet") || !strings.Contains(out, "tierscope experiment start") {
		t.Fatalf("status with none: exit %d, out %q, err %q", code, out, errs)
	}

	code, out, errs = runCLI(t, "", "experiment", "start", "--api", base, "--element", "link:web->app", "--format", "json", "--max-p99-ms", "500")
	if code != 0 {
		t.Fatalf("start: exit %d, err %q", code, errs)
	}
	var started api.Experiment
	if err := json.Unmarshal([]byte(out), &started); err != nil {
		t.Fatalf("start printed %q: %v", out, err)
	}
	if started.ID == "" || started.Element != "link:web->app" || started.Phase != "training" {
		t.Fatalf("started %+v", started)
	}

	code, out, errs = runCLI(t, "", "experiment", "status", "--api", base)
	if code != 0 || !strings.Contains(out, started.ID+"  link:web->app  training") {
		t.Fatalf("status: exit %d, out %q, err %q", code, out, errs)
	}
	code, out, errs = runCLI(t, "", "experiment", "status", started.ID, "--format", "json", "--api", strings.TrimSuffix(base, "/api/v1/"))
	if code != 0 || !strings.Contains(out, `"id":"`+started.ID+`"`) {
		t.Fatalf("status ID: exit %d, out %q, err %q", code, out, errs)
	}

	// A second start is refused by the exporter (max_concurrent 1), with its reason.
	code, _, errs = runCLI(t, "", "experiment", "start", "--api", base, "--element", "link:web->app")
	if code != exitBadInput || !strings.Contains(errs, "409") || !strings.Contains(errs, "max_concurrent") {
		t.Fatalf("second start: exit %d, err %q", code, errs)
	}
	// An element the exporter cannot resolve: its 400 and reason.
	code, _, errs = runCLI(t, "", "experiment", "start", "--api", base, "--element", "link:nowhere")
	if code != exitBadInput || !strings.Contains(errs, "400") || !strings.Contains(errs, "link:<source>-><target>") {
		t.Fatalf("bad element: exit %d, err %q", code, errs)
	}

	code, out, errs = runCLI(t, "", "experiment", "abort", started.ID, "--api", base)
	if code != 0 || !strings.Contains(out, started.ID) || !strings.Contains(out, "aborted") {
		t.Fatalf("abort: exit %d, out %q, err %q", code, out, errs)
	}
	// Following an experiment that ended aborted reports it and fails.
	code, out, errs = runCLI(t, "", "experiment", "status", "--wait", started.ID, "--api", base)
	if code != exitBadInput || !strings.Contains(out, "aborted") || !strings.Contains(errs, "ended aborted") {
		t.Fatalf("status --wait: exit %d, out %q, err %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "", "experiment", "abort", started.ID, "--api", base)
	if code != exitBadInput || !strings.Contains(errs, "409") {
		t.Fatalf("second abort: exit %d, err %q", code, errs)
	}
	code, _, errs = runCLI(t, "", "experiment", "status", "exp-none", "--api", base)
	if code != exitBadInput || !strings.Contains(errs, "404") {
		t.Fatalf("unknown id: exit %d, err %q", code, errs)
	}
}

func TestExperimentUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"experiment"}, "needs a subcommand"},
		{[]string{"experiment", "pause"}, "unknown experiment subcommand"},
		{[]string{"experiment", "start"}, "needs --element"},
		{[]string{"experiment", "start", "x", "--element", "link:a->b"}, "takes no id"},
		{[]string{"experiment", "abort"}, "needs an experiment id"},
		{[]string{"experiment", "status", "--wait"}, "needs an experiment id"},
		{[]string{"experiment", "status", "--format", "yaml"}, "--format"},
		{[]string{"experiment", "status", "--api", "127.0.0.1:8790"}, "--api must be an http(s) URL"},
	} {
		code, _, errs := runCLI(t, "", c.args...)
		if code != exitBadUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, err %q, want 2 and %q", c.args, code, errs, c.want)
		}
	}
	// Nothing listens on port 9: the error says which API could not be reached.
	code, _, errs := runCLI(t, "", "experiment", "status", "--api", "http://127.0.0.1:9")
	if code != exitBadInput || !strings.Contains(errs, "cannot be reached") {
		t.Errorf("unreachable: exit %d, err %q", code, errs)
	}
}
