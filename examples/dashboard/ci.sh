#!/usr/bin/env bash
# Drives the gateway's dashboard (GET /dashboard) in real headless Chromium, as CI does: the Go
# test TestE2EDashboard (cmd/codexpool) starts NATS, the origin simulator with two accounts, two
# worker processes and a gateway process, loads the page and asserts on the rendered DOM, then
# saves a screenshot to $CODEXPOOL_ARTIFACTS/dashboard.png (default
# /tmp/codexpool-artifacts/dashboard.png). Chromium may try to reach hosts of its own, so the
# test runs inside a network namespace that has only loopback. Needs Go, root, `ip netns` and
# Debian's chromium (installed here with apt-get when missing). The namespace and every
# temporary file are removed on exit.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
ns="codexpool-r-dashboard-$$"
work=$(mktemp -d)
made_ns=""
cleanup() {
	if [ -n "$made_ns" ]; then ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true; ip netns del "$ns" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
source ../lib/prebuilt.sh

need=""
command -v chromium >/dev/null 2>&1 || need="$need chromium"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
if [ -n "$need" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need) >"$work/apt.log" 2>&1 ||
		{ echo "dashboard example: FAIL: apt-get install$need:" >&2; tail -20 "$work/apt.log" >&2; exit 1; }
fi
chrome=$(command -v chromium) || { echo "dashboard example: FAIL: no chromium (apt-get install chromium)" >&2; exit 1; }
if ! ip netns add "$ns" 2>"$work/netns.err"; then
	echo "dashboard example: FAIL: cannot create a network namespace here ($(cat "$work/netns.err")); the browser is only run without outside network (run as root)" >&2
	exit 1
fi
made_ns=1
ip netns exec "$ns" ip link set lo up

# Build the test binary outside the namespace (the module cache is there); inside, nothing may
# need the network: its TestMain builds codexpool from the same cache.
cmdtest=$(cmd_test_bin)
artifacts="${CODEXPOOL_ARTIFACTS:-/tmp/codexpool-artifacts}"
mkdir -p "$artifacts"
cd "$root/cmd/codexpool"
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" \
	CODEXPOOL_TEST_CHROMIUM="$chrome" CODEXPOOL_ARTIFACTS="$artifacts" \
	"$cmdtest" -test.run '^TestE2EDashboard$' -test.v -test.count=1
echo "dashboard example: screenshot at $artifacts/dashboard.png"
