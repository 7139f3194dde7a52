# slogate's build and test entry points. `make test` is what CI runs (.ci/run); it
# installs what the tests need when it is missing and is safe to run repeatedly.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
FUZZTIME ?= 5s
# Every fuzz target, as package:Target.
FUZZ_TARGETS := \
	./wire:FuzzInspect ./wire:FuzzSSE ./wire:FuzzDecodeChunk ./wire:FuzzScanChunk \
	./enginesim:FuzzParseFaults ./enginesim:FuzzTokenize ./enginesim:FuzzTokenizePrompt \
	./engine:FuzzRead ./proxy:FuzzProxyRequest ./admission:FuzzParseConfig

.PHONY: all build test vet unit fuzz bench deps clean

all: build

build:
	$(GO) build ./...

# deps installs what the tests need. Each step checks first, so it is idempotent.
deps:
	@command -v $(GO) >/dev/null || { echo "Go is required (https://go.dev/dl/)"; exit 1; }
	$(GO) mod download

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

test: deps vet unit fuzz

# fuzz runs every fuzz target for FUZZTIME each (a short run in make test; longer by hand,
# e.g. make fuzz FUZZTIME=5m).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$pkg $$name"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

# bench runs the Go benchmarks; system benchmarks live under bench/.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	$(GO) clean -testcache
