#!/usr/bin/env bash
# The noisy-neighbour benchmark (issue 17): four tenants of equal weight share one
# simulated h20x8-flash engine, three calm ones sending 4K/128 requests and one flooding
# with 10x their rate of 8K/128, 1.5x the engine's knee in total. bench/goodput's fairness
# phase replays the same arrivals side by side against no admission, slogate's built-in
# tiers alone, the same tiers with a tenants section (identify by X-Tenant, weight 1, no
# budgets), and the same with an input-token budget on every tenant; three repetitions
# with arrivals of their own run at once. Prints Markdown tables per tenant (goodput, SLO
# attainment, shares of the tokens served, served / offered, Jain's index) and the
# targets' verdicts; raw results (every request with its tenant, a timeline of every
# stack with its tenants' state) go to $OUT (default: a temporary directory, kept).
#
#   bench/fairness.sh                                 # about 7 minutes
#   bench/fairness.sh -fair-reps 5 -fair-budget 0     # five repetitions, no budget variant
#   bench/fairness.sh -rate 1.344                     # the knee slogate calibrate found
#
# The knee defaults to the goodput benchmark's measured sustainable rate of 8K/128
# requests, 1.3 req/s (docs/benchmarks.md); any flag of bench/goodput may be given
# (go run ./bench/goodput -h lists them; the fairness phase's start with -fair-).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
out=${OUT:-$(mktemp -d /tmp/fairness.XXXXXX)}
mkdir -p "$out"
go build -o "$out/goodput" ./bench/goodput
echo "# raw results and logs in $out" >&2
"$out/goodput" -mode fairness -rate 1.3 -out "$out" "$@" 2> >(tee "$out/log.txt" >&2) | tee "$out/tables.md"
