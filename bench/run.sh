#!/usr/bin/env bash
# Runs the API load benchmark against a real eim server process on loopback.
#   bench/run.sh            SQLite in a temp data dir
#   bench/run.sh postgres   PostgreSQL (a fresh database on 127.0.0.1:5432)
# The API listens on 127.0.0.1:${API_PORT:-18080}.
# Extra arguments after the engine go to apiload (e.g. --hosts 20000).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:-sqlite}; shift || true
dir=$(mktemp -d)
srv=; pgdb=
cleanup() {
	[ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null; }
	[ -n "$pgdb" ] && psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb"
	rm -rf "$dir"
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/apiload" ./bench/apiload
db=()
if [ "$engine" = postgres ]; then
	pgdb=eim_bench_$$
	psql -h 127.0.0.1 -U postgres -d test -qc "DROP DATABASE IF EXISTS $pgdb" -c "CREATE DATABASE $pgdb"
	db=(--database "postgres://postgres@127.0.0.1:5432/$pgdb?sslmode=disable")
fi
"$dir/eim" server --data-dir "$dir/data" --http-addr 127.0.0.1:${API_PORT:-18080} --agent-addr 127.0.0.1:0 --log-level warn --rate-limit 0 ${EIM_BENCH_SERVER_FLAGS:-} "${db[@]}" >"$dir/server.log" 2>&1 &
srv=$!
for _ in $(seq 1 100); do [ -s "$dir/data/admin.token" ] && curl -fs http://127.0.0.1:${API_PORT:-18080}/healthz >/dev/null && break; sleep 0.2; done
echo "engine: $engine; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version)"
/usr/bin/time -f "load tool: %e s wall, %U s user, %S s sys, %M KiB max RSS" "$dir/apiload" --server-pid "$srv" --server http://127.0.0.1:${API_PORT:-18080} --token-file "$dir/data/admin.token" "$@"
ps -o rss=,time= -p $srv | awk '{printf "server: RSS %.0f MiB, CPU time %s\n", $1/1024, $2}'
