#!/usr/bin/env bash
# Runs the Vercel AI SDK (ai, @ai-sdk/openai with its Responses and its chat model,
# @ai-sdk/anthropic) against a codexpool gateway, as CI does: builds codexpool, starts the origin
# simulator, a worker (embedded NATS) and a gateway on free loopback ports, then `npm ci` and
# check.mjs (a tool over two steps, streamed too, streamText and a structured object on each of
# the three routes). Everything it started is stopped on exit. Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=vercel-ai SIM_TOKEN=vercel-ai-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-vercel-ai-ci-$$"
start_gateway "$key"
echo "vercel-ai example: gateway http://$addr/v1, pool $nats_url, origin $origin"

npm_ci
CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" node check.mjs || fail "check.mjs failed"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "vercel-ai example: no key in the gateway's log"
