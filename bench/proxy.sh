#!/usr/bin/env bash
# Measures slogate's proxy overhead against a direct connection. A paced upstream
# (bench/pacer: first token 50 ms after a request arrives, then one every 20 ms, on a timer
# per request) stands in for the engine; `slogate serve` runs in front of it as its own
# process. For each concurrency, bench/overhead keeps that many streams open and
# alternates rounds direct / through slogate (ABBA), measuring TTFT client-side and
# slogate's CPU time (/proc/<pid>/stat) around every round.
#
# Pinning: slogate alone on CPU 0 (so GOMAXPROCS=1, as a sidecar with a one-core limit);
# the pacer and the load client share CPU 1, in both the direct and the proxied rounds.
# Rounds alternate (MODE=alternate): at 512 streams CPU 1 cannot serve both sides at once.
# Before each concurrency the script waits (up to a minute) for the machine to be quiet.
#
# Variations: PROXY_CPUS (CPUs slogate may run on, default 0) and PROXY_GOGC (GOGC of
# slogate alone, default unset: Go's 100).
#
#   bench/proxy.sh [duration-per-round] [repetitions]
#   CONCURRENCY="1 64 512" TOKENS=32 MODE=alternate bench/proxy.sh 6s 5
#   CONCURRENCY=512 PROXY_GOGC=off bench/proxy.sh 6s 3
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
duration=${1:-6s}
reps=${2:-5}
concurrency=${CONCURRENCY:-1 64 512}
tokens=${TOKENS:-32}
mode=${MODE:-alternate}
proxy_cpus=${PROXY_CPUS:-0}
proxy_env=()
[ -n "${PROXY_GOGC:-}" ] && proxy_env=(GOGC="$PROXY_GOGC")
pacer_port=18801
proxy_port=18802
admin_port=18803
tmp=$(mktemp -d)
trap 'kill "${proxy:-}" "${pacer:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/slogate" ./cmd/slogate
go build -o "$tmp/pacer" ./bench/pacer
go build -o "$tmp/overhead" ./bench/overhead

taskset -c 1 "$tmp/pacer" -listen 127.0.0.1:$pacer_port -first 50ms -every 20ms 2>"$tmp/pacer.log" &
pacer=$!
for _ in $(seq 50); do curl -sf 127.0.0.1:$pacer_port/health && break; sleep 0.1; done
env "${proxy_env[@]}" taskset -c "$proxy_cpus" "$tmp/slogate" serve --upstream http://127.0.0.1:$pacer_port \
	--listen 127.0.0.1:$proxy_port --admin-listen 127.0.0.1:$admin_port --log-level error 2>"$tmp/slogate.log" &
proxy=$!
ready=
for _ in $(seq 100); do curl -sf -o /dev/null 127.0.0.1:$admin_port/readyz && ready=1 && break; sleep 0.1; done
if [ -z "$ready" ]; then
	echo "slogate did not become ready:" >&2
	cat "$tmp/slogate.log" >&2
	exit 1
fi

# busy prints the machine's busy and total CPU ticks so far (/proc/stat).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9; exit}' /proc/stat; }
# quiet waits until the whole machine was under 10% busy over one second (two CPUs: a
# stray compile or test run shows), for at most 60 s, and says how busy it was.
quiet() {
	local b0 t0 b1 t1 pct
	for _ in $(seq 60); do
		read -r b0 t0 < <(busy); sleep 1; read -r b1 t1 < <(busy)
		pct=$(( 100 * (b1 - b0) / (t1 - t0 + 1) ))
		[ "$pct" -lt 10 ] && break
	done
	echo "# machine busy before this run: ${pct}%"
}

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3), $(date -u +%F)"
echo "# rounds of $duration, $reps repetitions, mode $mode, $tokens tokens per request; slogate pid $proxy on CPU $proxy_cpus${PROXY_GOGC:+ with GOGC=$PROXY_GOGC}"
for c in $concurrency; do
	quiet
	taskset -c 1 "$tmp/overhead" -direct http://127.0.0.1:$pacer_port/v1/completions \
		-proxied http://127.0.0.1:$proxy_port/v1/completions -c "$c" -duration "$duration" \
		-reps "$reps" -tokens "$tokens" -mode "$mode" -pid "$proxy" | tee -a "$tmp/out.txt" || true
done

echo
echo "Medians over $reps repetitions (ms; added = median of per-repetition proxied - direct):"
printf '| C | direct p50 | direct p99 | proxied p50 | proxied p99 | added p50 | added p99 | slogate CPU ms / 1k tokens | tokens/s via slogate |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
grep '^summary' "$tmp/out.txt" | awk '{
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	printf "| %s | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.1f | %.0f |\n", v["c"],
		v["direct_p50_ms"], v["direct_p99_ms"], v["proxied_p50_ms"], v["proxied_p99_ms"],
		v["added_p50_ms"], v["added_p99_ms"], v["cpu_ms_per_1k_tokens"], v["proxied_tokens_per_s"]
}'
if grep -q '^summary' "$tmp/out.txt" && grep '^summary' "$tmp/out.txt" | grep -qv ' failed=0$'; then
	echo "some requests failed" >&2
	exit 1
fi
