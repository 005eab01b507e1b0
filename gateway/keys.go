package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/codexpool/codexpool/internal/usage"
)

// Key is one client key the gateway accepts: its name (what logs, usage and errors show; never
// the secret), the SHA-256 digest of its secret, and what it may do. A Key from
// Config.Keys (CODEXPOOL_GATEWAY_KEYS) has no limits and is not an admin.
type Key struct {
	Name   string
	SHA256 [sha256.Size]byte
	Limits Limits
	// Models are the model names the key may request; empty: any.
	Models []string
	// Admin keys may read GET /v1/usage.
	Admin bool
}

// Limits are a key's caps, each enforced across every gateway sharing the NATS account (the
// state is in JetStream, see package internal/usage); zero means no limit.
type Limits = usage.Limits

// AllowsModel reports whether k may request model ("" is the workers' default: always allowed).
func (k *Key) AllowsModel(model string) bool {
	return len(k.Models) == 0 || model == "" || slices.Contains(k.Models, model)
}

// plainKey is the Key of a CODEXPOOL_GATEWAY_KEYS entry: named by a prefix of its digest, which
// stays the same across restarts and tells the operator which key it is without showing it.
func plainKey(secret string) Key {
	sum := sha256.Sum256([]byte(secret))
	return Key{Name: "sha256:" + hex.EncodeToString(sum[:6]), SHA256: sum}
}

// keyring holds the accepted keys.
type keyring []Key

// match returns the key whose digest is sum, comparing every key in constant time so neither
// which key matched nor how much of it shows in the timing; nil for none.
func (kr keyring) match(sum [sha256.Size]byte) *Key {
	found := -1
	for i := range kr {
		eq := subtle.ConstantTimeCompare(sum[:], kr[i].SHA256[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &kr[found]
}

// bearer returns the digest of r's "Authorization: Bearer <key>" and whether it has one.
func bearer(r *http.Request) ([sha256.Size]byte, bool) {
	scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " ")
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return sum, found && strings.EqualFold(scheme, "Bearer")
}

// keys are the keys a Gateway accepts: those of its Config, and those of the bucket as they
// change.
type keys struct {
	static keyring // Config.Keys, then Config.ClientKeys
	live   *LiveKeys
	cached atomic.Pointer[keyset] // static merged with the live set it was made from
}

// keyset is the keys accepted at one moment; it never changes once made.
type keyset struct {
	ring  keyring
	keyed bool     // ask for a key (else every caller is let in, loopback only)
	from  *liveSet // the live state it was made from
}

func newKeys(plain []string, client []Key, live *LiveKeys) *keys {
	ks := &keys{live: live}
	for _, k := range plain {
		ks.static = append(ks.static, plainKey(k))
	}
	ks.static = append(ks.static, client...)
	ks.cached.Store(&keyset{ring: ks.static, keyed: len(ks.static) > 0})
	return ks
}

// now returns the keys accepted now: made again only when the bucket changed.
func (ks *keys) now() *keyset {
	cur := ks.cached.Load()
	if ks.live == nil {
		return cur
	}
	s := ks.live.cur.Load()
	if cur.from == s {
		return cur
	}
	ring := make(keyring, 0, len(ks.static)+len(s.keys))
	for _, k := range ks.static {
		if _, inBucket := s.names[k.Name]; !inBucket {
			ring = append(ring, k)
		}
	}
	ring = append(ring, s.keys...)
	next := &keyset{ring: ring, keyed: len(ks.static) > 0 || s.keyed, from: s}
	ks.cached.Store(next) // two requests racing here make the same set
	return next
}
