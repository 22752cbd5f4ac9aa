#!/usr/bin/env bash
# The oob module at fleet scale, on simulated Redfish BMCs (eim-redfish-sim
# fleet: one BMC per host, each on its own HTTPS port on 127.0.0.1) and a
# real eim server process (SQLite, the oob profile):
#   1. power-on: N hosts (default 1,000) at one site, a limit of 20
#      power-ons per 10 s, 10 % of the BMCs dropping the first power-on:
#      every host ends ON, the limit is held in the BMCs' own records, each
#      dropped power-on is resent; wall time and the server's CPU.
#   2. poll: M BMCs (default 10,000) read every --oob-poll-every with
#      the default workers; the server's CPU per BMC read and per round.
#   bench/oobfleet.sh [N [M]]       PHASES="poweron poll" by default
# EIM_BENCH_SERVER_FLAGS adds flags to the server (e.g. --debug-addr
# 127.0.0.1:18098 to take a CPU profile).
# Needs an open files limit above M + a few hundred (ulimit -n).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
m=${2:-10000}
phases=${PHASES:-poweron poll}
dir=$(mktemp -d)
srv=; sim=
stop() {
	[ -n "$srv" ] && { kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null || true; }
	[ -n "$sim" ] && { kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null || true; }
	srv=; sim=
}
cleanup() {
	set +e
	stop
	if [ -n "${KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT
CGO_ENABLED=0 go build -o "$dir/eim" ./cmd/eim
CGO_ENABLED=0 go build -o "$dir/eim-redfish-sim" ./cmd/eim-redfish-sim
CGO_ENABLED=0 go build -o "$dir/oobfleet" ./bench/oobfleet
api=127.0.0.1:${API_PORT:-18080}
control=127.0.0.1:${FLEET_PORT:-18099}

# start_fleet N FLAGS…: the BMCs, their CSV and certificate.
start_fleet() {
	local count=$1; shift
	rm -f "$dir/bmcs.csv"
	"$dir/eim-redfish-sim" fleet -n "$count" -control "$control" -csv-out "$dir/bmcs.csv" -cert-out "$dir/ca.pem" "$@" 2>"$dir/fleet.log" &
	sim=$!
	for _ in $(seq 1 600); do grep -q "records at" "$dir/fleet.log" && return; kill -0 $sim || break; sleep 0.1; done
	cat "$dir/fleet.log" >&2; echo "oobfleet: the fleet did not start" >&2; exit 1
}
# start_server FLAGS…: eim server, oob profile, a fresh SQLite data dir.
start_server() {
	rm -rf "$dir/data"
	"$dir/eim" server --profile oob --data-dir "$dir/data" --http-addr "$api" --agent-addr 127.0.0.1:0 \
		--log-level warn --rate-limit 0 ${EIM_BENCH_SERVER_FLAGS:-} "$@" >"$dir/server.log" 2>&1 &
	srv=$!
	for _ in $(seq 1 300); do [ -s "$dir/data/admin.token" ] && curl -fs "http://$api/healthz" >/dev/null && return; sleep 0.2; done
	cat "$dir/server.log" >&2; echo "oobfleet: the server did not start" >&2; exit 1
}
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(go version); load average at the start $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"

if [[ " $phases " == *" poweron "* ]]; then
	limit=20 window=10s
	start_fleet "$n" -drop-share 0.1 -delay 2s
	# The default --oob-job-timeout (10 min): a job's time queued for a
	# slot does not count against it, however big the site.
	start_server --oob-site-limit $limit --oob-site-window $window --oob-workers 64
	echo "== power-on: $n hosts, one site, --oob-site-limit $limit --oob-site-window $window --oob-workers 64, 10 % of BMCs drop the first power-on, transitions 2 s"
	# Registered as desired OFF (their jobs find the machines off and send
	# nothing), so that the site is switched on by the PATCHes alone.
	"$dir/oobfleet" register --server "http://$api" --token-file "$dir/data/admin.token" --csv "$dir/bmcs.csv" --ca "$dir/ca.pem" --ids "$dir/ids.txt" --desired POWER_STATE_OFF
	sleep 5
	"$dir/oobfleet" poweron --server "http://$api" --token-file "$dir/data/admin.token" --ids "$dir/ids.txt" --fleet "http://$control" \
		--limit $limit --window $window --server-pid "$srv"
	echo "server warnings and errors: $(grep -c "level=WARN\|level=ERROR" "$dir/server.log" || true)"
	stop
fi

if [[ " $phases " == *" poll "* ]]; then
	every=${POLL_EVERY:-60s}
	start_fleet "$m" -on
	# The default workers: the poll sizes its reads at once to the fleet
	# (up to --oob-poll-workers, 256).
	start_server --oob-poll-every "$every"
	echo "== poll: $m BMCs (machines on), --oob-poll-every $every, default --oob-workers (4) and --oob-poll-workers (256)"
	"$dir/oobfleet" register --server "http://$api" --token-file "$dir/data/admin.token" --csv "$dir/bmcs.csv" --ca "$dir/ca.pem" --ids "$dir/ids.txt"
	"$dir/oobfleet" poll --fleet "http://$control" --n "$m" --for "${POLL_FOR:-3m}" --server-pid "$srv" --sim-pid "$sim"
	ps -o rss= -p "$srv" | awk '{printf "server RSS %.0f MiB\n", $1/1024}'
	echo "server warnings and errors: $(grep -c "level=WARN\|level=ERROR" "$dir/server.log" || true)"
	stop
fi
