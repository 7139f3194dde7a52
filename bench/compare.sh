#!/usr/bin/env bash
# slogate against every other way of protecting an engine, side by side (issue 18):
# bench/goodput's compare phase offers 0.5x to 5x the knee of 8K-input/128-output requests
# to six configurations under the same arrivals, Poisson and then bursty (gamma
# inter-arrival times, CV 3): no admission, the engine's own caps (vLLM
# --max-num-queued-reqs/--max-num-queued-tokens sized from the calibration), a gateway's
# static saturation shedder (engine queue >= 5 or KV >= 0.8), a static cap, slogate's
# built-in tiers, and slogate with the calibrated tiers file. It prints goodput by load and
# configuration and the targets' verdicts; raw results go to $OUT (default: a temporary
# directory, kept).
#
# The calibrated tiers file is the one bench/calibrated.sh writes (slogate calibrate
# against `slogate sim --profile h20x8-flash`); TIERS names it. Without TIERS this script
# calibrates first (about 15 minutes).
#
#   TIERS=bench/goodput/testdata/calibrated-8k.yaml bench/compare.sh   # about 7 minutes
#   bench/compare.sh -compare-arrivals bursty -compare-levels 2,5
#
# Extra arguments go to bench/goodput (go run ./bench/goodput -h lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
out=${OUT:-$(mktemp -d /tmp/compare.XXXXXX)}
mkdir -p "$out"
go build -o "$out/goodput" ./bench/goodput
echo "# raw results and logs in $out" >&2
tiers=${TIERS:-}
if [[ -z $tiers ]]; then
  go build -o "$out/slogate" ./cmd/slogate
  port=${PORT:-18432}
  "$out/slogate" sim --profile h20x8-flash --listen "127.0.0.1:$port" 2>"$out/sim.log" &
  sim=$!
  trap 'kill $sim 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  "$out/slogate" calibrate --upstream "http://127.0.0.1:$port" \
    --tiers-file bench/goodput/tiers-8k.yaml --only 8k --slo-ttft 5s --slo-tpot 100ms --calibrate-output 128 \
    --out "$out/tiers.yaml" 2> >(tee "$out/calibrate.log" >&2) | tee "$out/calibration.txt"
  kill $sim
  wait $sim 2>/dev/null || true
  tiers=$out/tiers.yaml
fi
"$out/goodput" -mode compare -tiers "$tiers" -out "$out" "$@" 2> >(tee "$out/log.txt" >&2) | tee "$out/tables.md"
