#!/usr/bin/env bash
# End to end, measured rather than hand-set limits: slogate calibrate measures the knee of
# the 8K tier of a simulated h20x8-flash engine (a `slogate sim` process) and writes a
# tiers file; bench/goodput then offers 0.5x to 2x of that knee, Poisson, to four
# configurations side by side (no admission, a static cap from the knee, slogate's
# built-in tiers, and slogate with the calibrated tiers file) and prints goodput tables.
# Everything goes to $OUT (default: a temporary directory, kept).
#
#   bench/calibrated.sh                 # about 25 minutes: calibration ~15, goodput ~4
#   QUICK=1 bench/calibrated.sh         # 10 s calibration rounds (less precise)
#
# Extra arguments go to bench/goodput (go run ./bench/goodput -h lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
out=${OUT:-$(mktemp -d /tmp/calibrated.XXXXXX)}
mkdir -p "$out"
port=${PORT:-18431}
go build -o "$out/slogate" ./cmd/slogate
go build -o "$out/goodput" ./bench/goodput
echo "# results and logs in $out" >&2

"$out/slogate" sim --profile h20x8-flash --listen "127.0.0.1:$port" 2>"$out/sim.log" &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done

quick=()
[[ -n ${QUICK:-} ]] && quick=(--quick)
start=$SECONDS
"$out/slogate" calibrate --upstream "http://127.0.0.1:$port" "${quick[@]}" \
  --tiers-file bench/goodput/tiers-8k.yaml --only 8k --slo-ttft 5s --slo-tpot 100ms --calibrate-output 128 \
  --out "$out/tiers.yaml" 2> >(tee "$out/calibrate.log" >&2) | tee "$out/calibration.txt"
echo "# calibration took $((SECONDS - start)) s" | tee -a "$out/calibration.txt"
kill $sim
wait $sim 2>/dev/null || true

"$out/goodput" -mode goodput -tiers "$out/tiers.yaml" -out "$out" "$@" 2> >(tee "$out/log.txt" >&2) | tee "$out/tables.md"
