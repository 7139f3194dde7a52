#!/usr/bin/env bash
# Measures the engine simulator from outside: `slogate sim` pinned to CPU 0 with
# GOMAXPROCS=1, the load generator pinned to CPU 1. Prints streamed tokens/s and the
# simulator's CPU use over the run (from /proc), so tokens/s per simulator core follows.
#
#   bench/sim.sh [streams] [duration]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
streams=${1:-2000}
duration=${2:-20s}
port=18777
tmp=$(mktemp -d)
trap 'kill "${sim:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/slogate" ./cmd/slogate
go build -o "$tmp/simload" ./bench/simload
GOMAXPROCS=1 taskset -c 0 "$tmp/slogate" sim --profile tiny --listen 127.0.0.1:$port 2>"$tmp/sim.log" &
sim=$!
for _ in $(seq 50); do curl -sf 127.0.0.1:$port/health && break; sleep 0.1; done

ticks() { awk '{print $14+$15}' /proc/$sim/stat; }
hz=$(getconf CLK_TCK)
t0=$(ticks); s0=$(date +%s.%N)
GOMAXPROCS=1 taskset -c 1 "$tmp/simload" -url http://127.0.0.1:$port/v1/completions -streams "$streams" -duration "$duration" | tee "$tmp/load.txt"
t1=$(ticks); s1=$(date +%s.%N)
rate=$(sed -n 's/.*tokens\/s=\([0-9]*\).*/\1/p' "$tmp/load.txt")
awk -v t="$((t1 - t0))" -v hz="$hz" -v s0="$s0" -v s1="$s1" -v rate="$rate" 'BEGIN {
	cpu = t / hz / (s1 - s0)
	printf "simulator CPU: %.2f cores; tokens/s per simulator core: %.0f\n", cpu, rate / cpu
}'
