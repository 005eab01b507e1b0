#!/usr/bin/env bash
# Builds Jaeger v2 (github.com/jaegertracing/jaeger/cmd/jaeger, v1.75.0, from the Go module proxy)
# into ${1:-$HOME/.cache/codexpool/jaeger} and prints its path, for the trace test against a real
# Jaeger (scripts/jaeger/run.sh runs it).
# It takes minutes (about 9 on 2 busy cores), which is why CI runs the trace tests against
# internal/tracing/receiver instead. A second run reuses the binary.
set -euo pipefail
out=${1:-$HOME/.cache/codexpool/jaeger}
version=v1.75.0
if [ -x "$out" ] && [ "$(cat "$out.version" 2>/dev/null)" = "$version" ]; then
	echo "$out"
	exit 0
fi
mod=$(mktemp -d)
trap 'rm -rf "$mod"' EXIT
mkdir -p "$(dirname "$out")"
(
	cd "$mod"
	export GOTOOLCHAIN=local
	go mod init jaegerbuild >/dev/null 2>&1
	echo "scripts/jaeger: fetching and building jaeger $version (minutes)..." >&2
	go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
	go build -o "$out" github.com/jaegertracing/jaeger/cmd/jaeger >&2
)
echo "$version" >"$out.version"
echo "$out"
