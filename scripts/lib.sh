# Shared by scripts/chaos/run.sh and scripts/soak/run.sh (source it, after setting NAME): builds
# codexpool, nats-server (from the Go module cache, at go.mod's version) and simanswer; starts a
# 3-node JetStream cluster, the origin simulator with one login whose tokens expire after
# $TOKEN_LIFETIME, and workers (the real binary), all on loopback ports; stops everything it
# started on exit. Needs Go, curl and jq.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${WORK:-$(mktemp -d "/tmp/codexpool-$NAME.XXXXXX")}
mkdir -p "$work"
base=${BASE_PORT:-$((21000 + ($$ % 400) * 20))} # 20 ports from here: nodes, sim, workers' metrics
TOKEN_LIFETIME=${TOKEN_LIFETIME:-60s}
SIM_LATENCY=${SIM_LATENCY:-1s}
declare -A worker_pid=()
node_pid=()
sim_pid=""

say() { echo "$NAME: $*"; }
fail() {
	echo "$NAME: FAIL: $*" >&2
	exit 1
}
for tool in go curl jq; do command -v "$tool" >/dev/null || fail "needs $tool"; done

stop_all() {
	local p
	for p in "${worker_pid[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${worker_pid[@]}"; do wait "$p" 2>/dev/null || true; done
	worker_pid=()
	[ -n "$sim_pid" ] && { kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; }
	sim_pid=""
	for p in "${node_pid[@]}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for p in "${node_pid[@]}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
	node_pid=()
}
cleanup() {
	stop_all
	if [ -z "${KEEP:-}" ]; then rm -rf "$work"; else echo "$NAME: kept $work"; fi
}
trap cleanup EXIT

build_all() {
	say "building codexpool, nats-server and simanswer into $work/bin"
	(cd "$repo" && export GOTOOLCHAIN=local &&
		go build -o "$work/bin/codexpool" ./cmd/codexpool &&
		go build -o "$work/bin/nats-server" github.com/nats-io/nats-server/v2 &&
		go build -o "$work/bin/simanswer" ./scripts/simanswer) || fail "build failed"
}

client_port() { echo $((base + $1)); }     # node i (0..2)
cluster_port() { echo $((base + 3 + $1)); } # node i's route port
monitor_port() { echo $((base + 6 + $1)); } # node i's HTTP monitoring
sim_port() { echo $((base + 9)); }
metrics_port() { echo $((base + 10 + $1)); } # worker i (1..9)
nats_urls() { echo "nats://127.0.0.1:$(client_port 0),nats://127.0.0.1:$(client_port 1),nats://127.0.0.1:$(client_port 2)"; }

# start_node I DIR: nats-server node I of the cluster "chaos", JetStream stored in DIR/nI.
start_node() {
	local i=$1 dir=$2 routes="" j
	for j in 0 1 2; do routes+="nats://127.0.0.1:$(cluster_port "$j"),"; done
	mkdir -p "$dir/n$i"
	cat >"$dir/n$i.conf" <<EOF
server_name: n$i
listen: 127.0.0.1:$(client_port "$i")
http: 127.0.0.1:$(monitor_port "$i")
jetstream { store_dir: "$dir/n$i" }
cluster { name: chaos, listen: 127.0.0.1:$(cluster_port "$i"), routes: [${routes%,}] }
EOF
	"$work/bin/nats-server" --config "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 &
	node_pid[i]=$!
}

# wait_cluster: every node answers /healthz (JetStream ready, meta leader known) within 60 s.
wait_cluster() {
	local i ok
	for _ in $(seq 600); do
		ok=0
		for i in 0 1 2; do curl -fs "127.0.0.1:$(monitor_port "$i")/healthz" >/dev/null 2>&1 && ok=$((ok + 1)); done
		[ "$ok" = 3 ] && return 0
		sleep 0.1
	done
	fail "the 3-node cluster is not healthy after 60 s"
}

# start_sim DIR: the simulator with account main and one login of it in DIR/login.json.
start_sim() {
	local dir=$1
	printf -- '- name: main\n  token: %s-static\n  account_id: acct-%s-0123456789\n' "$NAME" "$NAME" >"$dir/accounts.yaml"
	"$work/bin/codexpool" sim --addr "127.0.0.1:$(sim_port)" --latency "$SIM_LATENCY" --token-lifetime "$TOKEN_LIFETIME" \
		--accounts "$dir/accounts.yaml" --write-login "main=$dir/login.json" >"$dir/sim.log" 2>&1 &
	sim_pid=$!
	for _ in $(seq 300); do [ -s "$dir/login.json" ] && curl -fs "127.0.0.1:$(sim_port)/_sim/stats" >/dev/null 2>&1 && return 0; sleep 0.1; done
	fail "the simulator did not start: $(tail -n 5 "$dir/sim.log")"
}
sim_stats() { curl -fs "127.0.0.1:$(sim_port)/_sim/stats"; }

# start_worker I DIR: worker wI (the real binary) on the cluster, its own copy of the login (the
# pool shares rotated tokens through the R3 credentials bucket), metrics on its own port.
start_worker() {
	local i=$1 dir=$2
	[ -f "$dir/w$i.json" ] || cp "$dir/login.json" "$dir/w$i.json"
	env CODEXPOOL_NATS_URL="$(nats_urls)" CODEXPOOL_WORKER_ID="w$i" \
		CODEXPOOL_CODEX_URL="ws://127.0.0.1:$(sim_port)/backend-api/codex/responses" CODEXPOOL_CODEX_TOKEN= \
		CODEXPOOL_CODEX_AUTH_FILE="$dir/w$i.json" CODEXPOOL_CODEX_REFRESH_URL="http://127.0.0.1:$(sim_port)/oauth/token" \
		CODEXPOOL_CREDENTIALS_KEY="$NAME-pool-secret" CODEXPOOL_CREDENTIALS_REPLICAS=3 CODEXPOOL_JOBS_REPLICAS=3 \
		CODEXPOOL_JOBS_ACK_WAIT="${JOBS_ACK_WAIT:-15s}" CODEXPOOL_MAX_INFLIGHT="${MAX_INFLIGHT:-8}" \
		CODEXPOOL_METRICS_ADDR="127.0.0.1:$(metrics_port "$i")" CODEXPOOL_LOG_FORMAT=json \
		"$work/bin/codexpool" worker >>"$dir/w$i.log" 2>&1 &
	worker_pid[$i]=$!
}

# wait_serving I DIR: worker I logged "serving" (the Nth time: its Nth start) within 60 s.
wait_serving() {
	local i=$1 dir=$2 n=${3:-1}
	for _ in $(seq 600); do
		[ "$(grep -c '"msg":"serving"' "$dir/w$i.log" 2>/dev/null)" -ge "$n" ] 2>/dev/null && return 0
		kill -0 "${worker_pid[$i]}" 2>/dev/null || fail "worker w$i exited: $(tail -n 3 "$dir/w$i.log")"
		sleep 0.1
	done
	fail "worker w$i not serving after 60 s: $(tail -n 3 "$dir/w$i.log")"
}

# metric I NAME: worker I's metric NAME (a sum over its label sets), or "" when unreachable.
metric() {
	curl -fs --max-time 2 "127.0.0.1:$(metrics_port "$1")/metrics" 2>/dev/null |
		awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2; f = 1 } END { if (f) printf "%d\n", s }'
}
