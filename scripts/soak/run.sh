#!/usr/bin/env bash
# Soak run (not a CI step): a 3-node JetStream cluster, 4 workers (the real binary) against the
# simulator with one login whose tokens expire every 60 s, and a mixed load for --duration
# (default 30m): one-shot requests and streams (`codexpool ask`, several loops at once) and
# batches of durable jobs (`codexpool batch`). Every 5 s it samples each worker's RSS
# (/proc/PID/status) and goroutines (go_goroutines on its metrics endpoint). It checks, and exits
# 1 unless all hold:
#   - 0 failures: every request, stream and job answered with the simulator's answer to its prompt,
#     and no refresh token reused (the login's family revoked);
#   - RSS and goroutines flat: per worker, the mean of the last 5 minutes within 10 % of the mean
#     of the first 5 (with a --duration under 20m, the first and last quarter).
# Usage: scripts/soak/run.sh [--duration 30m] [--keep]
# Environment: SIM_LATENCY (200ms), TOKEN_LIFETIME (60s), ASK_LOOPS (4), STREAM_LOOPS (2),
# BATCH_JOBS (20 per batch), BATCH_PAUSE (1 s between batches), SAMPLE_EVERY (5 s), BASE_PORT. Needs Go, curl and jq.
NAME=soak
duration=30m
while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) echo "usage: $0 [--duration 30m] [--keep]" >&2; exit 2 ;;
	esac
done
SIM_LATENCY=${SIM_LATENCY:-200ms}
MAX_INFLIGHT=${MAX_INFLIGHT:-64}
source "$(dirname "$0")/../lib.sh"
case $duration in
*h) secs=$((${duration%h} * 3600)) ;; *m) secs=$((${duration%m} * 60)) ;; *s) secs=${duration%s} ;;
*) fail "--duration: want Ns, Nm or Nh, got $duration" ;;
esac
workers=4 ask_loops=${ASK_LOOPS:-4} stream_loops=${STREAM_LOOPS:-2} batch_jobs=${BATCH_JOBS:-20} batch_pause=${BATCH_PAUSE:-1}
window=$((secs >= 1200 ? 300 : secs / 4)) # seconds compared at each end

build_all
dir="$work/run"
mkdir -p "$dir/load"
for i in 0 1 2; do start_node "$i" "$dir"; done
wait_cluster
start_sim "$dir"
start_worker 1 "$dir"
wait_serving 1 "$dir"
for i in $(seq 2 "$workers"); do start_worker "$i" "$dir"; done
for i in $(seq 2 "$workers"); do wait_serving "$i" "$dir"; done
say "cluster, simulator and $workers workers up; load for $duration ($ask_loops ask loops, $stream_loops stream loops, batches of $batch_jobs jobs)"
end=$(($(date +%s) + secs))
cp_bin="$work/bin/codexpool"

# ask_loop NAME [--stream]: requests until the end, each line "prompt<TAB>exit<TAB>answer".
ask_loop() {
	local name=$1 n=0 out rc
	shift
	while [ "$(date +%s)" -lt "$end" ]; do
		n=$((n + 1))
		rc=0
		out=$("$cp_bin" ask --nats "$(nats_urls)" --timeout 60s "$@" "soak $name $n" 2>&1) || rc=$?
		printf 'soak %s %d\t%d\t%s\n' "$name" "$n" "$rc" "$(echo "$out" | tr '\n\t' '  ' | sed 's/ *$//')" >>"$dir/load/$name.tsv"
	done
}

# batch_loop: batches of batch_jobs jobs (a new --name each: new jobs), batch_pause apart, until
# the end: a steady trickle of jobs rather than bursts that would swamp the samples.
batch_loop() {
	local k=0 rc
	while [ "$(date +%s)" -lt "$end" ]; do
		k=$((k + 1))
		seq "$batch_jobs" | awk -v k="$k" '{ printf "{\"input\":\"soak batch %d job %d\"}\n", k, $1 }' >"$dir/load/batch-$k.jsonl"
		rc=0
		"$cp_bin" batch --quiet --poll 5s --timeout 10m --name "soak-$k" --nats "$(nats_urls)" \
			"$dir/load/batch-$k.jsonl" -o "$dir/load/batch-$k.out" >>"$dir/load/batch.log" 2>&1 || rc=$?
		echo "$k $rc" >>"$dir/load/batches"
		sleep "$batch_pause"
	done
}

# sample: every worker's RSS (kB) and goroutines, one line each: time worker rss goroutines.
sample() {
	local i t rss g
	t=$(date +%s)
	for i in $(seq "$workers"); do
		rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/${worker_pid[$i]}/status" 2>/dev/null || echo "")
		g=$(metric "$i" go_goroutines)
		echo "$t w$i ${rss:-NA} ${g:-NA}" >>"$dir/samples"
	done
}

loads=()
for l in $(seq "$ask_loops"); do ask_loop "ask$l" & loads+=($!); done
for l in $(seq "$stream_loops"); do ask_loop "stream$l" --stream & loads+=($!); done
batch_loop & loads+=($!)
start=$(date +%s)
while [ "$(date +%s)" -lt "$end" ]; do
	sample
	sleep "${SAMPLE_EVERY:-5}"
done
sample
for p in "${loads[@]}"; do wait "$p" || true; done
sim_stats >"$dir/sim-stats.json"

# The checks.
bad=0
cat "$dir"/load/ask*.tsv "$dir"/load/stream*.tsv 2>/dev/null | sort >"$dir/asks.tsv"
cut -f1 "$dir/asks.tsv" | "$work/bin/simanswer" | paste <(cut -f1 "$dir/asks.tsv") - >"$dir/expected.tsv"
asks=$(wc -l <"$dir/asks.tsv")
ask_bad=$(paste "$dir/asks.tsv" "$dir/expected.tsv" | awk -F'\t' '$2 != 0 || $3 != $5' | wc -l)
batches=$(wc -l <"$dir/load/batches")
batch_failed=$(awk '$2 != 0' "$dir/load/batches" | wc -l)
jobs_done=0 jobs_bad=0
for f in "$dir"/load/batch-*.out; do
	[ -f "$f" ] || continue
	jq -r '[.line, .status, (.response.output_text // .error.message // "")] | @tsv' "$f" | sort -n >"$f.tsv"
	k=${f##*/batch-}
	k=${k%.out}
	seq "$batch_jobs" | awk -v k="$k" '{ printf "soak batch %d job %d\n", k, $1 }' | "$work/bin/simanswer" | awk '{ print NR "\t200\t" $0 }' >"$f.want"
	jobs_done=$((jobs_done + $(wc -l <"$f.tsv")))
	jobs_bad=$((jobs_bad + $(comm -13 <(sort "$f.want") <(sort "$f.tsv") | wc -l) + $(comm -23 <(sort "$f.want") <(sort "$f.tsv") | wc -l)))
done
reused=$(jq '.refresh_reused + .refresh_invalidated' "$dir/sim-stats.json")
say "$asks requests and streams, $ask_bad failed or wrong; $batches batches ($jobs_done job results), $batch_failed batches failed, $jobs_bad job results wrong or missing; refreshes ok $(jq .refresh_ok "$dir/sim-stats.json"), reused/invalidated $reused, 401s at the origin $(jq .unauthorized "$dir/sim-stats.json")"
[ "$ask_bad" = 0 ] || { say "FAIL: $ask_bad requests failed or wrong (first: $(paste "$dir/asks.tsv" "$dir/expected.tsv" | awk -F'\t' '$2 != 0 || $3 != $5' | head -n 2 | tr '\n\t' '  '))"; bad=1; }
[ "$batch_failed" = 0 ] && [ "$jobs_bad" = 0 ] || { say "FAIL: jobs failed or wrong"; bad=1; }
[ "$reused" = 0 ] || { say "FAIL: a refresh token was reused or invalidated"; bad=1; }

# flat COLUMN WHAT: per worker, the mean of the first and the last window; 1 if any drifts > 10 %.
flat() {
	local col=$1 what=$2
	awk -v c="$col" -v s="$start" -v e="$(date +%s)" -v w="$window" -v what="$what" '
		$c != "NA" && $1 <= s + w { f[$2] += $c; fn[$2]++ }
		$c != "NA" && $1 >= e - w { l[$2] += $c; ln[$2]++ }
		END {
			bad = 0
			for (k in f) {
				a = f[k] / fn[k]; b = (ln[k] ? l[k] / ln[k] : 0)
				d = (b - a) / a * 100
				printf "soak: %s %s: first %ds mean %.0f, last %ds mean %.0f (%+.1f %%)\n", what, k, w, a, w, b, d
				if (d > 10 || d < -10 || !ln[k]) bad = 1
			}
			exit bad
		}' "$dir/samples"
}
flat 3 "RSS kB" || { say "FAIL: RSS not flat"; bad=1; }
flat 4 goroutines || { say "FAIL: goroutines not flat"; bad=1; }
[ "$bad" = 0 ] && say "PASS ($duration)" || say "FAIL ($duration)"
exit "$bad"
