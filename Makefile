# slide — two commands do everything on a fresh machine:
#   make run    start the engine on its embedded defaults
#   make test   vet, format check, race-checked tests
SHELL := /bin/bash
GO    ?= go
BIN   := bin/slide
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# Packages with goroutines, locks or servers: tested under the race detector. Longest first:
# go test starts them in this order, two at a time, and reliability (~140 s, mostly waiting on
# the processes it kills and restarts) last left a core idle for two minutes (make test 6m40s of
# race tests in that order, 5m55s in this one, fresh clones on two cores).
RACE_PKGS := ./reliability/... ./cmd/... ./promapi/... ./window/... ./batch/... ./limiter/... ./event/... ./ingest/... ./query/... ./internal/... ./rls/... ./cluster/...
# Pure computation: tested without -race (faster, same assertions).
PLAIN_PKGS := ./sketch/... ./jsonenc/... ./textparse/... ./promsel/...

.PHONY: all build run test vet fmt-check deps bench fuzz fuzz-short soak clean docs sbs-gubernator mixed-versions cross

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/slide

# run: ARGS adds serve flags, e.g. make run ARGS='--addr 127.0.0.1:8081 --embedded-kafka-addr 127.0.0.1:19092'
run: build
	./$(BIN) serve --demo $(ARGS)

# deps installs what the tests need that Go modules cannot bring, as COMMAND:PACKAGE pairs:
# redis-server (with redis-cli for Redis Cluster; its TLS and Sentinel modes are built in),
# curl (the README tour test runs the tour's curl commands), kcat (librdkafka, the
# independent Kafka producer of the TLS tests), prometheus and chromium (internal/looktest).
DEPS := redis-server:redis-server curl:curl kcat:kcat prometheus:prometheus promtool:prometheus chromium:chromium
deps:
	@missing=""; for d in $(DEPS); do command -v $${d%%:*} >/dev/null 2>&1 || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing:$$missing; install them (e.g. sudo apt-get install$$missing) and rerun"; exit 1; \
	  fi; \
	fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 8m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 5m $(PLAIN_PKGS)
	GO=$(GO) ./scripts/fuzz-short.sh

# fuzz-short: the hostile-input fuzz targets (event decoder, query parameters, policy
# files), FUZZTIME_SHORT (50000x: executions) each unless the script names a smaller budget; part of test.
fuzz-short:
	GO=$(GO) ./scripts/fuzz-short.sh

# fuzz runs every fuzz target briefly; FUZZTIME=5000000x for a longer hunt. Counts, not
# durations: Go 1.26 can fail a clean duration-bounded run at its end (golang/go#75804).
FUZZTIME ?= 100000x
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# soak: SOAK_DURATION (default 60s, at most 4m) of slide produce at the highest rate the
# machine delivers, with concurrent /v1/window and /v1/allow load; prints the figures and
# fails on errors, lost events or RSS past its stated bound. Not part of test; the broker
# process keeps the whole log in memory (about 5 GB for 60 s).
SOAK_DURATION ?= 60s
soak: build
	$(GO) run ./internal/soak --bin $(BIN) --duration $(SOAK_DURATION)

# docs writes docs/flags.md from the flag sets (TestFlagsDoc fails in test when it drifts).
docs:
	SLIDE_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestFlagsDoc$$' ./cmd/slide

# bench runs every benchmark pair side by side and writes BENCHMARKS.md.
bench: deps build
	./scripts/bench.sh

# sbs-gubernator: decisions/s of backend: cluster through three instances against gubernator's
# three-node cluster built from GUBERNATOR_SRC (a checkout of github.com/gubernator-io/gubernator),
# side by side with wrk (issue #30). Not part of test or bench; ROUNDS, DURATION, CONNS… in the script.
sbs-gubernator:
	./scripts/sbs-gubernator.sh "$(GUBERNATOR_SRC)"

# mixed-versions: a rolling upgrade half done, one slide serve built from OLD_REF (default
# ed71e12) and one from this tree in one group, unsigned and with --peer-key-file; their
# /v1/series pages, PromQL listings and two controls must be equal. Not part of test: it
# builds the old version.
OLD_REF ?= ed71e12
mixed-versions:
	./scripts/mixed-versions.sh "$(OLD_REF)"

# cross builds slide for the other platforms users run it on (macOS on Apple silicon and
# Intel, Linux on arm64, FreeBSD, Windows), so a syscall only Linux has fails here and not on
# a user's laptop. Not part of test: a cold cross build takes minutes on two cores.
CROSS := darwin/arm64 darwin/amd64 linux/arm64 freebsd/amd64 windows/amd64
cross:
	@for p in $(CROSS); do echo "== $$p"; GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -o /dev/null ./cmd/slide || exit 1; done

clean:
	rm -rf bin
