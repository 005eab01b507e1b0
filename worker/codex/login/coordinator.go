package login

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// name no account and reveal no token. Values are opaque to the Coordinator: they are always
// sealed under the pool key (AuthConfig.ShareKey; see seal.go), so that whoever can read or
// write the store without the key can neither read the tokens nor plant others. An Auth without
// a pool key does not use its Coordinator.
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

// shareVersion is sharedLogin.V; a value of another version is ignored.
const shareVersion = 2

// sharedLogin is the value a Coordinator holds for a login (sealed).
type sharedLogin struct {
	V      int     `json:"v"`
	Tokens *tokens `json:"tokens,omitempty"`
	// Seq numbers the token sets of the login in the pool: a writer of new tokens writes one
	// more than the highest it has seen (in the store or before), a claim or a refusal keeps
	// it. A reader adopts only a Seq above the highest it has seen, so a stale read (a replica
	// behind, a slow Get) never takes a worker back to spent tokens. See Auth.learn.
	Seq uint64 `json:"seq"`
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
