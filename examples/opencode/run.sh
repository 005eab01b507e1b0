#!/usr/bin/env bash
# The part of ci.sh that runs inside the loopback-only network namespace: starts the origin
# simulator, a worker and a gateway (examples/lib/pool.sh), writes an opencode.json whose
# providers point at the gateway, and has `opencode run` write a file through its own write tool,
# once per provider package. Refuses to run with any network interface but loopback.
set -euo pipefail
cd "$(dirname "$0")"
if ip -o link show | grep -v ': lo:' | grep -q .; then
	echo "opencode example: FAIL: run.sh must run in a loopback-only network namespace (ci.sh makes one)" >&2
	exit 1
fi
NAME=opencode SIM_TOKEN=opencode-ci SIM_LATENCY=100ms
source ../lib/pool.sh

key="sk-opencode-ci-$$"
start_gateway "$key"
echo "opencode example: gateway http://$addr/v1, pool $nats_url, origin $origin"

# opencode keeps its config, state and cache under HOME and the XDG folders: all in $work.
export HOME="$work/home" XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share" \
	XDG_CACHE_HOME="$work/home/.cache"
export OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_SHARE=1 \
	OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_CLAUDE_CODE=1
mkdir -p "$HOME"

opencode="$PWD/node_modules/.bin/opencode"
# run_case PROVIDER: a fresh project whose opencode.json names the gateway as PROVIDER's only model;
# the ask carries the simulator's directive for opencode's write tool.
run_case() {
	local provider=$1 project="$work/project-$1" mark="written by opencode through codexpool ($1)"
	mkdir -p "$project"
	cat >"$project/opencode.json" <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "model": "$provider/codexpool-sim",
  "small_model": "$provider/codexpool-sim",
  "autoupdate": false,
  "share": "disabled",
  "permission": { "edit": "allow", "bash": "deny", "webfetch": "deny" },
  "provider": {
    "$provider": {
      "npm": "$(npm_of "$provider")",
      "name": "codexpool ($provider)",
      "options": { "baseURL": "http://$addr/v1", "apiKey": "$key" },
      "models": { "codexpool-sim": { "name": "codexpool sim", "tool_call": true } }
    }
  }
}
JSON
	local args
	args=$(printf '{"filePath":"%s","content":"%s"}' "$project/hello.txt" "$mark")
	# The ask goes in on stdin: opencode run wraps a message argument that has spaces in quotes and
	# escapes its quotes, which would hide the directive's JSON from the simulator.
	(cd "$project" && echo "Write hello.txt. [sim:tool name=write args=$args]" |
		timeout 120 "$opencode" run --print-logs --log-level INFO) >"$work/opencode-$provider.log" 2>&1 ||
		fail "opencode run ($provider) exited $?"
	[ -f "$project/hello.txt" ] || fail "opencode ($provider) wrote no hello.txt"
	[ "$(cat "$project/hello.txt")" = "$mark" ] || fail "opencode ($provider) wrote $(cat "$project/hello.txt"), want $mark"
	# The loop went round: the write tool's result went back and the model answered it.
	grep -q "Tool write returned: " "$work/opencode-$provider.log" ||
		fail "opencode ($provider) printed no answer to its write tool's result"
	echo "PASS opencode $provider: opencode run exited 0, its write tool wrote hello.txt = \"$mark\", the result was answered"
}
npm_of() {
	case $1 in
	chat) echo "@ai-sdk/openai-compatible" ;;
	responses) echo "@ai-sdk/openai" ;;
	anthropic) echo "@ai-sdk/anthropic" ;;
	esac
}

for provider in ${OPENCODE_PROVIDERS:-chat responses anthropic}; do run_case "$provider"; done
if grep -q -- "$key" "$work/gateway.log"; then fail "the gateway logged the client key"; fi
echo "opencode example: no key in the gateway's log"
