#!/usr/bin/env bash
# Runs the OpenAI Agents SDK (@openai/agents) against a codexpool gateway, as CI does: builds
# codexpool, starts the origin simulator, a worker (embedded NATS) and a gateway on free loopback
# ports, then `npm ci` and check.mjs (a function tool and a handoff from a triage agent to a
# specialist, over the Responses API, Chat Completions and the Responses WebSocket). Tracing
# export is off (it would reach the OpenAI platform). Everything it started is stopped on exit.
# Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=openai-agents SIM_TOKEN=openai-agents-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-openai-agents-ci-$$"
start_gateway "$key"
echo "openai-agents example: gateway http://$addr/v1, pool $nats_url, origin $origin"

npm_ci
# The SDK's WebSocket transport needs Node's global WebSocket: behind a flag before Node 22.
node_flags=()
node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' || node_flags=(--experimental-websocket)
OPENAI_AGENTS_DISABLE_TRACING=1 CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" \
	node "${node_flags[@]}" check.mjs || fail "check.mjs failed"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
# The WebSocket cases must really have used the gateway's Responses WebSocket: two turns for each
# tool run (the call, the answer), four for the handoff (triage, specialist, then its tool loop).
turns=$(grep -c '"msg":"websocket turn"' "$work/gateway.log" || true)
[ "$turns" = 8 ] || fail "the gateway served $turns turns over a WebSocket, want 8 (the websocket cases)"
echo "openai-agents example: $turns turns over the gateway's Responses WebSocket; no key in the gateway's log"
