#!/usr/bin/env bash
# Runs the real Codex CLI (`codex exec "Say hello"`, @openai/codex from npm) against a codexpool
# gateway configured as a custom model provider, with a worker and the origin simulator behind it,
# as CI does: the Go test TestE2ECodexCLI (cmd/codexpool) starts them and the CLI. The CLI tries to
# reach hosts of its own, so everything runs inside a network namespace that has only loopback;
# the test refuses to run anywhere else. Needs Go, Node >= 18, npm, root and `ip netns`; without
# the last two it fails with a message (examples/lib/netns.sh), never a skip. The namespace and every temporary file are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
WHAT=codex-cli
source ../lib/netns.sh

npm_ci
codex="$PWD/node_modules/.bin/codex"
"$codex" --version

# Build the test binary outside the namespace (the module cache is there); inside, nothing may
# need the network: its TestMain builds codexpool from the same cache.
cmdtest=$(cmd_test_bin)
cd "$root/cmd/codexpool"
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" \
	CODEXPOOL_TEST_CODEX_CLI="$codex" "$cmdtest" -test.run '^TestE2ECodexCLI(PoolQuota|WebSocket|Compact)?$' -test.v -test.count=1 |
	tee "$work/test.out"
# The tests skip without CODEXPOOL_TEST_CODEX_CLI (go test ./... elsewhere): here each must pass.
require_passed "$work/test.out" TestE2ECodexCLI TestE2ECodexCLIPoolQuota TestE2ECodexCLIWebSocket TestE2ECodexCLICompact
