#!/usr/bin/env bash
# Runs the real Claude Code CLI (`claude -p`, @anthropic-ai/claude-code from npm) with
# ANTHROPIC_BASE_URL at a codexpool gateway, a worker and the origin simulator behind it, as CI
# does: the Go test TestE2EClaudeCode (cmd/codexpool) starts them and the CLI ("Say hello", then a
# tool loop through the CLI's Bash tool). The CLI tries to reach hosts of its own, so everything
# runs inside a network namespace that has only loopback; the test refuses to run anywhere else.
# Needs Go, Node >= 18, npm, root and `ip netns`; without them it fails with a message. The
# namespace and every temporary file are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
ns="codexpool-claude-$$"
work=$(mktemp -d)
made_ns=""
cleanup() {
	if [ -n "$made_ns" ]; then ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	(apt-get update -qq && apt-get install -y -qq iproute2) >/dev/null 2>&1 || true
fi
if ! command -v ip >/dev/null 2>&1; then
	echo "claude-code example: FAIL: no 'ip' command (iproute2) to make a loopback-only network namespace; Claude Code is only run without outside network" >&2
	exit 1
fi
if ! ip netns add "$ns" 2>"$work/netns.err"; then
	echo "claude-code example: FAIL: cannot create a network namespace here ($(cat "$work/netns.err")); Claude Code is only run without outside network (run as root)" >&2
	exit 1
fi
made_ns=1
ip netns exec "$ns" ip link set lo up

npm ci --no-audit --no-fund --loglevel=error
claude="$PWD/node_modules/.bin/claude"
"$claude" --version

# Build the test binary outside the namespace (the module cache is there); inside, nothing may
# need the network: its TestMain builds codexpool from the same cache.
(cd "$root" && go test -c -o "$work/cmd.test" ./cmd/codexpool)
cd "$root/cmd/codexpool"
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" \
	CODEXPOOL_TEST_CLAUDE_CODE="$claude" "$work/cmd.test" -test.run '^TestE2EClaudeCode$' -test.v -test.count=1
