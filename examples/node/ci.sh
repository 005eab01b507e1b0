#!/usr/bin/env bash
# Runs the Node example against a real pool, as CI does: builds codexpool, starts the origin
# simulator and a worker (embedded NATS) on free loopback ports, then `npm ci` and check.mjs.
# Everything it started is stopped on exit. Needs Go, Node >= 18 and npm.
set -euo pipefail
cd "$(dirname "$0")"
NAME=node SIM_TOKEN=node-ci SIM_LATENCY=200ms
source ../lib/pool.sh
echo "node example: worker serving on $nats_url, origin $origin"

npm_ci
CODEXPOOL_NATS_URL="$nats_url" node check.mjs || fail "check.mjs failed"
