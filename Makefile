# slogate's build and test entry points. `make test` is what CI runs (.ci/run); it
# installs what the tests need when it is missing and is safe to run repeatedly.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
FUZZTIME ?= 3s
# Every fuzz target, as package:Target.
FUZZ_TARGETS := \
	./wire:FuzzInspect ./wire:FuzzSSE ./wire:FuzzDecodeChunk ./wire:FuzzScanChunk \
	./wire:FuzzInspectRoutes ./wire:FuzzScanFor \
	./enginesim:FuzzParseFaults ./enginesim:FuzzTokenize ./enginesim:FuzzTokenizePrompt \
	./engine:FuzzRead ./proxy:FuzzProxyRequest ./admission:FuzzParseConfig \
	./enginesim:FuzzParseIDs ./synth:FuzzLooped ./synth:FuzzParseWorkload \
	./proxy:FuzzProxyResponse ./engine:FuzzScrape ./engine:FuzzParseKind ./admission:FuzzParseNames \
	./calibrate:FuzzFromConfig ./calibrate:FuzzPlanOnly ./report:FuzzReadJSON ./enginesim:FuzzScript \
	./report:FuzzCalibrationReports ./report:FuzzFindRun ./report:FuzzPlaceLabels ./engine:FuzzInfo \
	./gpu:FuzzParseDCGM ./exporter:FuzzPushURL ./exporter:FuzzPushLabels ./settings:FuzzSettings \
	./bench/goodput:FuzzParseFlags ./bench/overhead:FuzzParseTargets ./tenant:FuzzIdentity \
	./bench/goodput:FuzzParseFairFlags ./bench/goodput:FuzzParseCompareFlags ./wire:FuzzIsRefusal \
	./wire:FuzzResponseModel ./wire:FuzzContent ./proxy:FuzzEngineTransport ./proxy:FuzzChunkedDecoder

.PHONY: all build test vet unit acceptance fuzz bench deps clean $(FUZZ_RUNS)

all: build

build:
	$(GO) build ./...

# Debian packages the tests need, by the command each provides.
APT_PACKAGES := chromium:chromium prometheus:promtool prometheus-alertmanager:amtool
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# deps installs what the tests need. Each step checks first, so it is idempotent.
deps:
	@command -v $(GO) >/dev/null || { echo "Go is required (https://go.dev/dl/)"; exit 1; }
	$(GO) mod download
	@missing=""; for p in $(APT_PACKAGES); do \
		command -v $${p##*:} >/dev/null || missing="$$missing $${p%%:*}"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; \
	fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

# acceptance runs the tests the race detector makes too slow (they skip under -race), one
# package at a time (-p 1): some time the HTTP path, which another package's load skews,
# and the soak (cmd/slogate, about a minute) drives hundreds of clients; bench/goodput's
# shapes phase plays hours of virtual time.
acceptance:
	$(GO) test -p 1 -count=1 -run 'Acceptance' ./synth ./calibrate ./sidecar ./bench/goodput

test: deps vet unit acceptance fuzz

# fuzz runs every fuzz target for FUZZTIME each (a short run in make test; longer by hand,
# e.g. make fuzz FUZZTIME=5m), FUZZ_JOBS targets at a time (each fuzzer's time is wall
# time, so two at once halve the step on two cores; make -O keeps each target's output
# together).
# A run that ends in the fuzzer's own "context deadline exceeded" with no failing input
# written is the go command's deadline racing a worker, not a finding: it is run again
# once. A real failure writes its input under testdata/fuzz and fails at once.
FUZZ_JOBS ?= 2
FUZZ_RUNS := $(foreach t,$(FUZZ_TARGETS),fuzz-run/$(subst :,/,$(patsubst ./%,%,$(t))))

fuzz:
	@$(MAKE) --no-print-directory -O -j$(FUZZ_JOBS) $(FUZZ_RUNS)

# fuzz-run/PKG/TARGET runs one fuzz target of ./PKG.
fuzz-run/%:
	@pkg=./$(patsubst %/,%,$(dir $*)); name=$(notdir $*); \
	echo "== $$pkg $$name"; \
	if ! out=$$($(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg 2>&1); then \
		echo "$$out"; \
		if echo "$$out" | grep -q "context deadline exceeded" && ! echo "$$out" | grep -q "Failing input written"; then \
			echo "== $$pkg $$name again (the fuzzer's deadline, no failing input)"; \
			$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
		else exit 1; fi; \
	else echo "$$out" | tail -n 2; fi

# bench runs the Go benchmarks; system benchmarks live under bench/.
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	$(GO) clean -testcache
