#!/usr/bin/env bash
# Day-0 benchmark: N simulated nodes pre-registered, onboarded, provisioned and
# RUNNING against real eim server processes on loopback.
#   bench/day0.sh                  SQLite, 10,000 nodes
#   bench/day0.sh postgres 2000    PostgreSQL (a fresh database on 127.0.0.1:5432)
#   SOUTH=3 bench/day0.sh postgres 10000
#                                  the modules apart: the nodes' modules in 3
#                                  processes behind a round-robin balancer
#                                  (bench/servers.sh)
# Extra arguments after the node count go to "eim-agent simulate"
# (e.g. --fail-share 0.05 --reboot-share 0.05 --action-time 50ms).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-10000}; shift || true
dir=$(mktemp -d)
pgdb=; sampler=
api=127.0.0.1:${API_PORT:-18080}; agent=127.0.0.1:${AGENT_PORT:-18443}; debug=127.0.0.1:${DEBUG_PORT:-16061}
db=()
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
source bench/servers.sh
cleanup() {
	set +e
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
	stop_servers
	stop_lbs
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
if [ "$engine" = postgres ]; then
	pgdb=eim_day0_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	db=(--database "postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable")
fi
# A tiny "OS image", served by the server itself from its boot artifacts.
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)
start_servers
sample_servers >"$dir/samples.txt" &
sampler=$!
tok=$(cat "$dir/data/admin.token")
os=$(curl -fsS -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$boot/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | sed -n 's/.*"resourceId":"\([^"]*\)".*/\1/p')
[ -n "$os" ] || { echo "day0: could not create the OS resource" >&2; exit 1; }
echo "engine: $engine; nodes: $nodes; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
describe_servers
# Registration (REST, one host and one instance per node) is timed apart
# from the Day-0 flow the simulator measures. The pprof of the (first
# node-facing) server is on 127.0.0.1:16061 (DEBUG_PORT).
rc=0
t0=$(date +%s.%N)
/usr/bin/time -f "simulator: %e s wall (including registration), %U s user, %S s sys, %M KiB max RSS" \
	"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" --nodes "$nodes" \
	--register --api "http://$api" --token-file "$dir/data/admin.token" --project default --os "$os" \
	--exit-after-day0 "$@" >"$dir/report.txt" || rc=$?
t1=$(date +%s.%N)
cat "$dir/report.txt"
echo "server resources over the run (registration and Day 0; CPU as cores; machine = all processes, $(nproc) cores):"
phase_resources run "$t0" "$t1"
final_resources
if [ -n "$pgdb" ]; then
	# The CPU of the servers' PostgreSQL backends (they end with the servers).
	ps -eo cputimes=,args= | awk -v db="$pgdb" '$0 ~ "postgres: .*postgres " db " " {s += $1; n++} END {printf "postgresql: %d backends, CPU time %d s\n", n, s}'
fi
server_warnings
exit $rc
