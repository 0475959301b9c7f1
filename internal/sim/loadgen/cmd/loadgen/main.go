// Command loadgen sends the three-tier shop scenario of internal/sim/loadgen to an
// OTLP/gRPC endpoint as fast as it accepts it, for a bounded time and span
// count, and prints one JSON line with the accepted rate. It is the load side of
// scripts/bench-causalpath.sh and not part of the tierscope CLI.
//
//	go run ./internal/sim/loadgen/cmd/loadgen --endpoint 127.0.0.1:4317 --duration 20s
//
// Span timestamps follow the scenario's own timeline (a request every 12–24 ms
// by default), starting at the current time. Sending faster than real time
// therefore moves timestamps ahead of the wall clock, but keeps the density of
// concurrent calls, which is what inference cost depends on, realistic.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

type result struct {
	Label         string  `json:"label,omitempty"`
	Endpoint      string  `json:"endpoint"`
	Seconds       float64 `json:"seconds"`
	Requests      int64   `json:"requests"`
	SpansSent     int64   `json:"spans_sent"`
	SpansAccepted int64   `json:"spans_accepted"`
	SpansRejected int64   `json:"spans_rejected"`
	Errors        int64   `json:"errors"`
	LastError     string  `json:"last_error,omitempty"`
	SpansPerSec   float64 `json:"spans_per_sec"`
	CPUSeconds    float64 `json:"loadgen_cpu_seconds"`
	DropFraction  float64 `json:"drop_fraction"`
	Concurrency   int     `json:"concurrency"`
	TracesPerReq  int     `json:"traces_per_request"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run() error {
	endpoint := flag.String("endpoint", "", "OTLP/gRPC endpoint, host:port (loopback only)")
	duration := flag.Duration("duration", 20*time.Second, "how long to send")
	maxSpans := flag.Int64("max-spans", 200_000_000, "stop after this many spans")
	concurrency := flag.Int("concurrency", 4, "concurrent Export calls")
	perReq := flag.Int("traces-per-request", 64, "requests (traces) per OTLP export, 4.25 spans each on average")
	drop := flag.Float64("drop-fraction", 0.5, "share of requests whose app SERVER span lost its context")
	seed := flag.Int64("seed", 1, "scenario seed")
	label := flag.String("label", "", "label copied into the result")
	timeout := flag.Duration("timeout", 10*time.Second, "timeout of one Export call")
	flag.Parse()

	if *endpoint == "" {
		return errors.New("--endpoint is required")
	}
	host, _, err := net.SplitHostPort(*endpoint)
	if err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--endpoint %s is not a loopback address", *endpoint)
	}
	if *duration <= 0 || *duration > 10*time.Minute || *concurrency < 1 || *perReq < 1 || *maxSpans < 1 {
		return errors.New("need 0 < duration <= 10m, concurrency >= 1, traces-per-request >= 1, max-spans >= 1")
	}

	cfg := loadgen.DefaultConfig()
	cfg.Seed = *seed
	cfg.DropFraction = *drop
	cfg.Start = time.Now()
	gen, err := loadgen.NewGenerator(cfg)
	if err != nil {
		return err
	}

	conn, err := grpc.NewClient(*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	// One producer builds requests ahead of the senders.
	reqs := make(chan ptraceotlp.ExportRequest, 2**concurrency)
	var produced atomic.Int64
	go func() {
		defer close(reqs)
		ids := loadgen.NewIDs(*seed)
		for produced.Load() < *maxSpans {
			td := ptrace.NewTraces()
			loadgen.AppendOTLP(td, gen.Next(*perReq), ids)
			produced.Add(int64(td.SpanCount()))
			select {
			case reqs <- ptraceotlp.NewExportRequestFromTraces(td):
			case <-ctx.Done():
				return
			}
		}
	}()

	var res result
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range *concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var req ptraceotlp.ExportRequest
				var ok bool
				select {
				case req, ok = <-reqs:
				case <-ctx.Done():
					ok = false
				}
				if !ok {
					return
				}
				n := int64(req.Traces().SpanCount())
				callCtx, callCancel := context.WithTimeout(context.Background(), *timeout)
				resp, err := client.Export(callCtx, req)
				callCancel()
				mu.Lock()
				res.Requests++
				res.SpansSent += n
				if err != nil {
					res.Errors++
					res.LastError = err.Error()
				} else {
					rejected := resp.PartialSuccess().RejectedSpans()
					res.SpansRejected += rejected
					res.SpansAccepted += n - rejected
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()

	res.Label = *label
	res.Endpoint = *endpoint
	res.Seconds = elapsed
	res.SpansPerSec = float64(res.SpansAccepted) / elapsed
	res.DropFraction = *drop
	res.Concurrency = *concurrency
	res.TracesPerReq = *perReq
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	if res.SpansAccepted == 0 {
		return fmt.Errorf("no span was accepted (%d errors; last: %s)", res.Errors, res.LastError)
	}
	return nil
}
