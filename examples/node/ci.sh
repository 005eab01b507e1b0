#!/usr/bin/env bash
# Runs the Node example against a real pool, as CI does: builds codexpool, starts the origin
# simulator and a worker (embedded NATS) on free loopback ports, then `npm ci` and check.mjs.
# Everything it started is stopped on exit. Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "node example: $*" >&2
	for f in "$work"/*.log; do echo "--- $f"; tail -n 30 "$f"; done >&2
	exit 1
}

# wait_for FILE PATTERN: waits up to 60 s for a line matching PATTERN in FILE and prints it.
wait_for() {
	for _ in $(seq 600); do
		if line=$(grep -m1 -E "$2" "$1" 2>/dev/null); then
			echo "$line"
			return 0
		fi
		sleep 0.1
	done
	fail "no line matching '$2' in $1 after 60s"
}

(cd ../.. && go build -o "$work/codexpool" ./cmd/codexpool)

"$work/codexpool" sim --addr 127.0.0.1:0 --token node-ci --latency 200ms >"$work/sim.log" 2>&1 &
pids+=($!)
origin=$(wait_for "$work/sim.log" 'origin ws://' | sed -E 's/.*origin (ws:[^ ]+).*/\1/')

CODEXPOOL_CODEX_URL="$origin" CODEXPOOL_CODEX_TOKEN=node-ci CODEXPOOL_EMBEDDED_NATS_ADDR=127.0.0.1:0 \
	CODEXPOOL_METRICS_ADDR=127.0.0.1:0 CODEXPOOL_EMBEDDED_NATS_STORE="$work/store" CODEXPOOL_LOG_FORMAT=json CODEXPOOL_WORKER_ID=node-ci \
	"$work/codexpool" worker >"$work/worker.log" 2>&1 &
pids+=($!)
nats_url=$(wait_for "$work/worker.log" '"msg":"serving"' | sed -E 's/.*"nats":"([^"]+)".*/\1/')
echo "node example: worker serving on $nats_url, origin $origin"

npm ci --no-audit --no-fund --loglevel=error
CODEXPOOL_NATS_URL="$nats_url" node check.mjs || fail "check.mjs failed"
