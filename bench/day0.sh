#!/usr/bin/env bash
# Day-0 benchmark: N simulated nodes pre-registered, onboarded, provisioned and
# RUNNING against one real eim server process on loopback.
#   bench/day0.sh                  SQLite, 10,000 nodes
#   bench/day0.sh postgres 2000    PostgreSQL (a fresh database on 127.0.0.1:5432)
# Extra arguments after the node count go to "eim-agent simulate"
# (e.g. --fail-share 0.05 --reboot-share 0.05 --action-time 50ms).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
nodes=${1:-10000}; shift || true
dir=$(mktemp -d)
srv=; pgdb=
api=127.0.0.1:18080; agent=127.0.0.1:18443
cleanup() {
	[ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	rm -rf "$dir"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-agent" ./cmd/eim-agent
db=()
if [ "$engine" = postgres ]; then
	pgdb=eim_day0_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	db=(--database "postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable")
fi
# A tiny "OS image", served by the server itself from its boot artifacts.
mkdir -p "$dir/boot"
head -c 4096 /dev/urandom >"$dir/boot/os.img"
sha=$(sha256sum "$dir/boot/os.img" | cut -d' ' -f1)
"$dir/eim" server --data-dir "$dir/data" --http-addr "$api" --agent-addr "$agent" \
	--boot-artifacts "$dir/boot" --log-level warn --rate-limit 0 ${EIM_BENCH_SERVER_FLAGS:-} "${db[@]}" >"$dir/server.log" 2>&1 &
srv=$!
for _ in $(seq 1 150); do grep -q "serving agents" "$dir/server.log" && [ -s "$dir/data/admin.token" ] && break; sleep 0.2; done
grep -q "serving agents" "$dir/server.log" || { cat "$dir/server.log"; echo "day0: server did not start" >&2; exit 1; }
tok=$(cat "$dir/data/admin.token")
os=$(curl -fsS -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
	-d "{\"name\":\"bench-os\",\"profileName\":\"bench-os\",\"imageUrl\":\"http://$api/boot/artifacts/os.img\",\"sha256\":\"$sha\"}" \
	"http://$api/v1/projects/default/compute/os" | sed -n 's/.*"resourceId":"\([^"]*\)".*/\1/p')
[ -n "$os" ] || { echo "day0: could not create the OS resource" >&2; exit 1; }
echo "engine: $engine; nodes: $nodes; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
# Registration (REST, one host and one instance per node) is timed apart
# from the Day-0 flow the simulator measures.
rc=0
/usr/bin/time -f "simulator: %e s wall (including registration), %U s user, %S s sys, %M KiB max RSS" \
	"$dir/eim-agent" simulate --server "https://$agent" --ca "$dir/data/ca.crt" --nodes "$nodes" \
	--register --api "http://$api" --token-file "$dir/data/admin.token" --project default --os "$os" \
	"$@" >"$dir/report.txt" || rc=$?
cat "$dir/report.txt"
ps -o rss=,time= -p $srv | awk '{printf "server: RSS %.0f MiB, CPU time %s\n", $1/1024, $2}'
awk '/^VmHWM/ {printf "server: peak RSS (VmHWM) %.0f MiB\n", $2/1024}' "/proc/$srv/status"
if [ -n "$pgdb" ]; then
	# The CPU of the server's PostgreSQL backends (they end with the server).
	ps -eo cputimes=,args= | awk -v db="$pgdb" '$0 ~ "postgres: .*postgres " db " " {s += $1; n++} END {printf "postgresql: %d backends, CPU time %d s\n", n, s}'
fi
grep -iE "level=(error|warn)" "$dir/server.log" | sort | uniq -c | sort -rn | head -5 || true
exit $rc
