# Shell helpers shared by the bench/ scripts; source it after `cd` to the repository.

# pids holds the background processes a script started; stop_all stops and reaps them
# (scripts run it on EXIT).
pids=()
stop_all() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}

# wait_http URL tries URL for up to 10 s.
wait_http() {
	for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
	echo "no answer from $1" >&2
	return 1
}
