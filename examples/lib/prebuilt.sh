# Sourced by every example CI script: what .ci/run builds and installs once, reused here, or made
# here when a script runs on its own. Needs $work (a temporary folder) set before the calls.
#   codexpool_bin     prints the path of a codexpool binary: $CI_CODEXPOOL_BIN, else one built now
#   cmd_test_bin      prints the path of the cmd/codexpool test binary: $CI_CMD_TEST, else
#                     one built now (outside any namespace: the module cache is there)
#   npm_ci            npm ci in the current folder, unless .ci/run installed it already
#                     (CI_NPM_READY=1 and node_modules matches package-lock.json)
_prebuilt_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

codexpool_bin() {
	if [ -n "${CI_CODEXPOOL_BIN:-}" ] && [ -x "$CI_CODEXPOOL_BIN" ]; then echo "$CI_CODEXPOOL_BIN"; return; fi
	(cd "$_prebuilt_root" && go build -o "$work/codexpool" ./cmd/codexpool) >&2
	echo "$work/codexpool"
}

cmd_test_bin() {
	if [ -n "${CI_CMD_TEST:-}" ] && [ -x "$CI_CMD_TEST" ]; then echo "$CI_CMD_TEST"; return; fi
	(cd "$_prebuilt_root" && go test -c -o "$work/cmd.test" ./cmd/codexpool) >&2
	echo "$work/cmd.test"
}

npm_ci() {
	if [ "${CI_NPM_READY:-}" = 1 ] && [ -f node_modules/.package-lock.json ] &&
		[ node_modules/.package-lock.json -nt package-lock.json ]; then
		return 0
	fi
	npm ci --no-audit --no-fund --loglevel=error
}
