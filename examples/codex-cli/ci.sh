#!/usr/bin/env bash
# Runs the real Codex CLI (`codex exec "Say hello"`, @openai/codex from npm) against a codexpool
# gateway configured as a custom model provider, with a worker and the origin simulator behind it,
# as CI does: the Go test TestE2ECodexCLI (cmd/codexpool) starts them and the CLI. The CLI tries to
# reach hosts of its own, so everything runs inside a network namespace that has only loopback;
# the test refuses to run anywhere else. Needs Go, Node >= 18, npm, root and `ip netns`; without
# the last two it skips with a message. The namespace and every temporary file are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
ns="codexpool-cli-$$"
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
	echo "codex-cli example: FAIL: no 'ip' command (iproute2) to make a loopback-only network namespace; the Codex CLI is only run without outside network" >&2
	exit 1
fi
if ! ip netns add "$ns" 2>"$work/netns.err"; then
	echo "codex-cli example: FAIL: cannot create a network namespace here ($(cat "$work/netns.err")); the Codex CLI is only run without outside network (run as root)" >&2
	exit 1
fi
made_ns=1
ip netns exec "$ns" ip link set lo up

npm ci --no-audit --no-fund --loglevel=error
codex="$PWD/node_modules/.bin/codex"
"$codex" --version

# Build the test binary outside the namespace (the module cache is there); inside, nothing may
# need the network: its TestMain builds codexpool from the same cache.
(cd "$root" && go test -c -o "$work/cmd.test" ./cmd/codexpool)
cd "$root/cmd/codexpool"
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" \
	CODEXPOOL_TEST_CODEX_CLI="$codex" "$work/cmd.test" -test.run '^TestE2ECodexCLI(PoolQuota|WebSocket)?$' -test.v -test.count=1
