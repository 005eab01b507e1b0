#!/usr/bin/env bash
# Runs the opencode coding agent (`opencode run`, opencode-ai from npm) with providers pointing at
# a codexpool gateway (@ai-sdk/openai-compatible: Chat Completions, @ai-sdk/openai: Responses,
# @ai-sdk/anthropic: Messages), the origin simulator scripting a call of opencode's own write
# tool, as CI does: opencode must exit 0 and the file must hold what the call said. opencode tries
# to reach hosts of its own (models.dev, its updater, provider packages), so run.sh, which starts
# the pool and opencode, runs inside a network namespace that has only loopback. Needs Go, Node
# >= 18, npm, root and `ip netns`; without them it fails with a message (examples/lib/netns.sh),
# never a skip. The namespace and every temporary file are removed on exit.
#
# package-lock.json lists opencode-ai's binaries for the other platforms without an integrity:
# the registry here serves only the linux-x64 ones, and npm ci needs every optional package named.
set -euo pipefail
cd "$(dirname "$0")"
WHAT=opencode
source ../lib/netns.sh

npm_ci
"$PWD/node_modules/.bin/opencode" --version

# Inside the namespace nothing may need the network: pool.sh builds codexpool from the module
# cache (the Go commands run before this one filled it).
(cd "$root" && go mod download)
ip netns exec "$ns" env GOPROXY=off GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly" bash run.sh
