# shardloop — the front door. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
GOARCH_FN ?= arm64
EMU_DIR   := tools/emulators
EMU_STAMP := $(EMU_DIR)/node_modules/.installed
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
BUILD_DIR := build
BENCHPLOTS := chaos/cmd/benchplots

.PHONY: help deps build test test-go test-under-load lint bench bench-plots demo emulators sim clean

# make sim: how many simulated worlds, from which seed.
SEEDS ?= 1000
FIRST ?= 1

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

deps: $(EMU_STAMP) ## Install what tests need: kinesis-local and dynalite (npm ci), Go modules and tools
	@$(GO) mod download
	@$(GO) build -o /dev/null github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

$(EMU_STAMP): $(EMU_DIR)/package-lock.json
	@command -v node >/dev/null || { echo "node (>= 20) is required for the local emulators"; exit 1; }
	cd $(EMU_DIR) && npm ci --no-audit --no-fund
	@touch $@

build: ## Build the Lambda bootstraps (linux/$(GOARCH_FN)) into build/<function>/bootstrap
	@for fn in $(FUNCTIONS); do \
	  echo "build $(BUILD_DIR)/$$fn/bootstrap (linux/$(GOARCH_FN))"; \
	  mkdir -p $(BUILD_DIR)/$$fn && \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_FN) $(GO) build -tags lambda.norpc -trimpath \
	    -ldflags='-s -w -buildid=' -o $(BUILD_DIR)/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(BENCHPLOTS) && $(GO) vet ./...

test-go: deps ## go test -race ./... (starts the emulators itself)
	@echo "go test -race ./...: each package's result prints when it ends; chaos and e2e take a few minutes each (e2e builds the Lambda bootstraps first)"
	$(GO) test -race -count=1 -timeout 40m ./...
	cd $(BENCHPLOTS) && $(GO) test -count=1 ./...

# make test: how many simulated worlds beside the regression worlds (which
# go test runs), and from which seed. By default (commit) the range is drawn
# from the commit checked out: every change meets worlds no earlier run
# met, and running make test again on the same commit meets the same ones,
# so a red run is the change's and replays exactly. CI_FIRST=fresh draws a
# new range each run; CI_FIRST=S starts at seed S. The range is printed with
# the command that replays it.
CI_SEEDS ?= 120
CI_FIRST ?= commit

test: deps lint test-go ## Everything CI runs: lint, go test -race, 120 simulated worlds (a range drawn from the commit), infra tests and template checks
	@first=$(CI_FIRST); \
	  if [ "$$first" = commit ]; then \
	    head=$$(git rev-parse --verify --quiet HEAD 2>/dev/null); \
	    if [ -n "$$head" ]; then first=$$(( 0x$${head:0:7} + 2000000 )); else first=fresh; fi; \
	  fi; \
	  if [ "$$first" = fresh ]; then first=$$(( (RANDOM << 15 | RANDOM) + 2000000 )); fi; \
	  echo "sim: $(CI_SEEDS) worlds from seed $$first (replay the range: make sim SEEDS=$(CI_SEEDS) FIRST=$$first)"; \
	  $(MAKE) --no-print-directory sim SEEDS=$(CI_SEEDS) FIRST=$$first
	@if $(MAKE) -n test-infra >/dev/null 2>&1; then $(MAKE) --no-print-directory test-infra; fi

# make test-under-load: how many busy processes run beside make test.
BUSY ?= 6

test-under-load: ## make test beside BUSY (6) busy processes: the check that tests do not assume a quiet machine
	@tools/load/under-load.sh $(BUSY) -- $(MAKE) --no-print-directory test

# make bench: which benchmarks (a go test -bench regexp); all of them take about an hour.
BENCH ?= .

bench: deps ## Benchmarks one at a time, with progress; prints `bench <name> <value> <unit>` lines (BENCH=regexp selects)
	@GO=$(GO) tools/bench/run.sh '$(BENCH)'

sim: ## Run SEEDS simulated worlds from seed FIRST (internal/sim, virtual time); a failing one prints its replay command
	@set -o pipefail; $(GO) test ./internal/sim -run '^TestSim$$' -count=1 -timeout 0 -v -sim.seeds=$(SEEDS) -sim.first=$(FIRST) 2>&1 | \
	  grep -vE '^ *(=== (RUN|PAUSE|CONT)|--- PASS|PASS$$)'

demo: deps ## The whole system on local emulators: a split, a merge, a killed loop; ends with the verdict line
	@$(GO) build -o $(BUILD_DIR)/shardloop ./cmd/shardloop
	@$(BUILD_DIR)/shardloop demo

bench-plots: ## Draw docs/img's figures from make bench's samples in build/bench-data (gonum/plot)
	cd $(BENCHPLOTS) && $(GO) run . -data $(CURDIR)/$(BUILD_DIR)/bench-data -out $(CURDIR)/docs/img

emulators: deps ## Start kinesis-local and dynalite for your own experiments; prints their endpoints, Ctrl-C stops them
	@$(GO) build -o $(BUILD_DIR)/shardloop ./cmd/shardloop
	@$(BUILD_DIR)/shardloop emulators

clean: ## Remove build output
	rm -rf $(BUILD_DIR)

-include mk/*.mk
