#!/usr/bin/env bash
# Runs the test suite on a busy machine: one CPU hog (`yes > /dev/null`) per core, as
# four other developers' builds on a two-core machine would, then `make test` (or the
# make arguments given), and prints how long it took and the load. The hogs stop when
# the script ends, however it ends, and an interrupt or TERM stops make too; the exit
# status is make's.
#
#   bench/busy.sh                  # make test, with one hog per core
#   bench/busy.sh acceptance       # make acceptance
#   HOGS=4 bench/busy.sh unit      # four hogs
#   bench/busy.sh -n test          # make's dry run: checks the script in seconds
#
# docs/benchmarks.md ("The test suite on a busy machine") records what it measured.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
hogs=${HOGS:-$(nproc)}
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(test)

make_pid=
# stop_make sends signal $1 to make's process group: make and every test it runs.
# shellcheck disable=SC2317 # called from the traps
stop_make() { [ -z "$make_pid" ] || kill -"$1" -- -"$make_pid" 2>/dev/null || true; }
trap stop_all EXIT
trap 'stop_make INT; exit 130' INT
trap 'stop_make TERM; exit 143' TERM

for _ in $(seq "$hogs"); do
	yes >/dev/null &
	pids+=("$!")
done
echo "busy.sh: $hogs CPU hogs (pids ${pids[*]}) on $(nproc) cores; make ${args[*]}"

start=$(date +%s)
# make runs in a process group of its own (job control), so that a signal to this
# script can stop all of it, and in the background, so that the trap runs at once.
set -m
make "${args[@]}" &
make_pid=$!
set +m
status=0
wait "$make_pid" || status=$?
took=$(($(date +%s) - start))
echo "busy.sh: make ${args[*]} exited $status after ${took}s ($((took / 60))m$((took % 60))s) with $hogs CPU hogs; $(uptime)"
exit "$status"
