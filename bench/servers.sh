# The eim server processes of a benchmark, sourced by day0.sh and
# heartbeat.sh. Before sourcing: dir (the run's temporary directory, where
# eim is built), api and agent (host:port the load generator uses), db (the
# --database flag array) and engine.
#
# SOUTH unset or 0: one process with every module (the all-in-one shape).
# SOUTH=N (PostgreSQL only): the modules apart, as a scaled-out deployment:
#   core     --modules api,os,exporter on $api
#   south1…N --modules onboarding,provisioning,host,maintenance,telemetry
#            (or $SOUTH_MODULES), each on ports of its own (API port + 10·i, agent port + 10·i),
#            behind round-robin TCP balancers (bench/lb) on $agent (the
#            nodes' calls) and on $boot (the /boot/ artifacts).
# Every process's CPU and memory are sampled every second (sample_servers).
# SOUTH_CONNS (default 16): --database-max-conns of each process when apart,
# to stay within PostgreSQL's 100 connections.

south=${SOUTH:-0}
# SOUTH_MODULES: the south processes' modules (bench/rollout.sh: host,workloads).
south_modules=${SOUTH_MODULES:-onboarding,provisioning,host,maintenance,telemetry}
boot=$api
if [ "$south" -gt 0 ]; then
	[ "$engine" = postgres ] || { echo "SOUTH=$south needs postgres: replicas share a PostgreSQL" >&2; exit 2; }
	CGO_ENABLED=0 go build -o "$dir/lb" ./bench/lb
	boot=127.0.0.1:${BOOT_PORT:-18280}
fi
names=(); pids=(); lbs=()

port_of() { echo "${1##*:}"; }

# wait_ready NAME HTTP_ADDR: until the process answers /readyz (its loops
# running: the host module's liveness restored) and the admin token exists.
wait_ready() {
	local name=$1 addr=$2 pid=$3
	for _ in $(seq 1 1500); do
		kill -0 "$pid" 2>/dev/null || break
		curl -fsS -o /dev/null "http://$addr/readyz" 2>/dev/null && [ -s "$dir/data/admin.token" ] && return 0
		sleep 0.2
	done
	cat "$dir/$name.log"
	echo "bench: $name did not become ready" >&2
	exit 1
}

# start_one NAME HTTP_ADDR [flags…]
start_one() {
	local name=$1 addr=$2; shift 2
	"$dir/eim" server --data-dir "$dir/data" --http-addr "$addr" --boot-artifacts "$dir/boot" \
		--log-level warn --rate-limit 0 ${EIM_BENCH_SERVER_FLAGS:-} "${db[@]}" "$@" >"$dir/$name.log" 2>&1 &
	local pid=$!
	names+=("$name"); pids+=("$pid")
	wait_ready "$name" "$addr" "$pid"
}

# start_south I NAME: the I-th south process (from 1), named NAME.
start_south() {
	local i=$1 name=$2
	local h=127.0.0.1:$(($(port_of "$api") + 10 * i)) a=127.0.0.1:$(($(port_of "$agent") + 10 * i))
	# The profile (heartbeat.sh) is of the first node-facing process.
	local dbg=()
	[ "$i" = 1 ] && [ -n "${debug:-}" ] && dbg=(--debug-addr "$debug")
	start_one "$name" "$h" --modules "$south_modules" --agent-addr "$a" --agent-url "https://$agent" \
		--database-max-conns "${SOUTH_CONNS:-16}" "${dbg[@]}"
}

start_servers() {
	names=(); pids=()
	if [ "$south" -eq 0 ]; then
		start_one server "$api" --agent-addr "$agent" ${debug:+--debug-addr "$debug"}
		return
	fi
	start_one core "$api" --modules api,os,exporter --database-max-conns "${SOUTH_CONNS:-16}"
	local agents=() boots=()
	for i in $(seq 1 "$south"); do
		start_south "$i" "south$i"
		agents+=("127.0.0.1:$(($(port_of "$agent") + 10 * i))"); boots+=("127.0.0.1:$(($(port_of "$api") + 10 * i))")
	done
	if [ ${#lbs[@]} -eq 0 ]; then
		"$dir/lb" --listen "$agent" --to "$(IFS=,; echo "${agents[*]}")" >"$dir/lb-agent.log" 2>&1 &
		lbs+=($!)
		"$dir/lb" --listen "$boot" --to "$(IFS=,; echo "${boots[*]}")" >"$dir/lb-boot.log" 2>&1 &
		lbs+=($!)
	fi
}

stop_servers() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	pids=()
}

stop_lbs() {
	local p
	for p in "${lbs[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	lbs=()
}

# describe_servers: one line of what runs.
describe_servers() {
	if [ "$south" -eq 0 ]; then
		echo "servers: one process, every module"
	else
		echo "servers: core (api,os,exporter) + $south × ($south_modules) behind a round-robin TCP balancer, --database-max-conns ${SOUTH_CONNS:-16} each"
	fi
}

# sample_servers: one line a second per process: name, time, ticks
# (utime+stime), VmRSS, VmHWM (KiB), machine busy ticks (all CPUs, from
# /proc/stat: everything but idle and iowait), RssAnon and
# RssFile+RssShmem (KiB: pages of the SQLite database file mapped by its
# page cache count in VmRSS). Runs until every process is gone.
sample_servers() {
	local i n t ticks mem busy alive
	while :; do
		alive=0
		t=$(date +%s.%N)
		busy=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
		for i in "${!pids[@]}"; do
			n=${names[$i]}
			ticks=$(awk '{print $14+$15}' "/proc/${pids[$i]}/stat" 2>/dev/null) || continue
			mem=$(awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} /^RssAnon/{a=$2} /^Rss(File|Shmem)/{f+=$2} END{print r, h, a, f}' "/proc/${pids[$i]}/status" 2>/dev/null) || continue
			set -- $mem
			echo "$n $t $ticks $1 $2 $busy $3 $4"
			alive=1
		done
		[ "$alive" = 1 ] || break
		sleep 1
	done
}

# phase_resources NAME FROM TO: each process's CPU (cores) and memory over
# the interval [FROM, TO] (Unix seconds) of the samples file, and the sum.
phase_resources() {
	local name=$1 from=$2 to=$3
	awk -v phase="$name" -v from="$from" -v to="$to" -v hz="$(getconf CLK_TCK)" '
		$2 >= from && $2 <= to {
			p = $1
			if (!(p in n)) { order[++np] = p; t0[p] = $2; c0[p] = $3; b0[p] = $6 }
			t1[p] = $2; c1[p] = $3; b1[p] = $6; n[p]++
			rss[p] += $4; if ($4 > rssmax[p]) rssmax[p] = $4; hwm[p] = $5
			if ($7 > anonmax[p]) anonmax[p] = $7; if ($8 > filemax[p]) filemax[p] = $8
		}
		END {
			for (k = 1; k <= np; k++) {
				p = order[k]
				if (n[p] < 2) { printf "  %-8s %-7s too short to sample\n", phase, p; continue }
				d = t1[p] - t0[p]; cpu = (c1[p] - c0[p]) / hz / d
				printf "  %-8s %-7s %6.0f s: CPU %.2f cores, RSS mean %.0f MiB / max %.0f MiB (anonymous max %.0f, file max %.0f), HWM %.0f MiB; machine busy %.2f cores\n",
					phase, p, d, cpu, rss[p] / n[p] / 1024, rssmax[p] / 1024, anonmax[p] / 1024, filemax[p] / 1024, hwm[p] / 1024, (b1[p] - b0[p]) / hz / d
				tc += cpu; tr += rss[p] / n[p]
			}
			if (np > 1) printf "  %-8s %-7s CPU %.2f cores, RSS mean %.0f MiB (all processes)\n", phase, "total", tc, tr / 1024
		}' "$dir/samples.txt"
}

# final_resources: each process's CPU time and peak RSS (VmHWM), now.
final_resources() {
	local i
	for i in "${!pids[@]}"; do
		awk -v n="${names[$i]}" -v hz="$(getconf CLK_TCK)" '{ printf "%s: CPU time %.0f s", n, ($14 + $15) / hz }' "/proc/${pids[$i]}/stat" 2>/dev/null
		awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } END { printf ", RSS %.0f MiB, peak RSS (VmHWM) %.0f MiB\n", r / 1024, h / 1024 }' "/proc/${pids[$i]}/status" 2>/dev/null
	done
}

# server_warnings: the most frequent warnings and errors of every process.
server_warnings() {
	local n
	for n in "${names[@]}"; do
		grep -iE "level=(error|warn)" "$dir/$n.log" | sed -E "s/^time=[^ ]+ /$n: /" | sort | uniq -c | sort -rn | head -5 || true
	done
}
