#!/usr/bin/env bash
# Soaks slogate: `slogate serve` in front of `slogate sim` (profile tiny, slowed to about
# 20 ms a token by --speed, as real engines stream), with admission control enforcing
# tiers tight enough that part of the load queues and part gets 429, under a load of
# CLIENTS concurrent clients (default 1,000) for DURATION (default 10m). The load
# (bench/soak/driver, package bench/soak) mixes streaming completions and chat,
# non-streaming requests, clients that leave mid-stream, after the headers before the
# first token and while queued, malformed requests (400), oversized bodies (413) and
# passthrough GETs; in the third quarter of every minute a quarter of the streams and
# non-streaming requests ask the simulator for a fault (500, 503, a dropped or stalled
# stream, an answer slower than slogate's upstream timeout).
#
# Every 10 s the driver reads slogate's admin /metrics (go_goroutines, process_open_fds,
# go_memstats_heap_inuse_bytes, process_resident_memory_bytes) and prints a line. At the
# end it prints the samples, the verdict (soak.DefaultRule: the first 20% of the run left
# out, then the last third's medians against the first third's: goroutines and open fds
# at most 10% (or 20) higher, the heap in use at most 10%, RSS at most 5%; with the
# least-squares slope per minute for each), the outcomes by kind and status, and
# slogate's own slogate_requests_total. It exits 1 when the samples are not flat, a
# request that asked for no fault got a 5xx, an answer broke or never came, slogate's
# count disagrees with the clients', slogate or the simulator died, or slogate's
# goroutines and open fds did not return to their level before the load within 2 minutes
# of its end (slogate closes its idle connections to the engine after 4 s, those of
# routes passed through after 90 s).
#
#   bench/soak.sh                       # 10 minutes, 1,000 clients
#   bench/soak.sh 2m 500                # [duration] [clients]
#   SPEED=0.2 OUT=/tmp/soak bench/soak.sh
#
# Everything (binaries, tiers file, logs, the output) goes to $OUT, a temporary directory
# unless set; it is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
duration=${1:-${DURATION:-10m}}
clients=${2:-${CLIENTS:-1000}}
speed=${SPEED:-0.1}
OUT=${OUT:-$(mktemp -d -t slogate-soak.XXXXXX)}
mkdir -p "$OUT"
sim_port=18930
data_port=18931
admin_port=18932
max_body=65536
# The client holds a connection per client, slogate two (client and engine side).
ulimit -n "$(ulimit -Hn)"

# shellcheck source=bench/lib.sh
. bench/lib.sh
trap stop_all EXIT


go build -o "$OUT/slogate" ./cmd/slogate
go build -o "$OUT/driver" ./bench/soak/driver
"$OUT/driver" -tiers -clients "$clients" >"$OUT/tiers.yaml"

"$OUT/slogate" sim --profile tiny --speed "$speed" --listen 127.0.0.1:$sim_port 2>"$OUT/sim.log" &
sim=$!; pids+=("$sim")
wait_http 127.0.0.1:$sim_port/health
# Timeouts short enough that the simulator's stall and slow-headers faults end within
# seconds (a stalled stream after 10 s of silence, an answer without headers after 10 s),
# and long enough that no answer without a fault meets them even on a machine other jobs
# slow down: the longest non-streaming answer (32 tokens) takes under a second.
"$OUT/slogate" serve --upstream http://127.0.0.1:$sim_port \
	--listen 127.0.0.1:$data_port --admin-listen 127.0.0.1:$admin_port \
	--admission enforce --tiers-file "$OUT/tiers.yaml" --max-body-bytes $max_body \
	--upstream-timeout 10s --stream-idle-timeout 10s --log-level error 2>"$OUT/slogate.log" &
slogate=$!; pids+=("$slogate")
wait_http 127.0.0.1:$admin_port/readyz
sleep 2

{
	echo "# bench/soak.sh $duration $clients (SPEED=$speed), slogate $(git describe --always --dirty 2>/dev/null || echo unknown); output in $OUT"
	echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), Linux $(uname -r), $(go version | cut -d' ' -f3), $(date -u '+%F %H:%M UTC')"
	echo "# slogate serve --admission enforce --tiers-file tiers.yaml (driver -tiers -clients $clients) --max-body-bytes $max_body --upstream-timeout 10s --stream-idle-timeout 10s; slogate sim --profile tiny --speed $speed"
} | tee "$OUT/soak.txt"
status=0
"$OUT/driver" -url http://127.0.0.1:$data_port -admin http://127.0.0.1:$admin_port -model sim-tiny \
	-clients "$clients" -duration "$duration" -max-body-bytes $max_body -slow-headers 11s \
	-pids "slogate=$slogate,sim=$sim" | tee -a "$OUT/soak.txt" || status=$?
curl -s 127.0.0.1:$admin_port/metrics >"$OUT/metrics-end.txt" || true
echo "# output in $OUT/soak.txt; slogate's metrics at the end in $OUT/metrics-end.txt"
exit "$status"
