#!/usr/bin/env bash
# Measures what tracing costs slogate, side by side in one run: three `slogate serve`
# processes in front of one paced upstream (bench/pacer, as bench/proxy.sh), with traces
# off, on at --trace-sample-ratio 0.01 and on at 1, the traced ones exporting over
# OTLP/HTTP to bench/otlpsink (which decodes and counts every span). For each
# concurrency bench/overhead drives the direct upstream and the three slogates in turn
# (direct, off, 1%, 100%, then reversed), C streams each, and reads each slogate's CPU
# time around its rounds. The batch span processor runs with the SDK's defaults
# (OTEL_BSP_*), as a user's would.
#
# Pinning as bench/proxy.sh: the slogates on CPU 0 (GOMAXPROCS=1; only one has traffic at
# a time), the pacer, the sink and the client on CPU 1.
#
#   bench/tracing.sh [duration-per-round] [repetitions]
#   CONCURRENCY="64 512" bench/tracing.sh 6s 5
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
export PATH=/usr/local/go/bin:$PATH
duration=${1:-6s}
reps=${2:-5}
concurrency=${CONCURRENCY:-1 64 512}
tokens=${TOKENS:-32}
pacer_port=18811
sink_port=18812
tmp=$(mktemp -d)
trap 'stop_all; rm -rf "$tmp"' EXIT

go build -o "$tmp/slogate" ./cmd/slogate
go build -o "$tmp/pacer" ./bench/pacer
go build -o "$tmp/overhead" ./bench/overhead
go build -o "$tmp/otlpsink" ./bench/otlpsink

taskset -c 1 "$tmp/pacer" -listen 127.0.0.1:$pacer_port -first 50ms -every 20ms 2>"$tmp/pacer.log" &
pids+=($!)
wait_http 127.0.0.1:$pacer_port/health
taskset -c 1 "$tmp/otlpsink" -listen 127.0.0.1:$sink_port >"$tmp/sink.out" 2>&1 &
sink=$!
wait_http 127.0.0.1:$sink_port/health

# serve NAME PORT RATIO: a slogate on PORT (admin on PORT+1); RATIO "off" for no traces.
declare -A pid_of
serve() {
	local name=$1 port=$2 ratio=$3 env=()
	if [ "$ratio" != off ]; then
		env=(OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$sink_port OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)
	else
		ratio=0.01
	fi
	env "${env[@]}" taskset -c 0 "$tmp/slogate" serve --upstream http://127.0.0.1:$pacer_port \
		--listen 127.0.0.1:$port --admin-listen 127.0.0.1:$((port + 1)) --trace-sample-ratio "$ratio" \
		--log-level error 2>"$tmp/$name.log" &
	pid_of[$name]=$!
	pids+=($!)
	wait_http 127.0.0.1:$((port + 1))/readyz
}
serve off 18820 off
serve p1 18822 0.01
serve p100 18824 1

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), Linux $(uname -r), $(go version | cut -d' ' -f3), $(date -u '+%F %H:%M UTC')"
echo "# rounds of $duration, $reps repetitions (order direct,off,1%,100% then reversed), $tokens tokens per request"
for c in $concurrency; do
	echo "# machine load average before C=$c: $(cut -d' ' -f1-3 /proc/loadavg)"
	taskset -c 1 "$tmp/overhead" -c "$c" -duration "$duration" -reps "$reps" -tokens "$tokens" \
		-targets "direct=http://127.0.0.1:$pacer_port/v1/completions,off=http://127.0.0.1:18820/v1/completions,1%=http://127.0.0.1:18822/v1/completions,100%=http://127.0.0.1:18824/v1/completions" \
		-pids "off=${pid_of[off]},1%=${pid_of[p1]},100%=${pid_of[p100]}" | tee -a "$tmp/out.txt" || true
done
kill "${pid_of[p1]}" "${pid_of[p100]}" 2>/dev/null || true # a drain exports what is queued
wait "${pid_of[p1]}" "${pid_of[p100]}" 2>/dev/null || true
kill "$sink" && wait "$sink" || true
cat "$tmp/sink.out"
for n in p1 p100; do grep -i "error\|drop" "$tmp/$n.log" | head -3 || true; done

echo
echo "Medians over $reps repetitions; added = median over repetitions of (target - direct) in the same repetition;"
echo "CPU = slogate utime+stime per 1,000 tokens streamed through it."
echo
printf '| streams | tracing | TTFT p99 | added p50 | added p99 | CPU ms / 1k tokens | tokens/s |\n'
printf '|---|---|---|---|---|---|---|\n'
awk '/^multi / {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	if (v["target"] == "direct") next
	printf "| %s | %s | %.2f ms | %.2f ms | %.2f ms | %.1f | %.0f |\n", v["c"], v["target"], v["ttft_p99_ms"],
		v["added_p50_ms"], v["added_p99_ms"], v["cpu_ms_per_1k_tokens"], v["tokens_per_s"]
}' "$tmp/out.txt"
