#!/usr/bin/env bash
# Chaos run (nightly-style, not a CI step): a 3-node JetStream cluster (real nats-server
# processes; the jobs stream, the results and credentials buckets at R3), 4 workers (the real
# binary) against the simulator with one login whose tokens expire every 60 s, and a 5,000-job
# `codexpool batch`, twice: once without faults, then while a worker is SIGKILLed every 15 s (and
# restarted at once) and one NATS node is SIGKILLed halfway through (restarted 10 s later). It
# checks, and exits 1 unless all hold:
#   - every job has a result, and each is the simulator's deterministic answer to its prompt;
#   - duplicates (generations the origin started beyond one a job) <= the jobs in flight at the
#     kills (the killed worker's codexpool_inflight just before each SIGKILL, every worker's at
#     the node kill);
#   - no request failed (so none from token expiry) and no refresh token was reused;
#   - the chaos batch's wall time <= 2x the fault-free one.
# Usage: scripts/chaos/run.sh [--jobs N] [--kill-every D_SECONDS] [--keep]
# Environment: SIM_LATENCY (1s), TOKEN_LIFETIME (60s), MAX_INFLIGHT per worker (8),
# JOBS_ACK_WAIT (15s), BASE_PORT (20 loopback ports from it). Needs Go, curl and jq.
NAME=chaos
jobs=5000 kill_every=15 workers=4
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) jobs=$2; shift 2 ;;
	--kill-every) kill_every=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) echo "usage: $0 [--jobs N] [--kill-every SECONDS] [--keep]" >&2; exit 2 ;;
	esac
done
source "$(dirname "$0")/../lib.sh"

build_all
seq "$jobs" | awk '{ printf "{\"input\":\"chaos job %d\"}\n", $1 }' >"$work/in.jsonl"
seq "$jobs" | sed 's/^/chaos job /' | "$work/bin/simanswer" | awk '{ print NR "\t200\t" $0 }' >"$work/expected.tsv"

# up DIR: the cluster, the simulator and the workers, all serving.
up() {
	local dir=$1 i
	mkdir -p "$dir"
	for i in 0 1 2; do start_node "$i" "$dir"; done
	wait_cluster
	start_sim "$dir"
	start_worker 1 "$dir" # the first creates the R3 stream and buckets; the others find them
	wait_serving 1 "$dir"
	for i in $(seq 2 "$workers"); do start_worker "$i" "$dir"; done
	for i in $(seq 2 "$workers"); do wait_serving "$i" "$dir"; done
}

# kill_worker I DIR: SIGKILL worker I (recording its jobs in flight) and start it again.
kill_worker() {
	local i=$1 dir=$2 n
	n=$(metric "$i" codexpool_inflight)
	kill -9 "${worker_pid[$i]}" 2>/dev/null || true
	wait "${worker_pid[$i]}" 2>/dev/null || true
	echo "$(date +%s) worker w$i inflight=${n:-0}" >>"$dir/kills.log"
	start_worker "$i" "$dir"
}

# kill_node DIR: SIGKILL node n1, recording every worker's jobs in flight.
kill_node() {
	local dir=$1 i sum=0 n
	for i in $(seq "$workers"); do
		n=$(metric "$i" codexpool_inflight)
		sum=$((sum + ${n:-0}))
	done
	kill -9 "${node_pid[1]}" 2>/dev/null || true
	wait "${node_pid[1]}" 2>/dev/null || true
	node_pid[1]=""
	echo "$(date +%s) node n1 inflight=$sum" >>"$dir/kills.log"
}

# chaos DIR BATCH_PID NODE_AT: the faults, until the batch ends.
chaos() {
	local dir=$1 bpid=$2 node_at=$3 t=0 next=1 node_back=-1
	: >"$dir/kills.log"
	while kill -0 "$bpid" 2>/dev/null; do
		sleep 1
		t=$((t + 1))
		if [ $((t % kill_every)) = 0 ]; then
			kill_worker "$next" "$dir"
			next=$((next % workers + 1))
		fi
		if [ "$t" = "$node_at" ]; then kill_node "$dir"; node_back=$((t + 10)); fi
		if [ "$t" = "$node_back" ]; then start_node 1 "$dir"; echo "$(date +%s) node n1 restarted" >>"$dir/kills.log"; fi
	done
}

# scenario MODE NODE_AT: one batch on a fresh stack; prints its wall time in ms to $dir/wall.
scenario() {
	local mode=$1 node_at=${2:-0} dir="$work/$1" t0 bpid rc=0
	up "$dir"
	say "$mode: cluster, simulator and $workers workers up; batch of $jobs jobs"
	t0=$(date +%s%N)
	"$work/bin/codexpool" batch --quiet --poll 5s --timeout 30m --nats "$(nats_urls)" "$work/in.jsonl" -o "$dir/out.jsonl" >"$dir/batch.log" 2>&1 &
	bpid=$!
	[ "$mode" = chaos ] && chaos "$dir" "$bpid" "$node_at"
	wait "$bpid" || rc=$?
	echo $((($(date +%s%N) - t0) / 1000000)) >"$dir/wall"
	sim_stats >"$dir/sim-stats.json"
	stop_all
	say "$mode: batch exit $rc in $(cat "$dir/wall") ms: $(tail -n 1 "$dir/batch.log")"
}

# check MODE: the results, the duplicates and the token figures of a scenario; 1 if any fails.
check() {
	local mode=$1 dir="$work/$1" bad=0 correct responses dups inflight unauthorized refresh_ok reused failed
	jq -r '[.line, .status, (.response.output_text // .error.message // "")] | @tsv' "$dir/out.jsonl" | sort -n >"$dir/got.tsv"
	correct=$(comm -12 <(sort "$work/expected.tsv") <(sort "$dir/got.tsv") | wc -l)
	failed=$(awk -F'\t' '$2 != 200' "$dir/got.tsv" | wc -l)
	responses=$(jq .responses "$dir/sim-stats.json")
	unauthorized=$(jq .unauthorized "$dir/sim-stats.json")
	refresh_ok=$(jq .refresh_ok "$dir/sim-stats.json")
	reused=$(jq '.refresh_reused + .refresh_invalidated' "$dir/sim-stats.json")
	dups=$((responses - jobs))
	inflight=0
	[ -f "$dir/kills.log" ] && inflight=$(grep -o 'inflight=[0-9]*' "$dir/kills.log" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
	inflight=${inflight:-0}
	say "$mode: $correct/$jobs jobs with the simulator's answer, $failed failed; origin generations $responses (duplicates $dups, in flight at the kills $inflight); refreshes ok $refresh_ok, reused/invalidated $reused, 401s at the origin $unauthorized"
	[ "$correct" = "$jobs" ] || { say "$mode: FAIL: $((jobs - correct)) jobs missing or wrong (first: $(comm -13 <(sort "$work/expected.tsv") <(sort "$dir/got.tsv") | head -n 3 | tr '\n' ' '))"; bad=1; }
	[ "$failed" = 0 ] || { say "$mode: FAIL: $failed failed requests"; bad=1; }
	[ "$dups" -le "$inflight" ] || { say "$mode: FAIL: $dups duplicates > $inflight jobs in flight at the kills"; bad=1; }
	[ "$reused" = 0 ] || { say "$mode: FAIL: a refresh token was reused or invalidated (the login's family revoked)"; bad=1; }
	return $bad
}

scenario clean
ok=0
check clean || ok=1
clean_ms=$(cat "$work/clean/wall")
scenario chaos $((clean_ms / 2000))
check chaos || ok=1
chaos_ms=$(cat "$work/chaos/wall")
kills=$(grep -c ' worker ' "$work/chaos/kills.log" || true)
say "wall: fault-free $clean_ms ms, chaos $chaos_ms ms (ratio $(awk -v a="$chaos_ms" -v b="$clean_ms" 'BEGIN { printf "%.2f", a / b }'), limit 2.00); $kills worker SIGKILLs, 1 node SIGKILL"
[ "$chaos_ms" -le $((2 * clean_ms)) ] || { say "FAIL: chaos wall time over 2x the fault-free one"; ok=1; }
[ "$ok" = 0 ] && say "PASS" || say "FAIL"
exit "$ok"
