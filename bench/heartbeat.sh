#!/usr/bin/env bash
# Day-1 heartbeat benchmark: N simulated nodes onboarded (Day 0) and then
# held heartbeating against one real eim server process on loopback; a share
# of them stops, and the server must flag exactly those "No Connection".
#   bench/heartbeat.sh                     SQLite, 100,000 nodes
#   bench/heartbeat.sh postgres 20000      PostgreSQL (a fresh database on 127.0.0.1:5432)
#   SEED=1 bench/heartbeat.sh sqlite 100000
#                          seeded, no Day 0: the server starts once (schema,
#                          default project, admin token; the OS and the
#                          interval set through the API) and stops; bench/seed
#                          writes N onboarded, provisioned, running nodes
#                          straight into its store (the seeding time is
#                          reported); the server starts again and the
#                          simulator holds those nodes from the nodes file
#                          ("eim-agent simulate --nodes-file"), their first
#                          heartbeats spread over one interval as after a
#                          server restart. The hold is the same as after Day 0.
# Extra arguments after the node count go to "eim-agent simulate".
# Environment (defaults):
#   INTERVAL=30        the default project's heartbeatIntervalSeconds (timeout 3×)
#   SETTLE=$INTERVAL   seconds after Day 0 reported apart (the last nodes'
#                      first heartbeats; the backlog of a server that Day 0
#                      saturated draining; seeded: the first heartbeats)
#   STEADY=300         seconds of steady heartbeats after that
#   STOP_SHARE=0.1     share of the nodes that then stop
#   MARGIN=60          seconds held after the timeout + 10 s bar
#   CONCURRENCY=3000   nodes in Day 0 at once
#   SEED=              1: seeded mode (above)
#   EIM_BENCH_SERVER_FLAGS   more flags for "eim server"
#   SOUTH=N            PostgreSQL: the nodes' modules in N processes behind a
#                      round-robin balancer, the rest in one (bench/servers.sh)
#   RESTART_SOUTH=S    with SOUTH: S seconds into the steady phase the first
#                      south process is killed (SIGKILL) and started again at
#                      once (a replica's restart storm); the heartbeats of the
#                      60 s after the kill are reported (the largest p99 of
#                      the simulator's 10 s windows, and their errors)
# Each server process's CPU (utime+stime of /proc/PID/stat, as cores) and
# memory (VmRSS, VmHWM) are sampled every second and reported per phase; the
# pprof of the (first node-facing) server is on 127.0.0.1:16060 (ports:
# API_PORT=18180, AGENT_PORT=18543, DEBUG_PORT, BOOT_PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-100000}; shift || true
interval=${INTERVAL:-30}
settle=${SETTLE:-$interval}
steady=${STEADY:-300}
stop_share=${STOP_SHARE:-0.1}
margin=${MARGIN:-60}
concurrency=${CONCURRENCY:-3000}
seeded=${SEED:-}
dir=$(mktemp -d)
pgdb=; sampler=; profiler=; restarter=
api=127.0.0.1:${API_PORT:-18180}; agent=127.0.0.1:${AGENT_PORT:-18543}; debug=127.0.0.1:${DEBUG_PORT:-16060}
db=(); store=$dir/data
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
if [ -n "$seeded" ]; then CGO_ENABLED=0 go build -o "$dir/seed" ./bench/seed; fi
source bench/servers.sh
# Under set -e a failing "wait" (the status of a killed process) would end
# the trap before the rest: every step here must not fail.
cleanup() {
	set +e
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	[ -n "$profiler" ] && kill "$profiler" 2>/dev/null && wait "$profiler" 2>/dev/null
	[ -n "$restarter" ] && kill "$restarter" 2>/dev/null && wait "$restarter" 2>/dev/null
	[ -s "$dir/restarted.pid" ] && kill "$(cat "$dir/restarted.pid")" 2>/dev/null
	stop_servers
	stop_lbs
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ "$engine" = postgres ]; then
	pgdb=eim_hb_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	store="postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable"
	db=(--database "$store")
fi
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)
# The servers (up to 300 s to be ready: a seeded store is large).
start_servers
tok=$(cat "$dir/data/admin.token")
auth=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json')
os=$(curl -fsS "${auth[@]}" \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$boot/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | jq -r .resourceId)
[ -n "$os" ] && [ "$os" != null ] || { echo "heartbeat: could not create the OS resource" >&2; exit 1; }
curl -fsS "${auth[@]}" -X PATCH -d "{\"heartbeatIntervalSeconds\":$interval}" "http://$api/v1/projects/default/settings" >/dev/null

# Seeded: stop the server, write the fleet into its store, start it again.
if [ -n "$seeded" ]; then
	stop_servers
	for n in "${names[@]}"; do mv "$dir/$n.log" "$dir/$n-init.log"; done
	"$dir/seed" --database "$store" --project default --nodes "$nodes" --os "$os" --out "$dir/nodes.jsonl" \
		>"$dir/seed.txt" 2>"$dir/seed.log" || { cat "$dir/seed.log"; echo "heartbeat: seeding failed" >&2; exit 1; }
	t0=$(date +%s.%N)
	start_servers
	restart=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
fi

sample_servers >"$dir/samples.txt" &
sampler=$!

# A 30 s CPU profile and the heap of the server a minute into the steady phase; with
# PROFILE_SETTLE=1 also a 20 s one and a goroutine dump a few seconds into the
# settle phase (the restart storm).
profile() {
	if [ -n "${PROFILE_SETTLE:-}" ]; then
		while [ ! -s "$dir/progress.txt" ]; do sleep 0.5; done
		sleep 5
		curl -fsS -o "$dir/settle.goroutines" "http://$debug/debug/pprof/goroutine?debug=1" || true
		curl -fsS -o "$dir/settle.pprof" "http://$debug/debug/pprof/profile?seconds=20" || true
	fi
	while ! grep -q '] steady:' "$dir/progress.txt" 2>/dev/null; do sleep 2; done
	sleep 60
	curl -fsS -o "$dir/steady.pprof" "http://$debug/debug/pprof/profile?seconds=30" || true
	curl -fsS -o "$dir/steady.heap" "http://$debug/debug/pprof/heap" || true
}
: >"$dir/progress.txt"
profile &
profiler=$!

# RESTART_SOUTH: the first south process killed and started again, S
# seconds into the steady phase (the steady phase starts SETTLE seconds
# into the hold: the kill's second of the hold is in restart.txt).
restart_south() {
	while ! grep -q '] steady:' "$dir/progress.txt" 2>/dev/null; do sleep 0.5; done
	sleep "$RESTART_SOUTH"
	local t0 victim=${pids[1]}
	t0=$(date +%s.%N)
	kill -9 "$victim"
	while kill -0 "$victim" 2>/dev/null; do sleep 0.1; done
	start_south 1 south1-restarted
	echo "${pids[-1]}" >"$dir/restarted.pid"
	awk -v a="$t0" -v b="$(date +%s.%N)" -v at="$((settle + RESTART_SOUTH))" \
		'BEGIN { printf "%d %.1f\n", at, b - a }' >"$dir/restart.txt"
}
if [ -n "${RESTART_SOUTH:-}" ]; then
	[ "$south" -gt 0 ] || { echo "RESTART_SOUTH needs SOUTH=N" >&2; exit 2; }
	restart_south &
	restarter=$!
fi

timeout=$((3 * interval))
hold=$((settle + steady + timeout + 10 + margin))
stop_after=$((settle + steady))
echo "engine: $engine; nodes: $nodes$([ -n "$seeded" ] && echo " (seeded)"); interval ${interval}s (timeout ${timeout}s); hold ${hold}s, ${stop_share} stop ${stop_after}s into it; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
describe_servers
if [ -n "$seeded" ]; then
	cat "$dir/seed.txt"
	echo "server restarted on the seeded store: serving after ${restart} s"
	fleet=(--nodes-file "$dir/nodes.jsonl" --timeout 10m)
	what="no Day 0"
else
	fleet=(--nodes "$nodes" --register --os "$os" --concurrency "$concurrency" --timeout 2h)
	what="including registration"
fi
rc=0
/usr/bin/time -f "simulator: %e s wall ($what), %U s user, %S s sys, %M KiB max RSS" \
	"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" "${fleet[@]}" \
	--api "http://$api" --token-file "$dir/data/admin.token" --project default \
	--hold "${hold}s" --settle "${settle}s" --stop-share "$stop_share" --stop-after "${stop_after}s" \
	--report "$dir/report.json" "$@" >"$dir/report.txt" 2> >(tee "$dir/progress.txt" >&2) || rc=$?
cat "$dir/report.txt"
[ -s "$dir/report.json" ] || exit 1
if [ -s "$dir/restart.txt" ]; then
	read -r at took <"$dir/restart.txt"
	echo
	echo "south1 killed (SIGKILL) ${at} s into the hold and started again: ready after ${took} s"
	# The simulator's 10 s windows that end within 60 s after the kill (and
	# the one it fell in).
	awk -v at="$at" '
		match($0, /^\[hold +[0-9]+s\]/) {
			t = substr($0, RSTART + 5, RLENGTH - 7) + 0
			if (t <= at || t > at + 70) next
			if (match($0, /p99 [0-9.]+ ms/)) { p = substr($0, RSTART + 4, RLENGTH - 7) + 0; if (p > worst) worst = p }
			if (match($0, /phase: [0-9]+ errors/)) errs = substr($0, RSTART + 7, RLENGTH - 14) + 0
			n++
		}
		END { printf "heartbeats over the 60 s after the kill (%d windows of 10 s): largest window p99 %.1f ms; the phase'\''s errors by then %d\n", n, worst, errs }' "$dir/progress.txt"
fi

# The servers' resources over each phase of the hold.
echo
echo "server resources per phase (CPU as cores; machine = all processes, $(nproc) cores):"
jq -r '.hold.phases[] | "\(.name) \(.from) \(.to)"' "$dir/report.json" | while read -r name from to; do
	phase_resources "$name" "$from" "$to"
done
final_resources
if [ -s "$dir/steady.pprof" ]; then
	echo
	echo "server CPU profile, 30 s of the steady phase:"
	go tool pprof -top -nodecount=25 "$dir/eim" "$dir/steady.pprof" 2>/dev/null | tail -n +4
	go tool pprof -top -cum -nodecount=45 "$dir/eim" "$dir/steady.pprof" 2>/dev/null | tail -n +6 |
		grep -E 'eim/|auth|jose|ed25519|database/sql|sqlite\.\(|http2serverConn\)\.(serve|runHandler)|gcBgMarkWorker|crypto/tls' || true
fi
if [ -s "$dir/steady.heap" ]; then
	echo
	echo "server heap in use, the steady phase (the largest):"
	go tool pprof -sample_index=inuse_space -top -nodecount=20 "$dir/eim" "$dir/steady.heap" 2>/dev/null | tail -n +5
fi
if [ -s "$dir/settle.pprof" ]; then
	echo
	echo "server CPU profile, 20 s of the settle phase:"
	go tool pprof -top -nodecount=25 "$dir/eim" "$dir/settle.pprof" 2>/dev/null | tail -n +4
	go tool pprof -top -cum -nodecount=45 "$dir/eim" "$dir/settle.pprof" 2>/dev/null | tail -n +6 |
		grep -E 'eim/|auth|jose|ed25519|database/sql|sqlite\.\(|http2serverConn\)\.(serve|runHandler)|gcBgMarkWorker|crypto/tls' || true
	echo "goroutines 5 s into the settle phase (the largest groups):"
	grep -E '^[0-9]+ @' "$dir/settle.goroutines" | sort -rn | head -5
fi
server_warnings
exit $rc
