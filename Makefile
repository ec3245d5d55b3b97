# Gangway: build, test and run the development stack.
#
#   make deps     Temporal CLI into bin/ (built once, ~6 min), redis-server and promtool
#   make postgres PostgreSQL server binaries (tests of the production ledger)
#   make build    bin/gangway
#   make dev      deps + build, then `bin/gangway dev $(DEV_FLAGS)`
#   make test     deps, postgres and chromium, then every test, integration
#                 tests on real servers and the web view's in headless
#                 Chromium; screenshots and other test artifacts are kept in
#                 test-artifacts/
#   make lint     gofmt, go vet, workflowcheck (Temporal determinism)
#   make fuzz     each parser's fuzz target for FUZZTIME (60s); `make test`
#                 runs their seed corpora (testdata/fuzz/) as plain tests
#   make clean    build and test outputs (keeps the tools in bin/)
#   make distclean  also the tools in bin/
#
# Tools live in bin/ and are file targets: once built they are reused.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
BIN := $(CURDIR)/bin

# v1.5.1 is the newest Temporal CLI that `go install` accepts: v1.9.1 has a
# replace directive in its go.mod, v1.6-v1.8 are not on the module proxy.
TEMPORAL_VERSION := v1.5.1
# The proxy serves workflowcheck v0.3.0, v0.5.0 and v0.6.0; v0.3.0 pins
# golang.org/x/tools v0.25.0, which does not compile with Go 1.26.
WORKFLOWCHECK_VERSION := v0.6.0

DEV_FLAGS ?=
TEST_FLAGS ?=

# The agent reads GPUs through NVML (github.com/NVIDIA/go-nvml), which needs
# cgo and gcc; its header marks many calls deprecated, which is noise.
export CGO_ENABLED ?= 1
export CGO_CFLAGS ?= -Wno-deprecated-declarations

.PHONY: deps redis postgres promtool chromium build dev test lint clean distclean

bin/temporal:
	@echo "Installing the Temporal CLI $(TEMPORAL_VERSION) (dev server: Temporal Server + Web UI) into bin/temporal."
	@echo "It builds from source: about 6 minutes and 2 GB of RAM on 2 cores. Later runs reuse bin/temporal."
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

INSTALL_WORKFLOWCHECK := GOBIN=$(BIN) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

bin/workflowcheck:
	$(INSTALL_WORKFLOWCHECK)

# redis-server comes from the OS: tests and `gangway dev` run their own
# instances on free ports, never a system service.
redis:
	@if command -v redis-server >/dev/null; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "redis-server not found; running as root, so installing it: apt-get update && apt-get install -y redis-server"; \
		apt-get update && apt-get install -y redis-server; \
	else \
		echo "redis-server not found. Install Redis 7, for example:" >&2; \
		echo "    sudo apt-get update && sudo apt-get install -y redis-server" >&2; \
		echo "(macOS: brew install redis)" >&2; \
		exit 1; \
	fi

# PostgreSQL comes from the OS too: the ledger's conformance suite and the
# end-to-end tests run initdb and the server themselves, in a temporary
# directory on a free port (as the postgres user when run as root), never
# the system cluster. Found as internal/devstack's FindPostgres finds it.
postgres:
	@if [ -x "$${GANGWAY_POSTGRES_BIN:-/nonexistent}/initdb" ] || command -v initdb >/dev/null || \
		ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "PostgreSQL (initdb) not found; running as root, so installing it: apt-get update && apt-get install -y postgresql"; \
		apt-get update && apt-get install -y postgresql; \
	else \
		echo "PostgreSQL (initdb) not found. Install PostgreSQL 15 or newer, for example:" >&2; \
		echo "    sudo apt-get update && sudo apt-get install -y postgresql" >&2; \
		echo "(macOS: brew install postgresql; or point GANGWAY_POSTGRES_BIN at the directory holding initdb)" >&2; \
		exit 1; \
	fi

# promtool (which checks deploy/prometheus/ in the tests) comes with
# Debian's prometheus package. Only promtool is wanted: where the install
# started the package's Prometheus service (systemd), it is stopped and
# disabled again.
promtool:
	@if command -v promtool >/dev/null; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "promtool not found; running as root, so installing Debian's prometheus package for it: apt-get update && apt-get install -y prometheus"; \
		apt-get update && apt-get install -y prometheus; \
		if command -v systemctl >/dev/null && systemctl is-enabled --quiet prometheus 2>/dev/null; then \
			echo "stopping and disabling the prometheus service the package started (only promtool is needed)"; \
			systemctl disable --now prometheus || \
				echo "note: systemctl could not stop or disable it (systemd is not running here), so there is no service to stop"; \
		fi; \
	else \
		echo "promtool not found. It checks the Prometheus rules in deploy/prometheus/; install it, for example:" >&2; \
		echo "    sudo apt-get update && sudo apt-get install -y prometheus" >&2; \
		echo "(or a Prometheus release tarball from prometheus.io, which includes promtool)" >&2; \
		exit 1; \
	fi

# chromium (Debian's package) is the headless browser the web view's test
# (internal/web) drives; without it that test is skipped, with a message
# saying so. GANGWAY_CHROMIUM may name another Chrome.
chromium:
	@if [ -n "$${GANGWAY_CHROMIUM:-}" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		command -v google-chrome >/dev/null; then \
		exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "chromium not found; running as root, so installing it for the web view's browser test: apt-get update && apt-get install -y chromium"; \
		apt-get update && apt-get install -y chromium; \
	else \
		echo "note: chromium not found, so the web view's browser test (internal/web) will be skipped. To run it:" >&2; \
		echo "    sudo apt-get update && sudo apt-get install -y chromium" >&2; \
		echo "(or point GANGWAY_CHROMIUM at a Chrome or Chromium binary)" >&2; \
	fi

deps: bin/temporal redis promtool

build:
	$(GO) build -o bin/gangway ./cmd/gangway

dev: deps build
	./bin/gangway dev $(DEV_FLAGS)

# -p 2: the integration tests start real servers; more packages at once
# only fight over the CPUs. -artifacts keeps what tests save in
# t.ArtifactDir (the web view's screenshots) under TEST_ARTIFACTS, one
# directory per test; each test's is named in its output (=== ARTIFACTS).
# Relative profile paths in TEST_FLAGS (-coverprofile=c.out) land there too.
TEST_ARTIFACTS ?= $(CURDIR)/test-artifacts
test: deps postgres chromium
	mkdir -p $(TEST_ARTIFACTS)
	$(GO) test -p 2 -count=1 -timeout 25m -artifacts -outputdir $(TEST_ARTIFACTS) $(TEST_FLAGS) ./...

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (gofmt -w):" >&2; \
		echo "$$unformatted" >&2; \
		exit 1; \
	fi
	$(GO) vet ./...
	@if [ -x bin/workflowcheck ] || $(INSTALL_WORKFLOWCHECK); then \
		echo "bin/workflowcheck ./workflows/..."; \
		bin/workflowcheck ./workflows/...; \
	else \
		echo "note: workflowcheck $(WORKFLOWCHECK_VERSION) could not be installed; skipping the workflow determinism check" >&2; \
	fi

clean:
	rm -f bin/gangway coverage.out coverage.html *.coverprofile
	rm -rf test-artifacts

distclean: clean
	rm -rf bin

# fuzz: one target at a time (go test -fuzz takes one); a finding is
# written to the package's testdata/fuzz/FuzzX/ and fails the run. Each
# input the fuzzer finds interesting is minimized, by default for up to
# 60 s, which would take most of a short run: 10 s here. `make test` runs
# the seeds and testdata/fuzz regression inputs of every target.
FUZZTIME ?= 60s
FUZZ_TARGETS := .:FuzzParseJobSpec ./internal/api:FuzzDecodeSpec \
	./internal/config:FuzzLoadConfig ./internal/sim:FuzzReadOpenBTasks \
	./internal/sim:FuzzReadOpenBNodes ./internal/sim:FuzzReadGangJobs \
	./internal/spotpolicy:FuzzParseTrace
.PHONY: fuzz
fuzz:
	set -e; for t in $(FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s "$${t%%:*}"; \
	done

# bench: a short run of the scheduling-quality and speed benchmarks — the
# FGD paper's protocol on the default openb trace for every policy with one
# seed (the full run is `bin/gangway replay fgd`, seeds 42-51), the dynamic
# replay of the default trace with arrivals compressed 100,000x (about a minute on 2
# cores: a full dispatch cycle per instant), the placement-cycle scale sweep
# on 1,000 and 5,000 nodes (the full one is
# `bin/gangway replay scale`, up to 10,000 nodes and jobs; see
# docs/benchmarks.md), then the placement engine's Go benchmarks.
.PHONY: bench
bench: build
	./bin/gangway replay fgd --seeds 42
	./bin/gangway replay trace --speedup 100000
	./bin/gangway replay scale --nodes 1000x8,5000x8 --jobs 1000,5000
	$(GO) test -run XXX -bench . ./placement/
