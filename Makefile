# Tierscope. `make run` shows causal paths inferred from a generated multi-tier
# trace; `make test` is everything CI runs.
GO        ?= go
BIN       := bin
OUT       := out
TIERSCOPE := $(BIN)/tierscope

.PHONY: all build run test vet fmt-check unit bench bench-go bench-paths e2e-long fuzz clean

all: build

build:
	$(GO) build -o $(TIERSCOPE) ./cmd/tierscope

# The main job for now: generate the paper's multi-tier trace (about 200,000
# messages) and print the causal path patterns that take the most time, scored
# against the ground truth that the generator wrote in the path column.
run: build
	@mkdir -p $(OUT)
	$(TIERSCOPE) maketrace --config testdata/multitier.yaml --seed 1 --out $(OUT)/multitier.tsv
	$(TIERSCOPE) paths --in $(OUT)/multitier.tsv --format text --sort latency --top 5 --truth

test: fmt-check vet unit

fmt-check:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './grafana-datasource/node_modules/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

# Go micro-benchmarks, then the end-to-end CLI benchmark on 2M messages.
bench: bench-go bench-paths

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-paths: build
	scripts/bench-paths.sh

# Long experiments: the accuracy sweeps of paper 001 figures 19, 21 and 22.
e2e-long:
	$(GO) test -tags long -count=1 -timeout 30m -run 'TestFigure(19|21|22)' -v ./internal/causal/ | grep -E 'fig[0-9]+|^(ok|FAIL|---)'

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 60s ./internal/msgtrace

clean:
	rm -rf $(BIN) $(OUT)
