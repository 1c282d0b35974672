# slide — two commands do everything on a fresh machine:
#   make run    start the engine on its embedded defaults
#   make test   vet, format check, race-checked tests
SHELL := /bin/bash
GO    ?= go
BIN   := bin/slide
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# Packages with goroutines, locks or servers: tested under the race detector.
RACE_PKGS := ./window/... ./batch/... ./limiter/... ./ingest/... ./query/... ./cmd/... ./internal/... ./reliability/...
# Pure computation: tested without -race (faster, same assertions).
PLAIN_PKGS := ./sketch/...

.PHONY: all build run test vet fmt-check deps bench fuzz fuzz-short soak clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/slide

run: build
	./$(BIN) serve --demo

# deps installs what the tests need that Go modules cannot bring: redis-server.
deps:
	@if ! command -v redis-server >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else \
	    echo "redis-server is missing: install it (e.g. sudo apt-get install redis-server) and rerun"; exit 1; \
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
# files), FUZZTIME_SHORT (50000x: executions) each; part of test.
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

# bench runs every benchmark pair side by side and writes BENCHMARKS.md.
bench: deps build
	./scripts/bench.sh

clean:
	rm -rf bin
