#!/usr/bin/env bash
# Runs docker-compose.yml for real, as CI does, on a machine with no image registry and no
# running Docker engine:
#   1. installs Debian's docker.io and docker-compose if missing (needs root);
#   2. builds codexpool (CGO_ENABLED=0) and nats-server (from the Go module cache, at go.mod's
#      version) here, and images FROM scratch of both (Dockerfile.scratch, Dockerfile.nats-scratch);
#   3. starts a dockerd of its own inside a network namespace that has only loopback (nothing it
#      runs can reach another host), with its data under a temporary folder;
#   4. `up` with the simulator profile and --scale worker=4; 200 requests from outside the
#      containers (codexpool ask as the client role, 20 at a time, against 127.0.0.1:4222), one
#      worker replica stopped (docker stop, compose's stop timeout) while they run; every request
#      must be answered with the simulator's deterministic answer;
#   5. `down -v`, and stops everything it started.
# It never skips: whatever it cannot do fails the run with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
requests=${COMPOSE_CI_REQUESTS:-200}
parallel=${COMPOSE_CI_PARALLEL:-20}

fail() {
	echo "compose CI: FAIL: $*" >&2
	if [ -n "${compose_up:-}" ]; then "${compose[@]}" logs --tail 20 >&2 2>&1 || true; fi
	if [ -f "${work:-/nonexistent}/dockerd.log" ]; then echo "--- dockerd.log (last 20 lines)" >&2; tail -n 20 "$work/dockerd.log" >&2; fi
	exit 1
}
say() { echo "compose CI: $*"; }

[ "$(id -u)" = 0 ] || fail "needs root (it installs packages and starts dockerd in a network namespace)"
if ! command -v dockerd >/dev/null || ! command -v docker-compose >/dev/null || ! command -v nsenter >/dev/null || ! command -v ip >/dev/null; then
	say "installing docker.io docker-compose iproute2 util-linux (apt)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || fail "apt-get update failed"
	apt-get install -y -qq docker.io docker-compose iproute2 util-linux >/dev/null || fail "apt-get install docker.io docker-compose failed"
fi

work=$(mktemp -d /tmp/codexpool-compose-ci.XXXXXX)
ns="codexpool-compose-ci-$$"
project="cpci$$"
dockerd_pid=""
cleanup() {
	if [ -n "${compose_up:-}" ]; then "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; fi
	if [ -n "$dockerd_pid" ]; then
		kill "$dockerd_pid" 2>/dev/null || true
		for _ in $(seq 200); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 0.1; done
	fi
	ip netns del "$ns" 2>/dev/null || true
	grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

say "building codexpool and nats-server (static) and their images"
export GOTOOLCHAIN=local CGO_ENABLED=0
mkdir -p "$work/ctx" "$work/out"
go build -trimpath -ldflags "-s -w" -o "$work/ctx/codexpool" ./cmd/codexpool
go build -trimpath -ldflags "-s -w" -o "$work/ctx/nats-server" github.com/nats-io/nats-server/v2
go build -o "$work/simanswer" ./scripts/simanswer
nats_version=$(go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)

# ip netns exec would remount /sys and hide the cgroup hierarchy dockerd needs, so dockerd joins
# only the namespace's network (nsenter --net).
ip netns add "$ns" 2>"$work/netns.err" || fail "cannot create a network namespace: $(cat "$work/netns.err")"
ip netns exec "$ns" ip link set lo up
export DOCKER_HOST="unix://$work/docker.sock"
nsenter --net="/var/run/netns/$ns" dockerd --data-root "$work/data" --exec-root "$work/exec" \
	-H "$DOCKER_HOST" --pidfile "$work/dockerd.pid" >"$work/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 300); do
	docker version >/dev/null 2>&1 && break
	kill -0 "$dockerd_pid" 2>/dev/null || fail "dockerd exited: $(grep -m1 -iE 'failed|error' "$work/dockerd.log")"
	sleep 0.1
done
docker version >/dev/null 2>&1 || fail "dockerd did not answer within 30 s"
say "dockerd $(docker version -f '{{.Server.Version}}') up in network namespace $ns"

export NATS_IMAGE="codexpool-local/nats-server:${nats_version#v}"
docker build -q -f Dockerfile.scratch -t codexpool:latest "$work/ctx" >/dev/null 2>"$work/build.err" || fail "docker build Dockerfile.scratch: $(cat "$work/build.err")"
docker build -q -f Dockerfile.nats-scratch -t "$NATS_IMAGE" "$work/ctx" >/dev/null 2>"$work/build.err" || fail "docker build Dockerfile.nats-scratch: $(cat "$work/build.err")"

if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
compose+=(-p "$project" -f "$repo/docker-compose.yml" --profile sim)
NATS_WORKER_PASSWORD=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
NATS_CLIENT_PASSWORD=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
NATS_GATEWAY_PASSWORD=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
NATS_OPERATOR_PASSWORD=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
export NATS_WORKER_PASSWORD NATS_CLIENT_PASSWORD NATS_GATEWAY_PASSWORD NATS_OPERATOR_PASSWORD
export CODEXPOOL_CODEX_URL=ws://sim:8090/backend-api/codex/responses CODEXPOOL_CODEX_TOKEN=sim

start=$(date +%s)
compose_up=1
"${compose[@]}" up -d --no-build --scale worker=4 >"$work/up.log" 2>&1 || fail "compose up: $(tail -n 5 "$work/up.log")"
for _ in $(seq 600); do
	serving=$("${compose[@]}" logs --no-color worker 2>/dev/null | grep -c '"msg":"serving"' || true)
	[ "$serving" -ge 4 ] && break
	sleep 0.1
done
[ "$serving" -ge 4 ] || fail "only $serving of 4 worker replicas serving after 60 s"
say "up: nats ($NATS_IMAGE), sim, 4 worker replicas serving ($(($(date +%s) - start)) s)"

# The client role from outside the containers: the port compose publishes on 127.0.0.1.
ask_one() {
	if nsenter --net="/var/run/netns/$ns" "$work/ctx/codexpool" ask --nats nats://127.0.0.1:4222 \
		--timeout 90s "compose request $1" >"$work/out/$1.txt" 2>"$work/out/$1.err"; then
		echo 0 >"$work/out/$1.rc"
	else
		echo $? >"$work/out/$1.rc"
	fi
}
export -f ask_one
export work ns CODEXPOOL_NATS_USER=client CODEXPOOL_NATS_PASSWORD="$NATS_CLIENT_PASSWORD"
seq "$requests" | sed 's/^/compose request /' | "$work/simanswer" >"$work/expected.txt"

load_start=$(date +%s%N)
seq "$requests" | xargs -P "$parallel" -n 1 bash -c 'ask_one "$1"' _ &
load_pid=$!
for _ in $(seq 600); do
	done_n=$(find "$work/out" -name '*.rc' | wc -l)
	[ "$done_n" -ge $((requests / 5)) ] && break
	sleep 0.05
done
victim=$(docker ps -q --filter "label=com.docker.compose.project=$project" --filter label=com.docker.compose.service=worker | head -n 1)
[ -n "$victim" ] || fail "no worker container to stop"
victim_name=$(docker inspect -f '{{.Name}}' "$victim")
grace=$(docker inspect -f '{{.Config.StopTimeout}}' "$victim")
at_stop=$(find "$work/out" -name '*.rc' | wc -l)
stop_start=$(date +%s%N)
docker stop "$victim" >/dev/null || fail "docker stop $victim_name"
stop_ms=$((($(date +%s%N) - stop_start) / 1000000))
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$victim")
after_stop=$(find "$work/out" -name '*.rc' | wc -l)
say "stopped $victim_name (stop timeout ${grace} s) after $at_stop of $requests answers, in ${stop_ms} ms: exit code $exit_code, $after_stop answered by then"
wait "$load_pid" || fail "the request load failed"
load_ms=$((($(date +%s%N) - load_start) / 1000000))
[ "$exit_code" = 0 ] || fail "the stopped worker exited $exit_code, not 0 (killed at the stop timeout?)"
[ "$at_stop" -lt "$requests" ] || fail "the worker was stopped after the load had ended"
docker logs "$victim" 2>&1 | grep -q '"msg":"stopped"' || fail "the stopped worker did not log its orderly stop"

ok=0
for i in $(seq "$requests"); do
	want=$(sed -n "${i}p" "$work/expected.txt")
	rc=$(cat "$work/out/$i.rc" 2>/dev/null || echo missing)
	if [ "$rc" = 0 ] && [ "$(cat "$work/out/$i.txt")" = "$want" ]; then
		ok=$((ok + 1))
	else
		echo "request $i: exit $rc, got '$(head -c 200 "$work/out/$i.txt")' $(head -c 300 "$work/out/$i.err"), want '$want'" >&2
	fi
done
say "$ok/$requests requests answered ok (the simulator's answer), $parallel at a time, in ${load_ms} ms"
[ "$ok" = "$requests" ] || fail "$((requests - ok)) of $requests requests lost or wrong"

"${compose[@]}" down -v >"$work/down.log" 2>&1 || fail "compose down -v: $(tail -n 5 "$work/down.log")"
compose_up=""
left=$(docker ps -aq --filter "label=com.docker.compose.project=$project" | wc -l)
vols=$(docker volume ls -q --filter "label=com.docker.compose.project=$project" | wc -l)
[ "$left" = 0 ] && [ "$vols" = 0 ] || fail "down -v left $left containers and $vols volumes"
say "down -v: no container or volume left; total $(($(date +%s) - start)) s"
say "ok"
