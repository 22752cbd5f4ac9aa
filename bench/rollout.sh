#!/usr/bin/env bash
# Rollout benchmark (issue 27 §6): a workload's revision rolled out to N
# seeded devices (bench/seed, in SITES sites) held heartbeating by
# "eim-agent simulate", whose simulated pods start in START (±50 %) and
# which logs every pod it deploys (--workload-deploys).
#   bench/rollout.sh                       SQLite, one process, 10,000 devices
#   SOUTH=3 bench/rollout.sh postgres 10000
#       PostgreSQL (a fresh database on 127.0.0.1:5432), the modules apart:
#       core (api,os,exporter) and 3 processes of host,workloads behind
#       round-robin balancers; the process holding the targets loop's
#       lease (it drives the rollout) is SIGKILLed mid-batch (KILL_BATCH).
#
# The scenario: a workload on every device (revision 1, no policy), then
#   rev 2   rolled out in ten batches of 10 %, success threshold 90 %, at
#           most 10 % of each site updating at once (update timeout 10m);
#   rev 3   crashes on half of the devices (--workload-fail-revision
#           3=0.5; update timeout FAIL_TIMEOUT): it must pause after its
#           first batch, the reason naming the threshold;
#   rev 4   the rollback (revision 2's spec, the first policy again).
# Measured: each rollout's wall time and each batch's (from the API's view,
# polled every second), server CPU seconds and peak RSS of every process
# (/proc, sampled every second), the load average. Checked: every device
# deployed revisions 2 and 4 once, none before its batch was seen started
# (the deploys' log against the polled batches and the stored batch of
# each device), only the first batch deployed revision 3, and, at every
# poll, no device's stored target is the rollout's revision outside a
# started batch and no site has more devices updating than its budget.
# Environment (defaults): INTERVAL=10 (heartbeat s), SITES=100, START=3s,
# TICK=10s (--workloads-rollout-tick), FAIL_TIMEOUT=1m, KILL_BATCH=3, KEEP=;
# ports API_PORT=18180, AGENT_PORT=18543.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-10000}; shift || true
interval=${INTERVAL:-10}
sites=${SITES:-100}
start_time=${START:-3s}
tick=${TICK:-10s}
fail_timeout=${FAIL_TIMEOUT:-1m}
kill_batch=${KILL_BATCH:-3}
dir=$(mktemp -d)
pgdb=; sampler=; simpid=; observer=
api=127.0.0.1:${API_PORT:-18180}; agent=127.0.0.1:${AGENT_PORT:-18543}
db=(); store=$dir/data
export SOUTH_MODULES=host,workloads
# The PostgreSQL server is shared (100 connections): 4 processes of 8.
export SOUTH_CONNS=${SOUTH_CONNS:-8}
EIM_BENCH_SERVER_FLAGS="--workloads-rollout-tick $tick ${EIM_BENCH_SERVER_FLAGS:-}"
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
CGO_ENABLED=0 go build -o "$dir/seed" ./bench/seed
source bench/servers.sh
cleanup() {
	set +e
	[ -n "$simpid" ] && kill "$simpid" 2>/dev/null && wait "$simpid" 2>/dev/null
	[ -n "$observer" ] && kill "$observer" 2>/dev/null && wait "$observer" 2>/dev/null
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	stop_servers
	stop_lbs
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ "$engine" = postgres ]; then
	pgdb=eim_roll_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	store="postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable"
	db=(--database "$store")
fi
# sql QUERY: rows as "a|b|…" lines, from the store the servers use; tried
# again for a minute (the shared PostgreSQL may be out of connections).
sql() {
	local i
	for i in $(seq 1 60); do
		if [ "$engine" = postgres ]; then
			psql -h 127.0.0.1 -U postgres -d "$pgdb" -qAtc "$1" 2>>"$dir/sql.log" && return 0
		else
			sqlite3 "$dir/data/eim.db" ".timeout 5000" "$1" 2>>"$dir/sql.log" && return 0
		fi
		sleep 1
	done
	echo "rollout: the store did not answer: $1" >&2
	return 1
}
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)

# The server once (schema, default project, admin token; the OS, the
# interval, a region and its sites), stopped; the fleet seeded into the
# sites; the servers again.
start_servers
tok=$(cat "$dir/data/admin.token")
auth=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json')
P=http://$api/v1/projects/default
os=$(curl -fsS "${auth[@]}" -d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$api/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"$P/compute/os" | jq -r .resourceId)
[ -n "$os" ] && [ "$os" != null ] || { echo "rollout: could not create the OS resource" >&2; exit 1; }
curl -fsS "${auth[@]}" -X PATCH -d "{\"heartbeatIntervalSeconds\":$interval}" "$P/settings" >/dev/null
region=$(curl -fsS "${auth[@]}" -d '{"name":"bench"}' "$P/regions" | jq -r .resourceId)
site_ids=()
for i in $(seq 1 "$sites"); do
	site_ids+=("$(curl -fsS "${auth[@]}" -d "{\"name\":\"s$i\",\"regionId\":\"$region\"}" "$P/sites" | jq -r .resourceId)")
done
stop_servers
for n in "${names[@]}"; do mv "$dir/$n.log" "$dir/$n-init.log"; done
"$dir/seed" --database "$store" --project default --nodes "$nodes" --os "$os" --out "$dir/nodes.jsonl" \
	--sites "$(IFS=,; echo "${site_ids[*]}")" >"$dir/seed.txt" 2>"$dir/seed.log" || { cat "$dir/seed.log"; echo "rollout: seeding failed" >&2; exit 1; }
start_servers
wl=http://$boot/v1/projects/default/edgeworkloads # a process with the workloads module

sample_servers >"$dir/samples.txt" &
sampler=$!
echo "engine: $engine; devices: $nodes (seeded) in $sites sites; heartbeats every ${interval}s; pod start $start_time ±50 %; rollout tick $tick"
describe_servers
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$dir/seed.txt"

"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" --nodes-file "$dir/nodes.jsonl" --timeout 10m \
	--workload-start-time "$start_time" --workload-fail-revision 3=0.5 --workload-deploys "$dir/deploys.jsonl" \
	--report "$dir/report.json" "$@" >"$dir/report.txt" 2>"$dir/progress.txt" &
simpid=$!
for _ in $(seq 1 600); do
	grep -q '] steady:' "$dir/progress.txt" 2>/dev/null && break
	kill -0 "$simpid" 2>/dev/null || { cat "$dir/progress.txt"; echo "rollout: the simulator ended" >&2; exit 1; }
	sleep 1
done

policy() { # UPDATE-TIMEOUT
	printf '{"batches":[%s],"successThreshold":"90%%","updateTimeout":"%s","disruptionBudget":{"groupBy":["eim.io/site"],"maxUnavailable":"10%%"}}' \
		"$(printf '{"limit":"10%%"},%.0s' $(seq 1 10) | sed 's/,$//')" "$1"
}
spec() { # TAG [POLICY]
	printf '{"name":"cam","spec":{"deviceSelector":{"matchExpressions":[{"key":"eim.io/host","operator":"Exists"}]},"pod":{"spec":{"containers":[{"name":"reader","image":"registry.example:5000/cam:%s"}]}}%s}}' \
		"$1" "${2:+,\"rolloutPolicy\":$2}"
}
now() { date +%s.%N; }
# sql1 QUERY: sql, tried once (the observer's checks; a missed poll is
# counted as not checked).
sql1() {
	if [ "$engine" = postgres ]; then
		psql -h 127.0.0.1 -U postgres -d "$pgdb" -qAtc "$1"
	else
		sqlite3 "$dir/data/eim.db" ".timeout 5000" "$1"
	fi
}
# observe: the rollout polled every second, one line each in
# observations.txt: "SENT REV STATE BATCH STARTED UPDATING DONE FAILED",
# and the store's rows checked (violations.txt). Runs until killed.
observe() {
	local t v
	while :; do
		t=$(now)
		curl -fsS "${auth[@]}" "$wl/cam/rollout" 2>/dev/null |
			jq -r --arg t "$t" '"\($t) \(.toRevision) \(.state) \(.batch) \(if .batchStarted then 1 else 0 end) \(.currentBatch.updating) \(.devices.done) \(.devices.failed)"' \
				>>"$dir/observations.txt" 2>/dev/null || true
		v=$(sql1 "SELECT t.host_id, d.batch, d.state, r.batch FROM edge_workload_targets t
			JOIN edge_workload_rollouts r ON r.project = t.project AND r.name = t.name
			LEFT JOIN edge_workload_rollout_devices d ON d.project = t.project AND d.name = t.name AND d.host_id = t.host_id
			WHERE t.name = 'cam' AND t.revision = r.to_revision AND (d.state IS NULL OR d.state = 'waiting' OR d.batch > r.batch)" 2>/dev/null) &&
			echo "$t" >>"$dir/checked.txt" || v=
		[ -n "$v" ] && echo "$t outside a started batch: $v" >>"$dir/violations.txt"
		v=$(sql1 "SELECT h.site_id, count(*) FROM edge_workload_rollout_devices d JOIN hosts h ON h.project = d.project AND h.id = d.host_id
			WHERE d.name = 'cam' AND d.state = 'updating' GROUP BY h.site_id HAVING count(*) > $(( (nodes / sites + 9) / 10 ))" 2>/dev/null) || v=
		[ -n "$v" ] && echo "$t over the budget: $v" >>"$dir/violations.txt"
		sleep 1
	done
}
: >"$dir/observations.txt"; : >"$dir/violations.txt"; : >"$dir/phases.txt"; : >"$dir/checked.txt"
latest() { tail -n 1 "$dir/observations.txt"; }
# wait_state REV STATE: until the rollout of REV is STATE (fails on another
# end state).
wait_state() {
	local line
	for _ in $(seq 1 3600); do
		line=$(latest)
		set -- "$1" "$2" $line
		if [ "${4:-}" = "$1" ] && [ "${5:-}" = "$2" ]; then return 0; fi
		if [ "${4:-}" = "$1" ] && [ "${5:-}" != PROGRESSING ] && [ "${5:-}" != "$2" ]; then
			curl -fsS "${auth[@]}" "$wl/cam/rollout" | jq -c . >&2
			echo "rollout: revision $1 is ${5:-}" >&2; exit 1
		fi
		sleep 1
	done
	echo "rollout: revision $1 not $2 within an hour" >&2; exit 1
}
# batches REV: each device's batch (from 0) of the rollout of REV, stored.
batches() {
	sql "SELECT d.host_id, d.batch FROM edge_workload_rollout_devices d JOIN edge_workload_rollouts r ON r.project = d.project AND r.name = d.name
		WHERE d.name = 'cam' AND r.to_revision = $1" | tr '|' ' ' >"$dir/batches$1.txt"
}

curl -fsS "${auth[@]}" -d "$(spec 1)" "$wl" >/dev/null
for _ in $(seq 1 900); do
	[ "$(curl -fsS "${auth[@]}" "$wl/cam/status" | jq -r .devices.running)" = "$nodes" ] && break
	sleep 1
done
echo "revision 1 running on every device (no policy: all at once)"
observe &
observer=$!

# Revision 2, its driver killed mid-batch with replicas.
t0=$(now)
curl -fsS "${auth[@]}" -X PUT -d "$(spec 2 "$(policy 10m)")" "$wl/cam" >/dev/null
killed=
if [ "$south" -gt 0 ]; then
	for _ in $(seq 1 3600); do
		set -- $(latest)
		if [ "${2:-}" = 2 ] && [ "${4:-0}" -ge "$kill_batch" ] && [ "${5:-0}" = 1 ] && [ "${6:-0}" -gt 0 ]; then
			holder=$(sql "SELECT holder FROM eim_leases WHERE name = 'loop/workloads/targets'")
			pid=$(echo "$holder" | awk -F- '{ print $(NF-1) }')
			for i in "${!pids[@]}"; do
				if [ "${pids[$i]}" = "$pid" ]; then
					kill -9 "$pid"
					killed="${names[$i]} (pid $pid, lease holder $holder) at batch $4 of the rollout, $6 devices of the batch updating, $(now)"
				fi
			done
			[ -n "$killed" ] || { echo "rollout: the lease holder $holder is none of the servers" >&2; exit 1; }
			echo "SIGKILLed $killed"
			break
		fi
		sleep 0.5
	done
fi
wait_state 2 DONE
t1=$(now)
echo "rev2 $t0 $t1 $(cut -d' ' -f1 /proc/loadavg)" >>"$dir/phases.txt"
batches 2
if [ -n "$killed" ]; then
	echo "the targets loop's lease now: $(sql "SELECT holder FROM eim_leases WHERE name = 'loop/workloads/targets'")"
fi

# Revision 3 crashes on half: paused after the first batch.
t0=$(now)
curl -fsS "${auth[@]}" -X PUT -d "$(spec 3 "$(policy "$fail_timeout")")" "$wl/cam" >/dev/null
wait_state 3 PAUSED
t1=$(now)
echo "rev3 $t0 $t1 $(cut -d' ' -f1 /proc/loadavg)" >>"$dir/phases.txt"
batches 3
reason3=$(curl -fsS "${auth[@]}" "$wl/cam/rollout" | jq -r .reason)

# The rollback, under the first policy again.
curl -fsS "${auth[@]}" -X PUT -d "$(spec 3 "$(policy 10m)")" "$wl/cam" >/dev/null
t0=$(now)
rev4=$(curl -fsS "${auth[@]}" -X POST "$wl/cam/rollout/rollback" | jq -r .revision)
[ "$rev4" = 4 ] || { echo "rollout: the rollback made revision $rev4" >&2; exit 1; }
wait_state 4 DONE
t1=$(now)
echo "rev4 $t0 $t1 $(cut -d' ' -f1 /proc/loadavg)" >>"$dir/phases.txt"
batches 4
sleep 2
kill "$observer"; wait "$observer" 2>/dev/null || true
kill -INT "$simpid"
wait "$simpid" || true
simpid=

echo
echo "rollouts (wall time from the revision's PUT, or the rollback's POST, to the state; the API polled every second):"
while read -r name from to load; do
	printf "  %s: %.1f s (load average %s)\n" "$name" "$(awk -v a="$from" -v b="$to" 'BEGIN { print b - a }')" "$load"
done <"$dir/phases.txt"
echo "  revision 3 paused: $reason3" | cut -c1-400
echo
echo "batches (from the batch seen started to the next seen started, or the end):"
for rev in 2 4; do
	awk -v rev="$rev" '$2 == rev && $5 == 1 && !($4 in first) { first[$4] = $1; order[++n] = $4 }
		$2 == rev && $3 == "DONE" && !end { end = $1 }
		END { line = "  revision " rev ":"; for (i = 1; i <= n; i++) { b = order[i]; to = (i < n) ? first[order[i + 1]] : end
			if (to != "") line = line sprintf(" %d: %.1f s;", b, to - first[b]) }; print line }' "$dir/observations.txt"
done

echo
echo "checks:"
jq -r '"\(.hostId) \(.revision) \(.at)"' "$dir/deploys.jsonl" >"$dir/deploys.txt"
for rev in 2 3 4; do
	awk -v rev="$rev" -v nodes="$nodes" '
		FILENAME ~ /observations/ { # the last time each batch was seen not started
			t = $1 * 1e9
			for (k = 1; k <= 12; k++) if ($2 < rev || ($2 == rev && ($4 < k || ($4 == k && $5 == 0)))) ns[k] = t
			next }
		FILENAME ~ /batches/ { batch[$1] = $2; members++; next }
		$2 == rev { n[$1]++; if (n[$1] == 1) { first[$1] = $3; devs++ } }
		END {
			for (h in n) {
				if (!(h in batch)) outside++
				else if (first[h] < ns[batch[h] + 1]) early++
				if (n[h] > 1) twice++
			}
			printf "  revision %d: %d devices in its batches, %d deployed it: %d outside the rollout, %d before their batch was seen started, %d more than once\n",
				rev, members, devs, outside, early, twice
		}' "$dir/observations.txt" "$dir/batches$rev.txt" "$dir/deploys.txt"
done
echo "  the store's rows at each poll: $(grep -c outside "$dir/violations.txt" || true) polls with a device given the revision outside a started batch, $(grep -c budget "$dir/violations.txt" || true) with a site over its budget (of $(wc -l <"$dir/checked.txt") polls checked; $(wc -l <"$dir/observations.txt") of the API)"

echo
echo "server resources (CPU seconds from /proc/PID/stat, peak RSS = VmHWM, sampled every second; the killed process until its death):"
awk -v hz="$(getconf CLK_TCK)" '{ p = $1; if (!(p in c0)) { c0[p] = $3; order[++n] = p } c1[p] = $3; if ($5 > hwm[p]) hwm[p] = $5 }
	END { for (i = 1; i <= n; i++) { p = order[i]; printf "  %-7s CPU %.0f s over the run, peak RSS %.0f MiB\n", p, (c1[p] - c0[p]) / hz, hwm[p] / 1024; tc += (c1[p] - c0[p]) / hz }
		if (n > 1) printf "  all     CPU %.0f s\n", tc }' "$dir/samples.txt"
while read -r name from to load; do
	phase_resources "$name" "$from" "$to" | sed "s/\$/; load $load/"
done <"$dir/phases.txt"
jq -r '.hold.workloads | "simulator: GetWorkloads \(.getWorkloads.count) calls, p99 \(.getWorkloads.p99Ms) ms, \(.getWorkloads.errors) errors; ReportStatus \(.reportStatus.count), p99 \(.reportStatus.p99Ms) ms, \(.reportStatus.errors) errors; older answers refused \(.backwards // 0)"' "$dir/report.json" 2>/dev/null || true
server_warnings
