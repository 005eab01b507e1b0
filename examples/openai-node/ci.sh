#!/usr/bin/env bash
# Runs the official OpenAI Node SDK against a codexpool gateway, as CI does: builds codexpool,
# starts the origin simulator, a worker (embedded NATS) and a gateway on free loopback ports, asks
# the pool directly (codexpool ask) for the answer to expect, then `npm ci`, check.mjs (the
# Responses API) and chat.mjs (chat.completions). The script counts the requests that reached the
# gateway to check that the SDK did not retry a usage limit. Everything it started is stopped on
# exit. Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=openai-node SIM_TOKEN=node-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-openai-node-ci-$$"
CODEXPOOL_NATS_URL="$nats_url" CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0 CODEXPOOL_GATEWAY_KEYS="$key" \
	CODEXPOOL_LOG_FORMAT=json "$codexpool" gateway >"$work/gateway.log" 2>&1 &
pids+=($!)
addr=$(wait_for "$work/gateway.log" '"msg":"gateway listening"' | sed -E 's/.*"addr":"([^"]+)".*/\1/')
echo "openai-node example: gateway http://$addr/v1, pool $nats_url, origin $origin"

expected=$(CODEXPOOL_NATS_URL="$nats_url" "$codexpool" ask "Say hello")

npm_ci
CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" CODEXPOOL_EXPECT_ANSWER="$expected" \
	node check.mjs || fail "check.mjs failed"
CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" node chat.mjs || fail "chat.mjs failed"

limited=$(grep -c '"code":"upstream_rate_limited"' "$work/gateway.log" || true)
[ "$limited" = 1 ] || fail "the usage-limit request reached the gateway $limited times, want 1 (the SDK must not retry it)"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "openai-node example: the usage limit reached the gateway once; no key in the gateway's log"
