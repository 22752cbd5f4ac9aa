#!/usr/bin/env bash
# Edge workloads benchmark: N seeded devices (bench/seed: onboarded,
# provisioned, running) held heartbeating by "eim-agent simulate" against
# one real eim server process on loopback; the simulated devices follow
# their edge workloads as the agent does (GetWorkloads when the heartbeat's
# version moves, simulated pods Deploying then Running after
# --workload-start-time, ReportStatus only when a status changed).
#   bench/workloads.sh                    SQLite, 10,000 devices
#   bench/workloads.sh postgres 10000     PostgreSQL (a fresh database on 127.0.0.1:5432)
# Extra arguments after the device count go to "eim-agent simulate".
#
# It measures, in ROUNDS rounds back to back, interleaved:
#   none     STEADY s of steady heartbeats, no workload in the project;
#   fan-in   3 workloads created at once, each selecting every device: each
#            device fetches its set at its next heartbeat and reports its 3
#            pods Deploying, then Running. Measured: the time until the
#            API's aggregate (GET …/edgeworkloads/{name}/status) counts
#            every device running for all 3 (polled every POLL s), the
#            latency of the status reports (ReportStatus, the simulator's
#            histogram over every fan-in), and the aggregation lag: the
#            API's all-running seen minus the last status report answered
#            (the last round's; no report follows it);
#   with     STEADY s of steady heartbeats with the 3 workloads Running;
#   then the workloads are deleted (the devices remove their pods and
#   report it) before the next round's "none".
# Server CPU (utime+stime of /proc/PID/stat, as cores) and memory are
# sampled every second and reported per window, with the load average and
# the machine's busy cores (others share it); the CPU ratio with/none is
# over the sums of the rounds. A CPU profile of the server is taken during
# the first fan-in (pprof on --debug-addr) and its top printed.
# Environment (defaults):
#   INTERVAL=10   the project's heartbeatIntervalSeconds (10,000 devices at
#                 10 s is 1,000 heartbeats/s: 100,000 at 100 s)
#   STEADY=90     seconds of each steady window
#   ROUNDS=2      rounds of none / fan-in / with
#   START=3s      --workload-start-time (±50 %)
#   POLL=         seconds between polls of the aggregates during a fan-in
#                 (default 0.5, and 1 per 20,000 devices above that: each
#                 poll counts every device three times, which at 100,000
#                 devices polled every 0.5 s took a quarter of the server)
#   FANIN_MAX=    seconds a fan-in may take before the run fails (default
#                 900, and 1 per 50 devices above that)
#   AFTER=        seconds between a fan-in's end and the steady window with
#                 the workloads (default two intervals): the fan-in's last
#                 reports and the marks it left are answered, and the
#                 heartbeats the fan-in held back are back to their pace
#   KEEP=         1: keep the run's directory
#   ports: API_PORT=18180, AGENT_PORT=18543, DEBUG_PORT=16060
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-10000}; shift || true
interval=${INTERVAL:-10}
steady=${STEADY:-90}
rounds=${ROUNDS:-2}
start_time=${START:-3s}
poll=${POLL:-$(awk -v n="$nodes" 'BEGIN { p = n / 20000; print (p > 0.5 ? p : 0.5) }')}
after=${AFTER:-$((2 * interval))}
fanin_max=${FANIN_MAX:-$(awk -v n="$nodes" 'BEGIN { m = n / 50; print (m > 900 ? m : 900) }')}
dir=$(mktemp -d)
pgdb=; sampler=; simpid=; profiler=
api=127.0.0.1:${API_PORT:-18180}; agent=127.0.0.1:${AGENT_PORT:-18543}; debug=127.0.0.1:${DEBUG_PORT:-16060}
db=(); store=$dir/data
SOUTH=0
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
CGO_ENABLED=0 go build -o "$dir/seed" ./bench/seed
source bench/servers.sh
cleanup() {
	set +e
	[ -n "$simpid" ] && kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
	[ -n "$profiler" ] && kill "$profiler" 2>/dev/null && wait "$profiler" 2>/dev/null
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	stop_servers
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ "$engine" = postgres ]; then
	pgdb=eim_wl_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	store="postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable"
	db=(--database "$store")
fi
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)

# The server once (schema, default project, admin token, the OS and the
# interval), stopped; the fleet seeded into its store; the server again.
start_servers
tok=$(cat "$dir/data/admin.token")
auth=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json')
os=$(curl -fsS "${auth[@]}" \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$api/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | jq -r .resourceId)
[ -n "$os" ] && [ "$os" != null ] || { echo "workloads: could not create the OS resource" >&2; exit 1; }
curl -fsS "${auth[@]}" -X PATCH -d "{\"heartbeatIntervalSeconds\":$interval}" "http://$api/v1/projects/default/settings" >/dev/null
stop_servers
for n in "${names[@]}"; do mv "$dir/$n.log" "$dir/$n-init.log"; done
"$dir/seed" --database "$store" --project default --nodes "$nodes" --os "$os" --out "$dir/nodes.jsonl" \
	>"$dir/seed.txt" 2>"$dir/seed.log" || { cat "$dir/seed.log"; echo "workloads: seeding failed" >&2; exit 1; }
start_servers
server_pid=${pids[0]}

sample_servers >"$dir/samples.txt" &
sampler=$!

echo "engine: $engine; devices: $nodes (seeded); interval ${interval}s; steady windows ${steady}s; $rounds rounds; pod start $start_time ±50 %"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$dir/seed.txt"

: >"$dir/progress.txt"
"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" --nodes-file "$dir/nodes.jsonl" --timeout 10m \
	--workload-start-time "$start_time" --report "$dir/report.json" "$@" \
	>"$dir/report.txt" 2>"$dir/progress.txt" &
simpid=$!
# The steady phase: every device heartbeating.
for _ in $(seq 1 600); do
	grep -q '] steady:' "$dir/progress.txt" 2>/dev/null && break
	kill -0 "$simpid" 2>/dev/null || { cat "$dir/progress.txt"; echo "workloads: the simulator ended" >&2; exit 1; }
	sleep 1
done

workload() { # NAME
	printf '{"name":"%s","spec":{"deviceSelector":{"matchExpressions":[{"key":"eim.io/host","operator":"Exists"}]},"pod":{"spec":{"containers":[{"name":"main","image":"registry.example:5000/%s:1.0"}]}}}}' "$1" "$1"
}
# all_running: every device counted running by each workload's aggregate.
all_running() {
	local w r
	for w in w1 w2 w3; do
		r=$(curl -fsS "${auth[@]}" "http://$api/v1/projects/default/edgeworkloads/$w/status" 2>/dev/null | jq -r '.devices.running') || return 1
		[ "$r" = "$nodes" ] || return 1
	done
}
# window NAME SECONDS: a steady window, recorded as "NAME FROM TO LOAD1".
window() {
	local from to
	from=$(date +%s.%N)
	sleep "$2"
	to=$(date +%s.%N)
	echo "$1 $from $to $(cut -d' ' -f1 /proc/loadavg)" >>"$dir/windows.txt"
}
: >"$dir/windows.txt"
for r in $(seq 1 "$rounds"); do
	# The first steady windows are profiled both (the same overhead in
	# both sides of the ratio).
	if [ "$r" = 1 ]; then
		curl -fsS -o "$dir/none.pprof" "http://$debug/debug/pprof/profile?seconds=$steady" &
		profiler=$!
	fi
	window "none$r" "$steady"
	[ "$r" = 1 ] && wait "$profiler" && profiler=
	t0=$(date +%s.%N)
	if [ "$r" = 1 ]; then
		curl -fsS -o "$dir/fanin.pprof" "http://$debug/debug/pprof/profile?seconds=$((interval + 15))" &
		profiler=$!
	fi
	for w in w1 w2 w3; do
		curl -fsS "${auth[@]}" -d "$(workload "$w")" "http://$api/v1/projects/default/edgeworkloads" >/dev/null
	done
	until all_running; do
		sleep "$poll"
		awk -v a="$t0" -v b="$(date +%s.%N)" -v m="$fanin_max" 'BEGIN { exit !(b - a > m) }' && { echo "workloads: fan-in $r not done in $fanin_max s" >&2; exit 1; }
	done
	t1=$(date +%s.%N)
	echo "fanin$r $t0 $t1 $(cut -d' ' -f1 /proc/loadavg)" >>"$dir/windows.txt"
	[ "$r" = 1 ] && wait "$profiler" && profiler=
	sleep "$after"
	if [ "$r" = 1 ]; then
		curl -fsS -o "$dir/with.pprof" "http://$debug/debug/pprof/profile?seconds=$steady" &
		profiler=$!
	fi
	window "with$r" "$steady"
	[ "$r" = 1 ] && wait "$profiler" && profiler=
	if [ "$r" != "$rounds" ]; then
		for w in w1 w2 w3; do
			curl -fsS "${auth[@]}" -X DELETE "http://$api/v1/projects/default/edgeworkloads/$w" >/dev/null
		done
		sleep $((interval + 15)) # every device removed its pods and said so
	fi
done
kill -INT "$simpid"
wait "$simpid" || true
simpid=
cat "$dir/report.txt"
[ -s "$dir/report.json" ] || { cat "$dir/progress.txt"; exit 1; }

echo
echo "fan-in (3 workloads created → the API counts all $nodes devices running for each):"
grep '^fanin' "$dir/windows.txt" | while read -r name from to load; do
	printf "  %s: %.1f s (load average %s)\n" "$name" "$(awk -v a="$from" -v b="$to" 'BEGIN { print b - a }')" "$load"
done
jq -r --arg poll "$poll" --arg seen "$(grep "^fanin$rounds " "$dir/windows.txt" | cut -d' ' -f3)" '.hold.workloads |
	"  ReportStatus: \(.reportStatus.count) calls, p50 \(.reportStatus.p50Ms) ms, p99 \(.reportStatus.p99Ms) ms, max \(.reportStatus.maxMs) ms, \(.reportStatus.errors) errors",
	"  GetWorkloads: \(.getWorkloads.count) calls, p50 \(.getWorkloads.p50Ms) ms, p99 \(.getWorkloads.p99Ms) ms, \(.getWorkloads.errors) errors",
	"  a pod deployed → its Running report answered: p50 \(.deploy.p50Ms) ms, p99 \(.deploy.p99Ms) ms",
	"  aggregation lag (last round): the API saw all running \((($seen | tonumber) - .lastReport) * 1000 | round) ms after the last report was answered (polled every \($poll) s)"' "$dir/report.json"

echo
echo "server resources per window (CPU as cores; machine = all processes, $(nproc) cores; load = 1-min load average at the end):"
while read -r name from to load; do
	phase_resources "$name" "$from" "$to" | sed "s/\$/; load $load/"
done <"$dir/windows.txt"
cpu_of() { # window-name prefix → the server's CPU core-seconds and seconds, summed
	grep "^$1" "$dir/windows.txt" | while read -r name from to load; do
		awk -v from="$from" -v to="$to" '$1 == "server" && $2 >= from && $2 <= to { if (!n++) { t0 = $2; c0 = $3 } t1 = $2; c1 = $3 }
			END { print c1 - c0, t1 - t0 }' "$dir/samples.txt"
	done | awk -v hz="$(getconf CLK_TCK)" '{ c += $1; t += $2 } END { printf "%.4f", c / hz / t }'
}
none=$(cpu_of none); with=$(cpu_of with)
echo
printf "steady heartbeats, server CPU: none %.3f cores, with 3 workloads %.3f cores: ratio %.3f (target ≤ 1.15)\n" \
	"$none" "$with" "$(awk -v a="$with" -v b="$none" 'BEGIN { print a / b }')"
final_resources
if [ -s "$dir/with.pprof" ]; then
	echo
	echo "server CPU profiles of the first steady windows, without and with the workloads (the workloads module's own share in the second):"
	go tool pprof -top -cum -nodecount=400 "$dir/eim" "$dir/none.pprof" 2>/dev/null | sed -n '4,5p'
	go tool pprof -top -cum -nodecount=400 "$dir/eim" "$dir/with.pprof" 2>/dev/null | sed -n '4,5p'
	go tool pprof -top -cum -nodecount=400 "$dir/eim" "$dir/with.pprof" 2>/dev/null | grep -E ' github.com/eimhq/eim/workloads\.' | head -15 || true
fi
if [ -s "$dir/fanin.pprof" ]; then
	echo
	echo "server CPU profile, the first fan-in:"
	go tool pprof -top -nodecount=25 "$dir/eim" "$dir/fanin.pprof" 2>/dev/null | tail -n +4
	go tool pprof -top -cum -nodecount=60 "$dir/eim" "$dir/fanin.pprof" 2>/dev/null | tail -n +6 |
		grep -E 'eim/|database/sql|sqlite\.\(|pgx|http2serverConn\)\.(serve|runHandler)|gcBgMarkWorker|crypto/tls' || true
fi
server_warnings
