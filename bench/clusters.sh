#!/usr/bin/env bash
# Cluster creation benchmark: N single-node clusters on a fleet of N
# simulated nodes, against one real eim server process on loopback.
#   bench/clusters.sh                  SQLite, 1,000 nodes and clusters
#   bench/clusters.sh postgres 1000    PostgreSQL (a fresh database on 127.0.0.1:5432)
# The server starts once (schema, default project, admin token; the OS and
# the heartbeat interval set through the API) and stops; bench/seed writes N
# onboarded, provisioned, running nodes into its store; the server starts
# again and "eim-agent simulate --nodes-file" holds those nodes, acting as
# cluster nodes (docs/clusters-node.md: a simulated install of
# --cluster-install-time, default 5s-20s). Once every node has heartbeated,
# N clusters are created through the v2 API (CONCURRENCY at once), one node
# each (role all, the project's default template), and the summary is
# polled until every cluster is ready; then every cluster is deleted and
# the summary polled until none is left.
# Reported: the creations' latency, the time until all are ready (bounded
# below by one heartbeat interval, when each node hears of its plan, plus
# the simulated install), the deletions', and the server's CPU and memory
# per phase (idle: the fleet's heartbeats alone, for 15 s before the
# creations).
# Environment (defaults):
#   INTERVAL=10        the default project's heartbeatIntervalSeconds
#   CONCURRENCY=16     cluster creations (and deletions) in flight
#   INSTALL=5s-20s     the simulated install time
#   TIMEOUT=600        seconds to wait for each phase
#   PROFILE=           1: print a CPU profile of the creations' first 20 s
#   API_PORT=18180, AGENT_PORT=18543, DEBUG_PORT (pprof, 16060)
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-1000}; shift || true
interval=${INTERVAL:-10}
concurrency=${CONCURRENCY:-16}
install=${INSTALL:-5s-20s}
limit=${TIMEOUT:-600}
dir=$(mktemp -d)
pgdb=; sampler=; sim=
api=127.0.0.1:${API_PORT:-18180}; agent=127.0.0.1:${AGENT_PORT:-18543}; debug=127.0.0.1:${DEBUG_PORT:-16060}
db=(); store=$dir/data
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
CGO_ENABLED=0 go build -o "$dir/seed" ./bench/seed
SOUTH=0 source bench/servers.sh
cleanup() {
	set +e
	[ -n "$sim" ] && kill "$sim" 2>/dev/null && wait "$sim" 2>/dev/null
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	stop_servers
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ "$engine" = postgres ]; then
	pgdb=eim_cl_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	store="postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable"
	db=(--database "$store")
fi
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)
start_servers
tok=$(cat "$dir/data/admin.token")
auth=(-H "Authorization: Bearer $tok" -H 'Content-Type: application/json')
os=$(curl -fsS "${auth[@]}" \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$api/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | jq -r .resourceId)
[ -n "$os" ] && [ "$os" != null ] || { echo "clusters: could not create the OS resource" >&2; exit 1; }
curl -fsS "${auth[@]}" -X PATCH -d "{\"heartbeatIntervalSeconds\":$interval}" "http://$api/v1/projects/default/settings" >/dev/null
stop_servers
"$dir/seed" --database "$store" --project default --nodes "$nodes" --os "$os" --out "$dir/nodes.jsonl" \
	>"$dir/seed.txt" 2>"$dir/seed.log" || { cat "$dir/seed.log"; echo "clusters: seeding failed" >&2; exit 1; }
start_servers
sample_servers >"$dir/samples.txt" &
sampler=$!

echo "engine: $engine; $nodes nodes and single-node clusters; heartbeat interval ${interval}s; simulated install $install; $concurrency requests in flight; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" --nodes-file "$dir/nodes.jsonl" --timeout 10m \
	--api "http://$api" --token-file "$dir/data/admin.token" --project default \
	--hold "$((limit * 3))s" --settle "$((interval * 2))s" --cluster-install-time "$install" \
	--report "$dir/report.json" "$@" >"$dir/report.txt" 2>"$dir/progress.txt" &
sim=$!
# Every node heartbeating (the settle phase over).
for _ in $(seq 1 $((limit * 2))); do
	grep -q '] steady:' "$dir/progress.txt" 2>/dev/null && break
	kill -0 "$sim" 2>/dev/null || { cat "$dir/progress.txt"; echo "clusters: the simulator ended" >&2; exit 1; }
	sleep 0.5
done

summary() { curl -fsS "${auth[@]}" "http://$api/v2/projects/default/clusters/summary"; }
# wait_for JQ_CONDITION: polls the summary every 0.25 s until it holds.
wait_for() {
	local t0 s
	t0=$(date +%s)
	while :; do
		s=$(summary) && [ "$(jq -r "$1" <<<"$s")" = true ] && return 0
		if [ $(($(date +%s) - t0)) -gt "$limit" ]; then echo "clusters: timed out; summary: $s" >&2; return 1; fi
		sleep 0.25
	done
}
# requests METHOD: one request per line of stdin (path, body), CONCURRENCY in
# flight; each line of the output is the status and the seconds it took.
requests() {
	local method=$1
	xargs -P "$concurrency" -L 1 sh -c 'curl -sS -o /dev/null -w "%{http_code} %{time_total}\n" -X "$0" -H "Authorization: Bearer $1" -H "Content-Type: application/json" ${3:+-d "$3"} "$2"' \
		"$method" "$tok"
}
latency() { # FILE WHAT
	sort -k2 -n "$1" | awk -v what="$2" '{ s[NR] = $2; if ($1 !~ /^2/) bad++ } END {
		printf "%s: %d requests, %d not 2xx; p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", what, NR, bad, s[int(NR * 0.5) + 1] * 1000, s[int(NR * 0.99) + 1] * 1000, s[NR] * 1000 }'
}
now() { date +%s.%N; }

# The fleet's heartbeats alone, for comparison.
i0=$(now)
sleep 15
t0=$(now)
# PROFILE=1: a CPU profile of the server over the first 20 s of the creations.
prof=
if [ -n "${PROFILE:-}" ]; then
	curl -fsS -o "$dir/create.pprof" "http://$debug/debug/pprof/profile?seconds=20" &
	prof=$!
fi
jq -r --arg api "$api" '"http://\($api)/v2/projects/default/clusters {\"name\":\"c-\(.hostId | ascii_downcase | gsub("[^a-z0-9]"; "-"))\",\"nodes\":[{\"id\":\"\(.hostId)\",\"role\":\"all\"}]}"' \
	"$dir/nodes.jsonl" | awk '{ print $1, "\x27" $2 "\x27" }' | requests POST >"$dir/create.txt"
t1=$(now)
wait_for ".ready == $nodes"
t2=$(now)
jq -r --arg api "$api" '"http://\($api)/v2/projects/default/clusters/c-\(.hostId | ascii_downcase | gsub("[^a-z0-9]"; "-"))"' \
	"$dir/nodes.jsonl" | requests DELETE >"$dir/delete.txt"
t3=$(now)
wait_for '.totalClusters == 0'
t4=$(now)

span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f s", b - a }'; }
echo
latency "$dir/create.txt" "POST /clusters"
echo "created in $(span "$t0" "$t1"); all $nodes ready $(span "$t0" "$t2") after the first creation"
latency "$dir/delete.txt" "DELETE /clusters/{name}"
echo "deleted in $(span "$t2" "$t3"); all gone $(span "$t2" "$t4") after the first deletion (the nodes' simulated removals)"
echo
echo "server resources per phase (CPU as cores; machine = all processes, $(nproc) cores):"
phase_resources idle "$i0" "$t0"
phase_resources create "$t0" "$t2"
phase_resources delete "$t2" "$t4"
final_resources
kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null || true; sim=
grep -E '^clusters:' "$dir/report.txt" || true
if [ -n "$prof" ] && wait "$prof" && [ -s "$dir/create.pprof" ]; then
	echo
	echo "server CPU profile, the first 20 s of the creations:"
	go tool pprof -top -cum -nodecount=60 "$dir/eim" "$dir/create.pprof" 2>/dev/null | tail -n +5 | grep -E 'Total|eim/|sqlite\.\(|pgx|crypto|gcBgMarkWorker' | head -45
fi
server_warnings
