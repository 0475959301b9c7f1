# Tierscope. `make run` runs the demo application under load through the
# otelcol-tierscope collector and summarises it; `make test` is everything CI runs.
GO        ?= go
BIN       := bin
OUT       := out
TIERSCOPE := $(BIN)/tierscope
# The collector distribution (builder-config.yaml); build/ is not committed.
OTELCOL   := build/otelcol-tierscope/otelcol-tierscope
EXAMPLES  := $(wildcard examples/*.yaml)


.PHONY: plugin test-plugin node-check bench-perfmodel bench-convolution bench-workfactor eval-workfactor bench-signature bench-gradient bench-capture bench-hold-cost
.PHONY: self-contained
.PHONY: all build build-cli build-otelcol build-testbed run run-paths test vet lint fmt-check unit e2e e2e-faults validate-examples test-timing \
	bench bench-go bench-paths bench-causalpath e2e-long e2e-scaleout eval-causal fuzz clean

all: build

build: build-cli build-otelcol build-testbed

build-cli:
	$(GO) build -o $(TIERSCOPE) ./cmd/tierscope

build-testbed:
	$(GO) build -o $(BIN)/testbed ./testbed/cmd/testbed

# Installs the pinned ocb into bin/, generates build/otelcol-tierscope and
# compiles it; incremental (minutes cold, seconds warm).
build-otelcol:
	scripts/build-otelcol.sh

# The main job: the testbed (web → app ×2 → db, a queue and a worker) under a
# non-stationary load for 90 s, observed by otelcol-tierscope, whose causalpath
# processor repairs the web → app hop whose context is dropped; then the
# costliest causal paths and the service graph. RUN_FOREVER=1 keeps it running.
run: build
	scripts/run.sh

# The message-trace demo: the paper's multi-tier trace (about 200,000 messages)
# and its costliest causal path patterns, scored against the generator's truth.
run-paths: build-cli
	@mkdir -p $(OUT)
	$(TIERSCOPE) maketrace --config testdata/multitier.yaml --seed 1 --out $(OUT)/multitier.tsv
	$(TIERSCOPE) paths --in $(OUT)/multitier.tsv --format text --sort latency --top 5 --truth

test: self-contained fmt-check vet lint unit e2e e2e-faults validate-examples test-plugin test-timing

# golangci-lint with .golangci.yml (docs/lint.md), at a pinned version, installed
# into GOPATH/bin when missing.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(shell $(GO) env GOPATH)/bin/golangci-lint
lint:
	@$(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(GOLANGCI_LINT_VERSION:v%=%)" || \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(GOLANGCI_LINT) run ./...

# The repository stands on its own: no tracked file may need or cite documents,
# papers or data outside it (docs/ and testdata/ hold what they need).
self-contained:
	@found=$$(grep -rnIE '\.\.[/]shared|/work[/]shared|papers[/][0-9]{3}_' --exclude-dir=node_modules --exclude-dir=build \
		--exclude-dir=dist --exclude-dir=.git --exclude-dir=bin --exclude-dir=out . || true); \
	if [ -n "$$found" ]; then echo "references outside the repository:"; echo "$$found"; exit 1; fi

fmt-check:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './grafana-datasource/node_modules/*' -not -path './build/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

# The exporter's experiment tests inject real delays and estimate gradients
# from response times measured over loopback, and nfqdelay's tests time real
# packets held in a namespace to the millisecond; they run after the other
# packages, each alone, so that no other test package competes for the cores
# (run in parallel, nfqdelay's floor and probe checks once read 2 ms over).
unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/exporter/perfmodelexporter$$' -e '/internal/nfqdelay$$')
	$(GO) test -count=1 ./exporter/perfmodelexporter/
	$(GO) test -count=1 ./internal/nfqdelay/

# The real collector with generated configs, fed by the OTel SDK (e2e/).
e2e: build-otelcol
	$(GO) test -count=1 ./e2e/

# The fault suite (root, about 30 s; part of `make test`): against the real collector, an
# injector token aimed at an unknown URL, kill -9 mid capacity/cpufreq lease,
# SIGSTOP of an injector holding a link, a second injector starting beside a
# live one, 1 MiB span attributes through causalpath, a restart of the file
# exporter; each asserts the safe outcome (docs/threat-model.md).
e2e-faults: build-otelcol
	$(GO) test -tags faults -count=1 -timeout 10m -run 'TestFault' -v ./e2e/

# Scale-out shown end to end (docs/scale-out.md, about 7 min): two agents, a
# gateway with the loadbalancing exporter, two analyzers on one PostgreSQL
# (the installed one, on loopback) against one collector fed the same
# traffic, with one analyzer killed and restarted, and one link experiment.
e2e-scaleout: build-otelcol
	$(GO) test -tags scaleout -count=1 -timeout 10m -run 'TestScaleOut' -v ./e2e/

# The Grafana datasource (grafana-datasource/): frontend (npm ci, webpack) and
# backend binaries into grafana-datasource/dist.
plugin: node-check
	$(MAKE) -C grafana-datasource build

# Its Go backend tests (one runs every dashboard panel against the collector of
# examples/testbed.yaml), jest, and the headless-Chromium test of its editors.
test-plugin: node-check build-otelcol
	TIERSCOPE_OTELCOL=$(abspath $(OTELCOL)) $(MAKE) -C grafana-datasource test

node-check:
	@node -e 'const v = +process.versions.node.split(".")[0]; if (v < 20) { console.error("the Grafana plugin build needs Node.js >= 20, found " + process.versions.node); process.exit(1) }'

# Tests that measure time (the precision and throughput of the NFQUEUE delay
# backend) run alone, after the rest, so no other test package competes
# for the two cores.
test-timing:
	$(GO) test -p 1 -tags timing -count=1 -timeout 5m -run 'TestPrecision|TestThroughput|TestSquareWaveFFTPeak|TestRealDelayLease' -v ./internal/nfqdelay/ ./injector/

# examples/injector.yaml has no default token: validation gets a throwaway one.
validate-examples: build-otelcol
	@for f in $(EXAMPLES); do \
		INJECTOR_TOKEN=validate-only $(OTELCOL) validate --config=$$f || { echo "invalid: $$f"; exit 1; }; \
		echo "valid: $$f"; \
	done

# Go micro-benchmarks, then the end-to-end CLI benchmark on 2M messages.
bench: bench-go bench-paths bench-perfmodel bench-convolution bench-workfactor bench-signature bench-gradient

# The perfmodel API over 24 h of 1-minute windows of 100 services.
bench-perfmodel:
	$(GO) test -tags long -count=1 -timeout 20m -run APILatency -v ./exporter/perfmodelexporter/

# Paper 001 Table 1 and figure 23 (convolution); paper 002 Table 5 (work
# factors); paper 004's case study (signatures); paper 000 figure 8 (gradients).
bench-convolution:
	scripts/bench-convolution.sh
bench-workfactor:
	scripts/bench-workfactor.sh

# Issue 37's generated scenarios (flows, noise, collinearity, background,
# releases; 20 seeds each, about 2 min): the tables of docs/workfactor-report.md
# into $(OUT)/workfactor/scenarios.md and its plots into docs/workfactor/.
eval-workfactor:
	@mkdir -p $(OUT)/workfactor
	$(GO) run ./internal/workfactor/scenario/cmd/wfscenario -seeds 20 -plots docs/workfactor > $(OUT)/workfactor/scenarios.md
	@echo "tables: $(OUT)/workfactor/scenarios.md; plots: docs/workfactor/*.svg"
bench-signature:
	scripts/bench-signature.sh
bench-gradient:
	scripts/bench-gradient.sh

# The injector's scheduler CPU per packet, passed and held, with and without
# a floor under the wave; the probe stream's CPU; a wave at a receiver against
# the Delayer's and the probes' on − off (root, ~90 s).
bench-hold-cost:
	$(GO) test -tags timing -count=1 -run "TestOnPhaseCost|TestProbeCost|TestWaveAtReceiver" -v ./internal/nfqdelay/

# Packets/s the blackbox receiver captures without drops (root).
bench-capture:
	scripts/bench-capture.sh

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-paths: build-cli
	scripts/bench-paths.sh

# causalpath vs the servicegraph connector, same collector, same load (20 s each).
bench-causalpath: build-otelcol
	scripts/bench-causalpath.sh

# Long experiments: the accuracy sweeps of paper 001 figures 19, 21 and 22, and
# the precision and throughput of the NFQUEUE delay backend (root).
e2e-long:
	scripts/e2e-models.sh
	scripts/e2e-gradients.sh
	scripts/e2e-capacity.sh
	scripts/e2e-frequency.sh
	$(GO) test -tags long -count=1 -timeout 10m -run TestExperimentMeasuresLinkGradient -v ./exporter/perfmodelexporter/
	$(GO) test -tags long -count=1 -timeout 30m -run 'TestFigure(19|21|22)' -v ./internal/causal/ | grep -E 'fig[0-9]+|^(ok|FAIL|---)'

# Span stitching measured (internal/stitcheval): TrainTicket made concurrent
# and generated applications, against concurrency, fan-out, time scale, skew,
# missing spans, async work, brokers, threads and attribute style, beside the
# naive baseline and the saved baseline run; figures, JSON and a markdown table
# in docs/causal/ (2,300 runs, about 8 min on 2 quiet cores). EVAL_NAME=baseline rewrites the baseline itself.
EVAL_NAME ?= current
eval-causal:
	$(GO) run ./internal/stitcheval/cmd/causaleval -out docs/causal -name $(EVAL_NAME) -seeds 5 -baseline docs/causal/baseline.json

# Every fuzz target, 30 s each.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 30s ./internal/msgtrace
	$(GO) test -run '^$$' -fuzz FuzzBlocks -fuzztime 30s ./internal/msgtrace
	$(GO) test -run '^$$' -fuzz FuzzDecodePattern -fuzztime 30s ./internal/model
	$(GO) test -run '^$$' -fuzz FuzzHTTPFraming -fuzztime 30s ./receiver/blackboxreceiver/internal/framing
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./receiver/blackboxreceiver/internal/accesslog
	$(GO) test -run '^$$' -fuzz FuzzEngine -fuzztime 30s ./receiver/blackboxreceiver/internal/engine

clean:
	rm -rf $(BIN) $(OUT) build
