# Shared by the examples' CI scripts (source it): builds codexpool, starts the origin simulator
# and a worker (embedded NATS, its JetStream store in a temporary folder) on free loopback ports,
# and stops everything on exit. Set NAME (used in messages and the worker id) and SIM_TOKEN before
# sourcing; SIM_LATENCY defaults to 200ms. Afterwards $work, $origin, $nats_url and $codexpool are
# set, and fail, wait_for and start_gateway are defined. Needs Go.
set -euo pipefail
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

fail() {
	echo "$NAME example: $*" >&2
	for f in "$work"/*.log; do echo "--- $f"; tail -n 30 "$f"; done >&2
	exit 1
}

# wait_for FILE PATTERN: waits up to 60 s for a line matching PATTERN in FILE and prints it.
wait_for() {
	for _ in $(seq 600); do
		if line=$(grep -m1 -E "$2" "$1" 2>/dev/null); then
			echo "$line"
			return 0
		fi
		sleep 0.1
	done
	fail "no line matching '$2' in $1 after 60s"
}

# The embedded server's credential (nats-password) lives in the state directory; every codexpool
# command and the examples' clients read it from there.
export XDG_STATE_HOME="$work/state"

source "$(dirname "${BASH_SOURCE[0]}")/prebuilt.sh"
codexpool=$(codexpool_bin)

"$codexpool" sim --addr 127.0.0.1:0 --token "$SIM_TOKEN" --latency "${SIM_LATENCY:-200ms}" >"$work/sim.log" 2>&1 &
pids+=($!)
origin=$(wait_for "$work/sim.log" 'origin ws://' | sed -E 's/.*origin (ws:[^ ]+).*/\1/')

CODEXPOOL_CODEX_URL="$origin" CODEXPOOL_CODEX_TOKEN="$SIM_TOKEN" CODEXPOOL_EMBEDDED_NATS_ADDR=127.0.0.1:0 \
	CODEXPOOL_EMBEDDED_NATS_STORE="$work/store" CODEXPOOL_METRICS_ADDR=127.0.0.1:0 \
	CODEXPOOL_LOG_FORMAT=json CODEXPOOL_WORKER_ID="$NAME-ci" \
	"$codexpool" worker >"$work/worker.log" 2>&1 &
pids+=($!)
nats_url=$(wait_for "$work/worker.log" '"msg":"serving"' | sed -E 's/.*"nats":"([^"]+)".*/\1/')

# start_gateway KEY: starts a gateway on a free loopback port in front of the worker, taking the
# client key KEY, logging to $work/gateway.log; sets addr (host:port) and control (the origin
# simulator's control URL).
start_gateway() {
	CODEXPOOL_NATS_URL="$nats_url" CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0 CODEXPOOL_GATEWAY_KEYS="$1" \
		CODEXPOOL_LOG_FORMAT=json "$codexpool" gateway >"$work/gateway.log" 2>&1 &
	pids+=($!)
	addr=$(wait_for "$work/gateway.log" '"msg":"gateway listening"' | sed -E 's/.*"addr":"([^"]+)".*/\1/')
	control=$(wait_for "$work/sim.log" 'control http://' | sed -E 's/.*control (http:[^ ]+)\/stats.*/\1/')
}
