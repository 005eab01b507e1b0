#!/usr/bin/env bash
# Runs the official Anthropic TypeScript SDK against a codexpool gateway, as CI does: builds
# codexpool, starts the origin simulator, a worker (embedded NATS) and a gateway on free loopback
# ports, then `npm ci` and check.mjs. The script counts the requests that reached the gateway to
# check that the SDK did not retry a usage limit. Everything it started is stopped on exit. Needs
# Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=anthropic-node SIM_TOKEN=anthropic-node-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-anthropic-node-ci-$$"
CODEXPOOL_NATS_URL="$nats_url" CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0 CODEXPOOL_GATEWAY_KEYS="$key" \
	CODEXPOOL_LOG_FORMAT=json "$codexpool" gateway >"$work/gateway.log" 2>&1 &
pids+=($!)
addr=$(wait_for "$work/gateway.log" '"msg":"gateway listening"' | sed -E 's/.*"addr":"([^"]+)".*/\1/')
control=$(wait_for "$work/sim.log" 'control http://' | sed -E 's/.*control (http:[^ ]+)\/stats.*/\1/')
echo "anthropic-node example: gateway http://$addr, pool $nats_url, origin $origin"

npm_ci
CODEXPOOL_GATEWAY_URL="http://$addr" CODEXPOOL_GATEWAY_KEY="$key" CODEXPOOL_SIM_CONTROL="$control" \
	node check.mjs || fail "check.mjs failed"

limited=$(grep -c '"code":"upstream_rate_limited"' "$work/gateway.log" || true)
[ "$limited" = 1 ] || fail "the usage-limit request reached the gateway $limited times, want 1 (the SDK must not retry it)"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "anthropic-node example: the usage limit reached the gateway once; no key in the gateway's log"
