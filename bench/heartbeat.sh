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
# The server's CPU (utime+stime of /proc/PID/stat, as cores) and memory
# (VmRSS, VmHWM) are sampled every second and reported for the steady phase;
# its pprof is on 127.0.0.1:16060 (ports: API_PORT=18180, AGENT_PORT=18543, DEBUG_PORT).
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
srv=; pgdb=; sampler=; profiler=
api=127.0.0.1:${API_PORT:-18180}; agent=127.0.0.1:${AGENT_PORT:-18543}; debug=127.0.0.1:${DEBUG_PORT:-16060}
# Under set -e a failing "wait" (the status of a killed process) would end
# the trap before the rest: every step here must not fail.
cleanup() {
	set +e
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	[ -n "$profiler" ] && kill "$profiler" 2>/dev/null && wait "$profiler" 2>/dev/null
	[ -n "$srv" ] && kill "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
if [ -n "$seeded" ]; then CGO_ENABLED=0 go build -o "$dir/seed" ./bench/seed; fi
db=(); store=$dir/data
if [ "$engine" = postgres ]; then
	pgdb=eim_hb_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	store="postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable"
	db=(--database "$store")
fi
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)
# The server (up to 150 s to start: a seeded store is large).
start_server() {
	"$dir/eim" server --data-dir "$dir/data" --http-addr "$api" --agent-addr "$agent" --debug-addr "$debug" \
		--boot-artifacts "$dir/boot" --log-level warn --rate-limit 0 ${EIM_BENCH_SERVER_FLAGS:-} "${db[@]}" >"$dir/server.log" 2>&1 &
	srv=$!
	for _ in $(seq 1 750); do grep -q "serving agents" "$dir/server.log" && [ -s "$dir/data/admin.token" ] && break; sleep 0.2; done
	grep -q "serving agents" "$dir/server.log" || { cat "$dir/server.log"; echo "heartbeat: server did not start" >&2; exit 1; }
}
start_server
tok=$(cat "$dir/data/admin.token")
auth=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json')
os=$(curl -fsS "${auth[@]}" \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$api/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | jq -r .resourceId)
[ -n "$os" ] && [ "$os" != null ] || { echo "heartbeat: could not create the OS resource" >&2; exit 1; }
curl -fsS "${auth[@]}" -X PATCH -d "{\"heartbeatIntervalSeconds\":$interval}" "http://$api/v1/projects/default/settings" >/dev/null

# Seeded: stop the server, write the fleet into its store, start it again.
if [ -n "$seeded" ]; then
	kill "$srv"; wait "$srv" || true; srv=
	mv "$dir/server.log" "$dir/server-init.log"
	"$dir/seed" --database "$store" --project default --nodes "$nodes" --os "$os" --out "$dir/nodes.jsonl" \
		>"$dir/seed.txt" 2>"$dir/seed.log" || { cat "$dir/seed.log"; echo "heartbeat: seeding failed" >&2; exit 1; }
	t0=$(date +%s.%N)
	start_server
	restart=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
fi

# One line a second: time, server ticks (utime+stime), VmRSS, VmHWM (KiB),
# machine busy ticks (all CPUs, from /proc/stat: everything but idle and
# iowait), RssAnon (the Go heap and stacks) and RssFile+RssShmem (KiB: pages
# of the SQLite database file mapped by its page cache count in VmRSS).
hz=$(getconf CLK_TCK)
sample() {
	while kill -0 "$srv" 2>/dev/null; do
		t=$(date +%s.%N)
		ticks=$(awk '{print $14+$15}' "/proc/$srv/stat" 2>/dev/null) || break
		mem=$(awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} /^RssAnon/{a=$2} /^Rss(File|Shmem)/{f+=$2} END{print r, h, a, f}' "/proc/$srv/status" 2>/dev/null) || break
		busy=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
		set -- $mem
		echo "$t $ticks $1 $2 $busy $3 $4"
		sleep 1
	done
}
sample >"$dir/samples.txt" &
sampler=$!

# A 30 s CPU profile of the server a minute into the steady phase.
profile() {
	while ! grep -q '] steady:' "$dir/progress.txt" 2>/dev/null; do sleep 2; done
	sleep 60
	curl -fsS -o "$dir/steady.pprof" "http://$debug/debug/pprof/profile?seconds=30" || true
}
: >"$dir/progress.txt"
profile &
profiler=$!

timeout=$((3 * interval))
hold=$((settle + steady + timeout + 10 + margin))
stop_after=$((settle + steady))
echo "engine: $engine; nodes: $nodes$([ -n "$seeded" ] && echo " (seeded)"); interval ${interval}s (timeout ${timeout}s); hold ${hold}s, ${stop_share} stop ${stop_after}s into it; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
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

# The server's resources over each phase of the hold.
echo
echo "server resources per phase (CPU as cores; machine = all processes, $(nproc) cores):"
jq -r '.hold.phases[] | "\(.name) \(.from) \(.to)"' "$dir/report.json" | while read -r name from to; do
	awk -v name="$name" -v from="$from" -v to="$to" -v hz="$hz" '
		$1 >= from && $1 <= to {
			if (!n) { t0 = $1; c0 = $2; b0 = $5 }
			t1 = $1; c1 = $2; b1 = $5; n++
			rss += $3; if ($3 > rssmax) rssmax = $3; hwm = $4
			if ($6 > anonmax) anonmax = $6; if ($7 > filemax) filemax = $7
		}
		END {
			if (n < 2) { printf "  %-8s too short to sample\n", name; exit }
			printf "  %-8s %6.0f s: server CPU %.2f cores, RSS mean %.0f MiB / max %.0f MiB (anonymous max %.0f, file max %.0f), HWM %.0f MiB; machine busy %.2f cores\n",
				name, t1 - t0, (c1 - c0) / hz / (t1 - t0), rss / n / 1024, rssmax / 1024, anonmax / 1024, filemax / 1024, hwm / 1024, (b1 - b0) / hz / (t1 - t0)
		}' "$dir/samples.txt"
done
awk -v hz="$hz" 'END { printf "server at the end: CPU time %.0f s, VmRSS %.0f MiB, VmHWM %.0f MiB\n", $2 / hz, $3 / 1024, $4 / 1024 }' "$dir/samples.txt"
if [ -s "$dir/steady.pprof" ]; then
	echo
	echo "server CPU profile, 30 s of the steady phase:"
	go tool pprof -top -nodecount=25 "$dir/eim" "$dir/steady.pprof" 2>/dev/null | tail -n +4
	go tool pprof -top -cum -nodecount=45 "$dir/eim" "$dir/steady.pprof" 2>/dev/null | tail -n +6 |
		grep -E 'eim/|auth|jose|ed25519|database/sql|sqlite\.\(|http2serverConn\)\.(serve|runHandler)|gcBgMarkWorker|crypto/tls' || true
fi
grep -iE "level=(error|warn)" "$dir/server.log" | sed -E 's/^time=[^ ]+ //' | sort | uniq -c | sort -rn | head -5 || true
exit $rc
