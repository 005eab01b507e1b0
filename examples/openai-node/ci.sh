#!/usr/bin/env bash
# Runs the official OpenAI Node SDK against a codexpool gateway, as CI does: builds codexpool,
# starts the origin simulator, a worker (embedded NATS) and a gateway on free loopback ports, asks
# the pool directly (codexpool ask) for the answer to expect, then `npm ci` and check.mjs. The
# script counts the requests that reached the gateway to check that the SDK did not retry a
# usage limit. Everything it started is stopped on exit. Needs Go, Node >= 18 and npm.
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
	echo "openai-node example: $*" >&2
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

"$work/codexpool" sim --addr 127.0.0.1:0 --token node-ci --latency 100ms >"$work/sim.log" 2>&1 &
pids+=($!)
origin=$(wait_for "$work/sim.log" 'origin ws://' | sed -E 's/.*origin (ws:[^ ]+).*/\1/')

CODEXPOOL_CODEX_URL="$origin" CODEXPOOL_CODEX_TOKEN=node-ci CODEXPOOL_EMBEDDED_NATS_ADDR=127.0.0.1:0 \
	CODEXPOOL_LOG_FORMAT=json CODEXPOOL_WORKER_ID=openai-node-ci \
	"$work/codexpool" worker >"$work/worker.log" 2>&1 &
pids+=($!)
nats_url=$(wait_for "$work/worker.log" '"msg":"serving"' | sed -E 's/.*"nats":"([^"]+)".*/\1/')

key="sk-openai-node-ci-$$"
CODEXPOOL_NATS_URL="$nats_url" CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0 CODEXPOOL_GATEWAY_KEYS="$key" \
	CODEXPOOL_LOG_FORMAT=json "$work/codexpool" gateway >"$work/gateway.log" 2>&1 &
pids+=($!)
addr=$(wait_for "$work/gateway.log" '"msg":"gateway listening"' | sed -E 's/.*"addr":"([^"]+)".*/\1/')
echo "openai-node example: gateway http://$addr/v1, pool $nats_url, origin $origin"

expected=$(CODEXPOOL_NATS_URL="$nats_url" "$work/codexpool" ask "Say hello")

npm ci --no-audit --no-fund --loglevel=error
CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" CODEXPOOL_EXPECT_ANSWER="$expected" \
	node check.mjs || fail "check.mjs failed"

limited=$(grep -c '"code":"upstream_rate_limited"' "$work/gateway.log" || true)
[ "$limited" = 1 ] || fail "the usage-limit request reached the gateway $limited times, want 1 (the SDK must not retry it)"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "openai-node example: the usage limit reached the gateway once; no key in the gateway's log"
