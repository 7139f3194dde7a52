#!/usr/bin/env bash
# Compares slogate's overhead with nginx's, the reference streaming reverse proxy, and a
# direct connection, side by side in one run. The upstream is bench/pacer (as in
# bench/proxy.sh: each request streams on a timer of its own, first token 50 ms after
# arrival, then one every PACE ms, nothing batched), pinned with the load client
# (bench/overhead) to CPU 1. slogate (`slogate serve`, admission enforce with the tiers of
# bench/nginx/tiers.yaml, engine scraper on) and nginx (the Debian package, one worker,
# bench/nginx/nginx.conf.in: proxy_buffering off, HTTP/1.1 keepalive upstream) both run
# pinned to CPU 0, each alone on it while it carries load: rounds alternate direct,
# slogate, nginx, then nginx, slogate, direct (ABC CBA), so that drift and the noise of
# other jobs fall on the three alike and only differences within a repetition are used.
#
# For each concurrency the pacer, slogate and nginx are started fresh (idle memory is read
# before any stream), then the client warms each target up and runs the repetitions. Per
# proxy: CPU time (utime+stime of /proc/<pid>/stat, nginx's master + worker) around each
# round over the tokens streamed through it, and resident memory (VmRSS, summed) sampled
# every 50 ms: (peak in the round - idle) / streams.
#
#   bench/nginx.sh [duration-per-round] [repetitions]     # defaults 8s 5: about 9 minutes
#   QUICK=1 bench/nginx.sh                                # smoke run: 2s rounds, 1 repetition
#   CONCURRENCY="64 512" PACE="64=20 512=20" OUT=/tmp/x bench/nginx.sh 6s 3
#
# PROXY_GOGC and PROXY_GODEBUG, if set, are slogate's GOGC and GODEBUG (and only slogate's),
# e.g. PROXY_GOGC=200 or PROXY_GODEBUG=gctrace=1 (the trace goes to $OUT/slogate.log).
#
# PERF=1 adds, after each concurrency's rounds, two rounds per proxy alone under `perf
# stat` (Debian's linux-perf): system calls, reads, writes, epoll waits and context
# switches per streamed token. They have no warm-up (the proxies are warm from the
# rounds before them), so every token they stream is counted. PERF=record samples that
# round's call stacks instead (perf record -g, 999 Hz) and writes each proxy's profile,
# by function with the kernel's, to $OUT/perf-C-NAME.report.
#
# NICE (default -10 when run as root, else 0) is the niceness of the pacer, both proxies
# and the client alike, so that other jobs on a shared machine get in their way less.
#
# PACE maps a concurrency to the pacer's token interval in ms (default 20; 80 at 2,048
# streams, where 20 ms would ask for 102,400 tokens/s of a 2-CPU machine). Everything
# (binaries, logs, nginx prefix, raw results) goes to $OUT, a temporary directory unless
# set; it is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH:/usr/sbin
duration=${1:-8s}
reps=${2:-5}
if [ -n "${QUICK:-}" ]; then
	duration=${1:-2s}
	reps=${2:-1}
fi
concurrency=${CONCURRENCY:-64 512 2048}
pace_map=${PACE:-64=20 512=20 2048=80}
tokens=${TOKENS:-32}
nginx_bin=${NGINX:-nginx}
nice_default=0
[ "$(id -u)" = 0 ] && nice_default=-10
run=(nice -n "${NICE:-$nice_default}")
OUT=${OUT:-$(mktemp -d -t slogate-nginx.XXXXXX)}
mkdir -p "$OUT"
pacer_port=18811
slogate_port=18812
admin_port=18813
nginx_port=18814
# 2,048 streams: the client holds up to 3 x 2,048 connections, each proxy 2 x 2,048.
ulimit -n "$(ulimit -Hn)"

# shellcheck source=bench/lib.sh
. bench/lib.sh
trap stop_all EXIT

command -v "$nginx_bin" >/dev/null || { echo "no $nginx_bin: apt-get install nginx-light" >&2; exit 1; }
go build -o "$OUT/slogate" ./cmd/slogate
go build -o "$OUT/pacer" ./bench/pacer
go build -o "$OUT/overhead" ./bench/overhead

# pace_of C prints the pacer's token interval (ms) for concurrency C.
pace_of() {
	local kv
	for kv in $pace_map; do [ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }; done
	echo 20
}
# ticks PID... prints the processes' utime+stime so far, in clock ticks.
ticks() {
	local p
	for p in "$@"; do sed 's/.*) //' "/proc/$p/stat" 2>/dev/null || true; done | awk '{s += $12 + $13} END {print s + 0}'
}
# busy prints the machine's busy and total CPU ticks so far (/proc/stat).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9; exit}' /proc/stat; }
# children prints the CPU ticks of this shell's waited-for children (bash's times).
children() { times | tail -1 | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d\n", (u[1]*60 + u[2] + s[1]*60 + s[2]) * 100 }'; }
# quiet waits until the whole machine was under 10% busy over one second, at most
# QUIET_WAIT seconds (default 60).
quiet() {
	local b0 t0 b1 t1 pct
	for _ in $(seq "${QUIET_WAIT:-60}"); do
		read -r b0 t0 < <(busy); sleep 1; read -r b1 t1 < <(busy)
		pct=$(( 100 * (b1 - b0) / (t1 - t0 + 1) ))
		[ "$pct" -lt 10 ] && break
	done
	echo "# machine busy before this concurrency: ${pct}%"
}

# start C: the pacer at C's pace, slogate and nginx, fresh.
start() {
	local every=$1 prefix=$OUT/nginx-$2
	"${run[@]}" taskset -c 1 "$OUT/pacer" -listen 127.0.0.1:$pacer_port -first 50ms -every "${every}ms" 2>>"$OUT/pacer.log" &
	pacer=$!; pids+=("$pacer")
	wait_http 127.0.0.1:$pacer_port/health
	"${run[@]}" env ${PROXY_GOGC:+GOGC=$PROXY_GOGC} ${PROXY_GODEBUG:+GODEBUG=$PROXY_GODEBUG} taskset -c 0 "$OUT/slogate" serve --upstream http://127.0.0.1:$pacer_port \
		--listen 127.0.0.1:$slogate_port --admin-listen 127.0.0.1:$admin_port \
		--admission enforce --tiers-file bench/nginx/tiers.yaml --log-level error 2>>"$OUT/slogate.log" &
	slogate=$!; pids+=("$slogate")
	wait_http 127.0.0.1:$admin_port/readyz
	mkdir -p "$prefix"
	local user=""
	[ "$(id -u)" = 0 ] && user="user $(id -un) $(id -gn);"
	sed -e "s|@PREFIX@|$prefix|g" -e "s|@LISTEN@|127.0.0.1:$nginx_port|" \
		-e "s|@UPSTREAM@|127.0.0.1:$pacer_port|" -e "s|@USER@|$user|" bench/nginx/nginx.conf.in >"$prefix/nginx.conf"
	"${run[@]}" taskset -c 0 "$nginx_bin" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" &
	nginx=$!; pids+=("$nginx")
	wait_http 127.0.0.1:$nginx_port/health
	nginx_worker=$(pgrep -P "$nginx" | tr '\n' '+' | sed 's/+$//')
	[ -n "$nginx_worker" ] || { echo "nginx has no worker" >&2; exit 1; }
	sleep 1
}

perf_events=raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_readv,syscalls:sys_enter_write,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep,context-switches
# perf_round NAME PIDS URL: two rounds of C streams through one proxy (PIDS: pid+pid...)
# under perf stat; appends a "perf ..." line with the counts per token to out.txt.
perf_round() {
	local name=$1 pids=$2 url=$3 f=$OUT/perf-$c-$1 perf n
	if [ "$PERF" = record ]; then
		perf record -q -F 999 -g -p "${pids//+/,}" -o "$f.data" &
	else
		perf stat -x, -e "$perf_events" -p "${pids//+/,}" -o "$f.csv" &
	fi
	perf=$!
	sleep 1
	"${run[@]}" taskset -c 1 "$OUT/overhead" -c "$c" -duration "$duration" -reps 1 -tokens "$tokens" \
		-stagger "${stagger}ms" -warmup 0 -targets "$name=$url,$name-again=$url" >"$f.txt" || true
	kill -INT "$perf"; wait "$perf" || true
	if [ "$PERF" = record ]; then
		perf report -i "$f.data" --no-children --sort symbol --percent-limit 0.5 --stdio -g none >"$f.report" 2>/dev/null || true
		return
	fi
	n=$(grep '^rep=' "$f.txt" | grep -o ' tokens=[0-9]*' | cut -d= -f2 | awk '{s += $1} END {print s + 0}')
	awk -F, -v n="${n:-0}" -v c="$c" -v name="$name" '
		$3 == "raw_syscalls:sys_enter" { sys = $1 } $3 ~ /enter_(read|recvfrom|readv)$/ { rd += $1 }
		$3 ~ /enter_(write|sendto|writev)$/ { wr += $1 } $3 ~ /epoll_p?wait$/ { ep += $1 }
		$3 ~ /enter_(futex|nanosleep)$/ { fx += $1 } $3 == "context-switches" { cs = $1 }
		END { if (n > 0) printf "perf c=%s target=%s tokens=%d syscalls=%.3f reads=%.3f writes=%.3f epoll_waits=%.3f futex_sleeps=%.3f context_switches=%.3f\n",
			c, name, n, sys / n, rd / n, wr / n, ep / n, fx / n, cs / n }' "$f.csv" | tee -a "$OUT/out.txt"
}

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), Linux $(uname -r), $(go version | cut -d' ' -f3), $("$nginx_bin" -v 2>&1 | cut -d' ' -f3), $(date -u '+%F %H:%M UTC')"
echo "# niceness ${NICE:-$nice_default}${PROXY_GOGC:+; slogate with GOGC=$PROXY_GOGC}; rounds of $duration, $reps repetitions (order direct,slogate,nginx then reversed), $tokens tokens per request; results in $OUT"
: >"$OUT/out.txt"
for c in $concurrency; do
	every=$(pace_of "$c")
	start "$every" "$c"
	quiet
	stagger=$(( 50 + (tokens - 1) * every ))
	warmup=$(( stagger + 1000 ))
	[ -n "${QUICK:-}" ] && warmup=$(( stagger + 200 ))
	echo "# C=$c: pace ${every} ms (first token 50 ms), a request lasts ${stagger} ms; slogate pid $slogate, nginx pids $nginx+$nginx_worker, both on CPU 0"
	read -r b0 t0 < <(busy)
	own0=$(ticks "$pacer" "$slogate" "$nginx" ${nginx_worker//+/ })
	kids0=$(children)
	"${run[@]}" taskset -c 1 "$OUT/overhead" -c "$c" -duration "$duration" -reps "$reps" -tokens "$tokens" \
		-stagger "${stagger}ms" -warmup "${warmup}ms" \
		-targets "direct=http://127.0.0.1:$pacer_port/v1/completions,slogate=http://127.0.0.1:$slogate_port/v1/completions,nginx=http://127.0.0.1:$nginx_port/v1/completions" \
		-pids "slogate=$slogate,nginx=$nginx+$nginx_worker" | tee -a "$OUT/out.txt" || true
	read -r b1 t1 < <(busy)
	own1=$(ticks "$pacer" "$slogate" "$nginx" ${nginx_worker//+/ })
	kids1=$(children)
	echo "# C=$c: other processes used $(( 100 * (b1 - b0 - (own1 - own0) - (kids1 - kids0)) / (t1 - t0 + 1) ))% of the machine during the run" | tee -a "$OUT/out.txt"
	echo "pace c=$c every_ms=$every" >>"$OUT/out.txt"
	if [ -n "${PERF:-}" ]; then
		perf_round slogate "$slogate" "http://127.0.0.1:$slogate_port/v1/completions"
		perf_round nginx "$nginx+$nginx_worker" "http://127.0.0.1:$nginx_port/v1/completions"
	fi
	stop_all
done

echo
echo "Medians over $reps repetitions; added = median over repetitions of (target - direct) in the same repetition;"
echo "CPU = proxy utime+stime per 1,000 tokens streamed through it; memory = (peak RSS in the round - idle RSS) / streams."
echo
printf '| streams (pace) | target | TTFT p50 | TTFT p99 | added p50 | added p99 | CPU ms / 1k tokens | memory / stream | tokens/s |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
awk '
/^pace / { split($2, a, "="); split($3, b, "="); pace[a[2]] = b[2] }
/^perf / {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); p[kv[1]] = kv[2] }
	perf[++nperf] = sprintf("| %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |", p["c"], p["target"], p["syscalls"], p["reads"],
		p["writes"], p["epoll_waits"], p["futex_sleeps"], p["context_switches"])
}
/^multi / {
	for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	n++; c[n] = v["c"]; t[n] = v["target"]; line[n] = sprintf("| %s | %.2f ms | %.2f ms | %s | %s | %s | %s | %.0f |", v["target"],
		v["ttft_p50_ms"], v["ttft_p99_ms"],
		v["target"] == "direct" ? "–" : sprintf("%.2f ms", v["added_p50_ms"]),
		v["target"] == "direct" ? "–" : sprintf("%.2f ms", v["added_p99_ms"]),
		v["cpu_ms_per_1k_tokens"] < 0 ? "–" : sprintf("%.1f", v["cpu_ms_per_1k_tokens"]),
		v["mem_kb_per_stream"] < 0 ? "–" : sprintf("%.1f KiB", v["mem_kb_per_stream"]), v["tokens_per_s"])
	cpu[v["c"], v["target"]] = v["cpu_ms_per_1k_tokens"]; add[v["c"], v["target"]] = v["added_p99_ms"]
	mem[v["c"], v["target"]] = v["mem_kb_per_stream"]; fail += v["failed"]
}
END {
	for (i = 1; i <= n; i++) printf "| %s (%s ms) %s\n", c[i], pace[c[i]], line[i]
	print ""
	print "| streams | slogate added p99 | nginx added p99 | slogate / nginx CPU per token | slogate / nginx memory per stream |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= n; i++) if (t[i] == "slogate") {
		k = c[i]
		printf "| %s | %.2f ms | %.2f ms | %.2fx | %.2fx |\n", k, add[k, "slogate"], add[k, "nginx"],
			(cpu[k, "nginx"] > 0 ? cpu[k, "slogate"] / cpu[k, "nginx"] : 0), (mem[k, "nginx"] > 0 ? mem[k, "slogate"] / mem[k, "nginx"] : 0)
	}
	if (nperf > 0) {
		print ""
		print "Per streamed token, over two rounds per proxy under perf stat (PERF=1); read: read, recvfrom, readv;"
		print "write: write, sendto, writev; sleep: futex, nanosleep:"
		print ""
		print "| streams | target | system calls | read | write | epoll wait | sleep | context switches |"
		print "|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= nperf; i++) print perf[i]
	}
	if (fail > 0) { printf "\n%d requests failed\n", fail; exit 1 }
}' "$OUT/out.txt"
