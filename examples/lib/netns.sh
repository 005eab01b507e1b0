# Sourced by the example CI scripts that run a real client which tries to reach hosts of its own
# (the Codex CLI, Claude Code, Chromium): makes a network namespace with only loopback in it and
# removes it, and every process in it, on exit. Set WHAT (a name for messages) before sourcing;
# it sets ns (the namespace) and work (a temporary folder, removed on exit). Needs root and `ip`
# (iproute2, installed with apt-get when missing); without them it fails with a message, never a
# skip: these clients are only ever run without outside network.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ns="codexpool-${WHAT// /-}-$$"
work=$(mktemp -d)
made_ns=""
cleanup() {
	if [ -n "$made_ns" ]; then ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
source "$root/examples/lib/prebuilt.sh"

if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	(apt-get update -qq && apt-get install -y -qq iproute2) >/dev/null 2>&1 || true
fi
if ! command -v ip >/dev/null 2>&1; then
	echo "$WHAT example: FAIL: no 'ip' command (iproute2) to make a loopback-only network namespace; $WHAT is only run without outside network" >&2
	exit 1
fi
if ! ip netns add "$ns" 2>"$work/netns.err"; then
	echo "$WHAT example: FAIL: cannot create a network namespace here ($(cat "$work/netns.err")); $WHAT is only run without outside network (run as root)" >&2
	exit 1
fi
made_ns=1
ip netns exec "$ns" ip link set lo up

# require_passed OUT NAME...: fails unless the verbose test output OUT shows every test NAME
# passed. A test that skipped, or a -test.run that matched nothing, exits 0: here it fails.
require_passed() {
	local out=$1 name
	shift
	for name in "$@"; do
		grep -q "^--- PASS: $name " "$out" || {
			echo "FAIL: $name did not run and pass (skipped, or not found)" >&2
			exit 1
		}
	done
}
