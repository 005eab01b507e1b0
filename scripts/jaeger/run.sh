#!/usr/bin/env bash
# Runs TestE2ETraceInJaeger: builds Jaeger v2 once (scripts/jaeger/build.sh, minutes) and the
# test with the build tag jaeger, which only this script sets. Extra arguments go to go test.
set -euo pipefail
cd "$(dirname "$0")/../.."
jaeger=$(scripts/jaeger/build.sh)
CODEXPOOL_JAEGER=$jaeger go test -tags jaeger -count=1 -run '^TestE2ETraceInJaeger$' -v "$@" ./cmd/codexpool/
