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
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadatatest"
)

// The tail drops an over-long line that arrives in pieces (the rest of it
// after the limit is skipped up to its newline), does not count blank lines,
// and reads a file truncated in place again from its start.
func TestAccessLogTailSkipsAndTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	line := func(sec int, target string) string {
		return fmt.Sprintf("10.0.0.1 - - [22/Nov/2026:20:00:%02d +0000] \"GET %s HTTP/1.1\" 200 612 \"-\" \"curl/8\" 0.010\n", sec, target)
	}
	appendTo := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	appendTo(line(1, "/a"))

	cfg := createDefaultConfig().(*Config)
	cfg.AccessLogs = []AccessLogConfig{{Path: path, Service: "web", StartAt: "beginning", PollInterval: 20 * time.Millisecond, MaxLineBytes: 200}}
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
	waitFor(t, "the first line", func() bool { return sink.SpanCount() == 1 })

	// Past the limit before its newline is read: the tail starts skipping.
	appendTo(strings.Repeat("x", 300))
	time.Sleep(100 * time.Millisecond)
	appendTo("yyy\n\n" + line(2, "/b"))
	waitFor(t, "the line after the over-long one", func() bool { return sink.SpanCount() == 2 })

	// Truncated in place (same inode, smaller than the offset read).
	if err := os.WriteFile(path, []byte(line(3, "/c")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the truncated file's line", func() bool { return sink.SpanCount() == 3 })
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, s := range collectSpans(sink) {
		names = append(names, s.name)
	}
	if want := "GET /a,GET /b,GET /c"; strings.Join(names, ",") != want {
		t.Errorf("spans %v, want %s", names, want)
	}
	if n := counter(t, tel, "receiver_blackbox_log_lines"); n != 4 {
		t.Errorf("lines counted %d, want 4 (three good, one over-long; the blank one is no line)", n)
	}
	if n := counter(t, tel, "receiver_blackbox_log_lines_malformed"); n != 1 {
		t.Errorf("malformed lines counted %d, want 1 (the over-long line)", n)
	}
}
