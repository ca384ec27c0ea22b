# acpcompact: the two commands a newcomer needs are `make demo` (same as
# `go run ./cmd/acpcompact demo`) and `make test`.
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
NPM_DIR := test/interop

.PHONY: demo test test-deps lint unit fuzz-smoke bench dist

demo:
	$(GO) run ./cmd/acpcompact demo

# Installs the pinned npm packages (official ACP schema + TypeScript SDK),
# checks formatting and static analysis, then runs every test with -race.
# Plain `go test ./...` skips the schema assertions and the Node.js tests
# when their dependencies are missing; here they are required
# (ACPCOMPACT_REQUIRE_SCHEMA=1), so `make test` cannot pass without them.
test: test-deps lint unit

# test/interop also pins acpx, a real client the tests run through the
# proxy. Its lock file lists @openclaw/fs-safe's other-platform binaries by
# hand (version, os, cpu; no integrity): the registry mirror here lacks them,
# and npm ci refuses a lock without them. npm skips them on this platform.
test-deps:
	cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './test/interop/node_modules/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

unit:
	ACPCOMPACT_REQUIRE_SCHEMA=1 $(GO) test -race -count=1 ./...

# The npm packages (docs/proxy.md, "Install" and "Publishing"): for each
# platform a native binary, cross-built reproducibly (CGO_ENABLED=0,
# -trimpath, -buildvcs=false, -ldflags "-s -w -X main.version=$(VERSION)")
# and its package @acpcompact/<os>-<cpu>; the launcher package acpcompact;
# an npm pack tarball of each and SHA256SUMS, all in $(DIST_DIR) (replaced
# whole, git-ignored). npm/mkdist does the work; test/dist installs the
# host's packages offline and runs them. VERSION is the VERSION file's
# unless given; DIST_PLATFORMS=linux/amd64 builds one platform.
VERSION ?= $(shell cat VERSION)
DIST_DIR ?= dist
DIST_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64,windows/arm64
dist:
	$(GO) run ./npm/mkdist -version $(VERSION) -platforms $(DIST_PLATFORMS) -o $(DIST_DIR)

# Short coverage-guided runs of every fuzz target (seed corpora live in testdata/).
# Counted runs and a short minimisation avoid go1.26's -fuzztime deadline race
# (golang/go#75804) and minute-long shrinking of each new input.
fuzz-smoke:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20000x -fuzzminimizetime 1s $$pkg || exit 1; \
	  done; \
	done

# Benchmarks (test/bench/README.md): every benchmark of emitter, agentkit,
# proxy, the two history stores (sessionlog and sqlstore on SQLite: append
# and load) and the whole-agent flood (scenario agent vs the TypeScript SDK
# agent; the latter is skipped, loudly, without node or `make test-deps`),
# run BENCH_ROUNDS times round-robin so that load changes hit baseline and
# candidate alike, then a benchstat summary of the raw output and the table
# of ratios against the targets. About 2-3 minutes on 2 cores.
BENCH_ROUNDS ?= 6
BENCH_OUT ?= $(or $(TMPDIR),/tmp)/acpcompact-bench.txt
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
bench:
	$(GO) run ./test/bench/cmd/benchtable -rounds $(BENCH_ROUNDS) -o $(BENCH_OUT) > $(BENCH_OUT).table
	-$(GO) run golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) $(BENCH_OUT)
	@echo; cat $(BENCH_OUT).table

# The long lifecycle and memory soak (test/soak; README, "Shutting an agent
# down" and "Memory bounds"): 1,000 SIGINT/SIGTERM runs of the scenario agent
# binary, 10,000 sessions (in process, and through `acpcompact proxy`),
# 50,000 prompts for unknown sessions and 100,000 pipelined prompts, on real
# pipes; then the measurements, one REPORT line each. `make test` runs the
# short versions (ACPCOMPACT_SOAK unset). About 1-2 minutes on 2 cores.
.PHONY: soak
SOAK_OUT ?= $(or $(TMPDIR),/tmp)/acpcompact-soak.txt
soak:
	@rm -f $(SOAK_OUT)
	ACPCOMPACT_SOAK=1 ACPCOMPACT_SOAK_REPORT=$(SOAK_OUT) $(GO) test -count=1 -timeout 30m ./test/soak
	@cat $(SOAK_OUT)

# Re-records the real-agent transcripts in test/peers/testdata (see
# test/peers/README.md): installs the pinned npm releases, runs each agent
# offline against a loopback mock of its model API, inside a network
# namespace that has only loopback. On demand only (about 17 minutes); CI
# only replays the recorded files. PEERS="claude compact" records a subset.
# npm install is the fallback for a registry mirror that lacks the other
# platforms' optional binaries (npm ci then refuses the lock file).
.PHONY: record-peers
PEERS ?=
PEERS_NPM_FLAGS := --ignore-scripts --no-audit --no-fund --loglevel=error
record-peers:
	cd test/peers && { npm ci $(PEERS_NPM_FLAGS) 2>/dev/null || npm install $(PEERS_NPM_FLAGS); } && node record.mjs $(PEERS)
