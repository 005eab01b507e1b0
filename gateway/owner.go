package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/google/uuid"
)

// owner identifies who made a request: the SHA-256 digest of the client key it came with (the
// zero value on a gateway without keys, where every caller is the same local user). The key
// itself is never kept.
type owner [sha256.Size]byte

// The gateway keeps no state, so a background response's owner travels in its id: the id is the
// job's id and its results key, so the owner is stored wherever the job is. An id is "gw-" and a
// version-8 UUID (RFC 9562) whose first half is random and whose second half is a tag of the
// owner and that first half:
//
//	tag = SHA-256("codexpool gateway owner\x00" || owner || first half)[:8]
//
// (less the UUID's version and variant bits). A request with another key computes another tag
// for the same first half, so it is told the id does not exist; a key cannot make an id that
// names another key's job, since the job's id includes that key's tag.
const ownerTagDomain = "codexpool gateway owner\x00"

// newRequestID returns a new request id carrying o's tag.
func newRequestID(o owner) string {
	var u uuid.UUID
	_, _ = rand.Read(u[:8]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x80 // version 8: custom
	tag := o.tag(u[:8])
	copy(u[8:], tag[:])
	u[8] = u[8]&0x3f | 0x80 // variant RFC 9562
	return "gw-" + u.String()
}

// owns reports whether id is a request id the gateway made for o.
func (o owner) owns(id string) bool {
	rest, found := strings.CutPrefix(id, "gw-")
	if !found {
		return false
	}
	u, err := uuid.Parse(rest)
	if err != nil || u.Version() != 8 || rest != u.String() {
		return false
	}
	tag := o.tag(u[:8])
	tag[0] = tag[0]&0x3f | 0x80
	return subtle.ConstantTimeCompare(tag[:], u[8:]) == 1
}

// tag returns the first 8 bytes of the owner tag over nonce.
func (o owner) tag(nonce []byte) (t [8]byte) {
	h := sha256.New()
	h.Write([]byte(ownerTagDomain))
	h.Write(o[:])
	h.Write(nonce)
	copy(t[:], h.Sum(nil))
	return t
}
