#!/bin/sh
# gwfigures.sh [ROOT]: the gateway figures of issue 39 for the tree at ROOT (default .): non-test
# lines per dialect, Responses item/event model declarations, the longest gateway functions.
root=${1:-.}
cd "$root" || exit 1
lines() { cat "$@" 2>/dev/null | grep -cv '^\s*$'; }
echo "non-blank non-test lines per dialect:"
echo "  chat:      $(lines $(ls gateway/chat/*.go | grep -v _test.go) gateway/chat.go)  (gateway/chat + gateway/chat.go)"
echo "  anthropic: $(lines $(ls gateway/anthropic/*.go | grep -v _test.go) gateway/messages.go gateway/messages_models.go)  (gateway/anthropic + gateway/messages*.go)"
echo "  responses: $(lines gateway/responses.go gateway/relay.go gateway/refused.go)  (gateway/responses.go relay.go refused.go)"
echo "  wire:      $(lines $(ls gateway/wire/*.go 2>/dev/null | grep -v _test.go))  (gateway/wire, shared)"
echo "Responses event model declarations (a struct type with json \"type\" and \"delta\" fields, outside tests):"
for f in $(grep -l 'json:"delta' $(find gateway schemas -name '*.go' ! -name '*_test.go')); do
	awk -v f="$f" '/^type [a-zA-Z]+ struct \{/{name=$2; t=0; d=0} /json:"type"/{t=1} /json:"delta/{d=1} /^\}/{ if (t&&d) print "  " f ": " name; t=0; d=0 }' "$f"
done
echo "Responses function-call item model declarations (a struct type with call_id and arguments fields):"
for f in $(grep -l 'json:"call_id"' $(find gateway schemas -name '*.go' ! -name '*_test.go')); do
	awk -v f="$f" '/^\t?[a-zA-Z]+ struct \{|^type [a-zA-Z]+ struct \{/{name=$0; c=0; a=0} /json:"call_id"/{c=1} /json:"arguments"/{a=1} /^\t?\}/{ if (c&&a) print "  " f ": " name; c=0; a=0 }' "$f"
done
