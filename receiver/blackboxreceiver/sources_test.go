package blackboxreceiver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadatatest"
)

// counter reads a self-metric's total.
func counter(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric("otelcol_" + name)
	if err != nil {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	}
	return n
}

type gotSpan struct {
	service, name string
	kind          ptrace.SpanKind
	start, end    int64
	attrs         map[string]any
	parent        string
	id, trace     string
}

func collectSpans(sink *consumertest.TracesSink) []gotSpan {
	var out []gotSpan
	for _, td := range sink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					sp := ss.At(k)
					out = append(out, gotSpan{svc.Str(), sp.Name(), sp.Kind(), int64(sp.StartTimestamp()), int64(sp.EndTimestamp()),
						sp.Attributes().AsRaw(), sp.ParentSpanID().String(), sp.SpanID().String(), sp.TraceID().String()})
				}
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAccessLogDurations tails an nginx log and an Apache log, with lines
// already there, lines appended while running, a malformed line, a line cut
// in two writes, an over-long line and a rotation: every well-formed line
// becomes one SERVER span whose duration is exactly the logged response time.
func TestAccessLogDurations(t *testing.T) {
	dir := t.TempDir()
	nginxPath, apachePath := filepath.Join(dir, "access.log"), filepath.Join(dir, "apache.log")
	nginxLine := func(sec int, path string, status int, rt string) string {
		return fmt.Sprintf("10.0.0.%d - - [22/Nov/2026:20:%02d:%02d +0000] \"GET %s HTTP/1.1\" %d 612 \"-\" \"curl/8\" %s\n", sec%250+1, sec/60, sec%60, path, status, rt)
	}
	write := func(path, s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	write(nginxPath, nginxLine(1, "/txn/Home", 200, "0.153")+nginxLine(2, "/txn/ViewItem?id=3", 200, "0.007"))
	write(apachePath, `192.168.1.9 - bob [22/Nov/2026:20:00:05 +0000] "POST /cart HTTP/1.0" 503 - "-" "M" 12345`+"\n")

	cfg := createDefaultConfig().(*Config)
	cfg.AccessLogs = []AccessLogConfig{
		{Path: nginxPath, Service: "web", Routes: []string{"/txn/{name}"}, StartAt: "beginning", PollInterval: 20 * time.Millisecond, MaxLineBytes: 1024},
		{Path: apachePath, Format: "apache_timed", Service: "shop", Instance: "shop-1", StartAt: "beginning", PollInterval: 20 * time.Millisecond},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	sink := new(consumertest.TracesSink)
	r, err := newTracesReceiver(metadatatest.NewSettings(tel), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown(context.Background()) }()
	waitFor(t, "the first lines", func() bool { return sink.SpanCount() == 3 })

	// Appended while running: a good line, a malformed one, one written in
	// two pieces, an over-long one.
	write(nginxPath, nginxLine(3, "/txn/Search", 500, "1.250")+"this is not an access log line\n")
	half := nginxLine(4, "/txn/Login", 200, "0.042")
	write(nginxPath, half[:30])
	time.Sleep(60 * time.Millisecond)
	write(nginxPath, half[30:]+strings.Repeat("x", 3000)+"\n")
	waitFor(t, "the appended lines", func() bool { return sink.SpanCount() == 5 })

	// Rotation: the file is moved away and a new one starts.
	if err := os.Rename(nginxPath, nginxPath+".1"); err != nil {
		t.Fatal(err)
	}
	write(nginxPath, nginxLine(5, "/static/logo.png", 304, "0.000"))
	waitFor(t, "the rotated file", func() bool { return sink.SpanCount() == 6 })
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	want := []struct {
		service, name, route string
		dur                  time.Duration
		status               int64
		endSec               int
	}{
		{"web", "GET /txn/{name}", "/txn/{name}", 153 * time.Millisecond, 200, 1},
		{"web", "GET /txn/{name}", "/txn/{name}", 7 * time.Millisecond, 200, 2},
		{"shop", "POST /cart", "", 12345 * time.Microsecond, 503, -1},
		{"web", "GET /txn/{name}", "/txn/{name}", 1250 * time.Millisecond, 500, 3},
		{"web", "GET /txn/{name}", "/txn/{name}", 42 * time.Millisecond, 200, 4},
		{"web", "GET /static/logo.png", "", 0, 304, 5},
	}
	got := collectSpans(sink)
	for _, w := range want {
		found := false
		for _, g := range got {
			if g.service != w.service || g.name != w.name || g.attrs["http.response.status_code"] != w.status || time.Duration(g.end-g.start) != w.dur {
				continue
			}
			found = true
			if g.kind != ptrace.SpanKindServer {
				t.Errorf("%s: kind %v", g.name, g.kind)
			}
			if w.route != "" && g.attrs["http.route"] != w.route {
				t.Errorf("%s: route %v", g.name, g.attrs["http.route"])
			}
			if w.endSec >= 0 {
				// nginx stamps the end of the request.
				end := time.Date(2026, 11, 22, 20, 0, w.endSec, 0, time.UTC).UnixNano()
				if g.end != end {
					t.Errorf("%s: end %d, want %d", g.name, g.end, end)
				}
			} else if start := time.Date(2026, 11, 22, 20, 0, 5, 0, time.UTC).UnixNano(); g.start != start {
				t.Errorf("%s: Apache stamps the start: %d, want %d", g.name, g.start, start)
			}
		}
		if !found {
			t.Errorf("no %s span %q of %v with status %d in %+v", w.service, w.name, w.dur, w.status, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d spans, want %d", len(got), len(want))
	}
	if n := counter(t, tel, "receiver_blackbox_log_lines_malformed"); n != 2 {
		t.Errorf("malformed lines counted %d, want 2 (the garbage and the over-long line)", n)
	}
	if n := counter(t, tel, "receiver_blackbox_log_lines"); n != 8 {
		t.Errorf("lines counted %d, want 8", n)
	}
}

// TestTraceFileReplay replays a message trace sped up: one CLIENT and one
// SERVER span per call pair, paired, with durations scaled by the speed.
func TestTraceFileReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.tsv")
	trace := "# timestamp\toperation\tsender\treceiver\tid\tpath\n" +
		"1700000000.000\tCALL_SENT\tclient\tWS\tc1\tp1\n" +
		"1700000000.010\tCALL_SENT\tWS\tDB\tc2\tp1\n" +
		"1700000000.030\tRET_SENT\tDB\tWS\tc2\tp1\n" +
		"1700000000.040\tRET_SENT\tWS\tclient\tc1\tp1\n" +
		"1700000000.050\tMSG_SENT\tWS\tlog\t-\tp1\n" +
		"1700000000.200\tRET_SENT\tDB\tWS\tc9\t-\n"
	if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	tf := defaultTraceFile()
	tf.Path, tf.Speed = path, 10
	cfg.TraceFile = configoptional.Some(tf)
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	sink := new(consumertest.TracesSink)
	r, err := newTracesReceiver(metadatatest.NewSettings(tel), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replay", func() bool { return sink.SpanCount() == 4 })
	if el := time.Since(start); el < 3*time.Millisecond {
		t.Errorf("the 40 ms trace replayed at 10x in %v, want about 4 ms", el)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := collectSpans(sink)
	byKey := map[string]gotSpan{}
	for _, s := range spans {
		byKey[s.service+"/"+s.kind.String()] = s
	}
	cl, sv := byKey["WS/Client"], byKey["DB/Server"]
	if d := time.Duration(cl.end - cl.start); d != 2*time.Millisecond {
		t.Errorf("WS -> DB call lasts %v at 10x, want 2ms", d)
	}
	if sv.parent != cl.id || sv.trace != cl.trace || cl.attrs["service.peer.name"] != "DB" || cl.attrs[attrTruthPath] != "p1" {
		t.Errorf("pairing: client %+v server %+v", cl, sv)
	}
	if n := counter(t, tel, "receiver_blackbox_tracefile_discarded"); n != 2 {
		t.Errorf("discarded %d, want 2 (a one-way message and a return without call)", n)
	}
}
