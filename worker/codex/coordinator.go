package codex

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// A Coordinator is what the workers of a pool share about their logins: one small value per
// login, with a revision, changed only by compare-and-set. An [Auth] uses it so that exactly one
// worker at a time refreshes a login (it claims the login by writing, at the revision it read, a
// value that says so) and so that the tokens it gets reach every other worker using the login
// (they watch its key). queue.CredentialStore implements it over a NATS JetStream key-value
// bucket.
//
// Keys are hashes of the login's identity (the token's subject and the ChatGPT account id): they
// name no account and reveal no token. Values are opaque to the Coordinator; with
// AuthConfig.ShareKey set they are encrypted and authenticated (AES-256-GCM), so that whoever can
// read or write the store without the key can neither read the tokens nor plant others.
type Coordinator interface {
	// Get returns key's current value and revision: a nil value and revision 0 when there is none.
	Get(ctx context.Context, key string) (value []byte, revision uint64, err error)
	// Put stores value under key if key's revision is still revision (0: only if key has no
	// value) and returns the new revision. ok is false, with a nil error, when the revision did
	// not match: another worker wrote first.
	Put(ctx context.Context, key string, value []byte, revision uint64) (newRevision uint64, ok bool, err error)
	// Watch calls update with key's current value, if there is one, and then with every new
	// value in order, until ctx is done (it returns ctx.Err()) or the watch fails (it returns
	// why). update runs on the caller's goroutine, one call at a time.
	Watch(ctx context.Context, key string, update func(value []byte, revision uint64)) error
}

// sharedLogin is the value a Coordinator holds for a login.
type sharedLogin struct {
	V      int     `json:"v"`
	Tokens *tokens `json:"tokens,omitempty"`
	// Claim is set while a worker refreshes the login; nobody else may.
	Claim *shareClaim `json:"claim,omitempty"`
	// Refused is the token endpoint's code when it refused Tokens.RefreshToken for good: the
	// login is out of service until a new one replaces it.
	Refused string `json:"refused,omitempty"`
}

type shareClaim struct {
	By string    `json:"by"` // the claiming worker, for operators reading the store
	At time.Time `json:"at"` // when it (re)claimed, by its own clock; informative only
}

// loginKey is the Coordinator key of t's login: a hash of its subject and account id, or "" when
// t has neither (an API key, an opaque token): such a login is not shared.
func loginKey(t tokens) string {
	c := parseClaims(t.IDToken)
	if c.Sub == "" {
		c = parseClaims(t.AccessToken)
	}
	acct := t.AccountID
	if acct == "" {
		acct = c.Auth.AccountID
	}
	if c.Sub == "" && acct == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("codexpool login\x00" + c.Sub + "\x00" + acct))
	return "login_" + hex.EncodeToString(sum[:16])
}

// sealPrefix marks a sealed value: "cxp1." then base64(nonce || AES-256-GCM ciphertext).
const sealPrefix = "cxp1."

var (
	errSealed   = errors.New("codex: the shared login is encrypted and no credentials key is set (CODEXPOOL_CREDENTIALS_KEY)")
	errUnsealed = errors.New("codex: the shared login is not encrypted but a credentials key is set: ignored, as anyone able to write the store could have planted it")
	errBadSeal  = errors.New("codex: the shared login does not open with this credentials key (another CODEXPOOL_CREDENTIALS_KEY?)")
)

// sealer encrypts and authenticates shared values. A nil *sealer passes plaintext JSON.
type sealer struct{ aead cipher.AEAD }

// newSealer derives an AES-256-GCM key from secret; "" gives a nil sealer (plaintext).
func newSealer(secret string) *sealer {
	if secret == "" {
		return nil
	}
	k := sha256.Sum256([]byte("codexpool credentials v1\x00" + secret))
	block, _ := aes.NewCipher(k[:]) // a 32-byte key never fails
	aead, _ := cipher.NewGCM(block)
	return &sealer{aead: aead}
}

// seal encodes v for key (the key is authenticated too, so a value cannot be moved to another
// login's key).
func (s *sealer) seal(key string, v sharedLogin) []byte {
	plain, _ := json.Marshal(v)
	if s == nil {
		return plain
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	ct := s.aead.Seal(nonce, nonce, plain, []byte(key))
	return append([]byte(sealPrefix), base64.RawStdEncoding.EncodeToString(ct)...)
}

// open decodes a value sealed for key.
func (s *sealer) open(key string, data []byte) (sharedLogin, error) {
	var v sharedLogin
	sealed := bytes.HasPrefix(data, []byte(sealPrefix))
	switch {
	case s == nil && sealed:
		return v, errSealed
	case s != nil && !sealed:
		return v, errUnsealed
	case s != nil:
		ct, err := base64.RawStdEncoding.DecodeString(string(data[len(sealPrefix):]))
		if err != nil || len(ct) < s.aead.NonceSize() {
			return v, errBadSeal
		}
		n := s.aead.NonceSize()
		if data, err = s.aead.Open(nil, ct[:n], ct[n:], []byte(key)); err != nil {
			return v, errBadSeal
		}
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return sharedLogin{}, errors.New("codex: the shared login is not JSON")
	}
	return v, nil
}
