package anthropic

import (
	"encoding/base64"
	"strings"

	"github.com/codexpool/codexpool/gateway/wire"
)

// signaturePrefix starts the signature of a thinking block this package made:
// "codexpool:v1:" + base64url(reasoning item id) + ":" + encrypted content.
const signaturePrefix = "codexpool:v1:"

// Limits on a signature's parts, so a client cannot make the pool carry arbitrary blobs.
const (
	maxReasoningID = 4 << 10
	maxEncrypted   = 8 << 20
)

// encodeSignature makes the signature of a reasoning item; "" when it has no encrypted content.
func encodeSignature(id, encrypted string) string {
	if encrypted == "" {
		return ""
	}
	return signaturePrefix + base64.RawURLEncoding.EncodeToString([]byte(id)) + ":" + encrypted
}

// decodeSignature makes the reasoning input item back from a signature; false for a foreign or
// malformed one, which is dropped.
func decodeSignature(sig string) (wire.ReasoningItem, bool) {
	rest, ok := strings.CutPrefix(sig, signaturePrefix)
	if !ok {
		return wire.ReasoningItem{}, false
	}
	rawID, enc, ok := strings.Cut(rest, ":")
	if !ok || enc == "" || len(rawID) > maxReasoningID || len(enc) > maxEncrypted {
		return wire.ReasoningItem{}, false
	}
	id, err := base64.RawURLEncoding.DecodeString(rawID)
	if err != nil {
		return wire.ReasoningItem{}, false
	}
	return wire.ReasoningItem{Type: "reasoning", ID: string(id), Summary: []any{}, EncryptedContent: enc}, true
}
