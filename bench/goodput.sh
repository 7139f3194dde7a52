#!/usr/bin/env bash
# Measures goodput under overload with and without admission control, against the engine
# simulator's h20x8-flash profile (8x H20-3e, fitted to a published rate scan; see
# docs/simulator.md), all in one process (bench/goodput): calibrate the sustainable rate,
# replay Poisson arrivals at multiples of it against three configurations side by side
# (no admission, a static in-flight cap, slogate's tiers with SLO feedback), then short
# and long prompts together.
# Prints Markdown tables; raw results (every request, a timeline of every stack) go to
# $OUT (default: a temporary directory, kept).
#
# The simulator runs in real time, so other work on the machine slows it: the program
# waits for a quiet machine before each phase and reports how busy it was during each.
#
#   bench/goodput.sh                      # everything: about 12 minutes
#   bench/goodput.sh -mode calibrate      # the sustainable rate only
#   bench/goodput.sh -mode goodput,mixed -rate 1.3 -static-cap 12 -static-wait 2s
#   bench/goodput.sh -mode mixed -static-wait 2s -mixed-variants 'tuned:increase=0.2'
#
# Any flag of bench/goodput may be given (go run ./bench/goodput -h lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
out=${OUT:-$(mktemp -d /tmp/goodput.XXXXXX)}
mkdir -p "$out"
go build -o "$out/goodput" ./bench/goodput
echo "# raw results and logs in $out" >&2
"$out/goodput" -out "$out" "$@" 2> >(tee "$out/log.txt" >&2) | tee "$out/tables.md"
