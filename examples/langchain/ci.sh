#!/usr/bin/env bash
# Runs LangChain JS (@langchain/openai's ChatOpenAI) against a codexpool gateway, as CI does:
# builds codexpool, starts the origin simulator, a worker (embedded NATS) and a gateway on free
# loopback ports, then `npm ci` and check.mjs (bindTools, a tool call, its ToolMessage and the
# final answer, and .stream(), through Chat Completions and the Responses API). LangSmith tracing
# stays off. Everything it started is stopped on exit. Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=langchain SIM_TOKEN=langchain-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-langchain-ci-$$"
start_gateway "$key"
echo "langchain example: gateway http://$addr/v1, pool $nats_url, origin $origin"

npm_ci
LANGSMITH_TRACING=false LANGCHAIN_TRACING_V2=false CODEXPOOL_GATEWAY_URL="http://$addr/v1" CODEXPOOL_GATEWAY_KEY="$key" \
	node check.mjs || fail "check.mjs failed"
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "langchain example: no key in the gateway's log"
