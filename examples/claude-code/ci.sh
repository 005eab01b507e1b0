#!/usr/bin/env bash
# Runs the real Claude Code CLI (`claude -p`, @anthropic-ai/claude-code from npm) with
# ANTHROPIC_BASE_URL at a codexpool gateway, a worker and the origin simulator behind it, as CI
# does: the Go test TestE2EClaudeCode (cmd/codexpool) starts them and the CLI ("Say hello", then a
# tool loop through the CLI's Bash tool), and TestE2EClaudeCodeWebSearch (the CLI's WebSearch tool, a
# search the simulator plays). The CLI tries to reach hosts of its own, so everything
# runs inside a network namespace that has only loopback; the test refuses to run anywhere else.
# Needs Go, Node >= 18, npm, root and `ip netns`; without them it fails with a message. The
# namespace and every temporary file are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
WHAT=claude-code
source ../lib/netns.sh

npm_ci
claude="$PWD/node_modules/.bin/claude"
"$claude" --version

# Build the test binary outside the namespace (the module cache is there); inside, nothing may
# need the network: its TestMain builds codexpool from the same cache.
cmdtest=$(cmd_test_bin)
cd "$root/cmd/codexpool"
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" \
	CODEXPOOL_TEST_CLAUDE_CODE="$claude" "$cmdtest" -test.run '^TestE2EClaudeCode(WebSearch)?$' -test.v -test.count=1 |
	tee "$work/test.out"
# The tests skip without CODEXPOOL_TEST_CLAUDE_CODE (go test ./... elsewhere): here each must pass.
require_passed "$work/test.out" TestE2EClaudeCode TestE2EClaudeCodeWebSearch
