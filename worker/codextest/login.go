package codextest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"
)

// DefaultTokenLifetime is the lifetime of issued access tokens when Options.TokenLifetime is 0.
const DefaultTokenLifetime = time.Hour

// A Login is a ChatGPT login issued by [Logins.Issue] or by a refresh: what a Codex CLI keeps
// in its auth.json.
type Login struct {
	// AccessToken is a JWT accepted as a bearer token for the account until ExpiresAt.
	AccessToken string
	// RefreshToken is single-use: POST it to RefreshURL for new tokens.
	RefreshToken string
	// IDToken is a JWT with the same account claims; it is not a bearer token.
	IDToken string
	// AccountID is the account's Account.AccountID ("" = none).
	AccountID string
	// ExpiresAt is the access token's exp.
	ExpiresAt time.Time
	// IssuedAt is when the tokens were issued (auth.json's last_refresh).
	IssuedAt time.Time
}

// Expired returns l with its access token replaced by an unsigned one that expired a minute
// before now (its refresh token stays valid): a worker given its AuthJSON refreshes at once.
func (l Login) Expired(now time.Time) Login {
	claims, _ := json.Marshal(map[string]any{"exp": now.Add(-time.Minute).Unix(), "iat": now.Add(-time.Hour).Unix()})
	l.AccessToken = "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(claims) + ".x"
	l.ExpiresAt = now.Add(-time.Minute)
	return l
}

// AuthJSON returns l as a Codex CLI auth.json:
//
//	{"auth_mode":"chatgpt","OPENAI_API_KEY":null,
//	 "tokens":{"id_token":...,"access_token":...,"refresh_token":...,"account_id":...},
//	 "last_refresh":"2026-08-14T09:54:11.493646Z"}
//
// with account_id null when l.AccountID is empty.
func (l Login) AuthJSON() []byte {
	var f struct {
		AuthMode string  `json:"auth_mode"`
		APIKey   *string `json:"OPENAI_API_KEY"`
		Tokens   struct {
			IDToken      string  `json:"id_token"`
			AccessToken  string  `json:"access_token"`
			RefreshToken string  `json:"refresh_token"`
			AccountID    *string `json:"account_id"`
		} `json:"tokens"`
		LastRefresh string `json:"last_refresh"`
	}
	f.AuthMode = "chatgpt"
	f.Tokens.IDToken, f.Tokens.AccessToken, f.Tokens.RefreshToken = l.IDToken, l.AccessToken, l.RefreshToken
	if l.AccountID != "" {
		f.Tokens.AccountID = &l.AccountID
	}
	f.LastRefresh = l.IssuedAt.UTC().Format(time.RFC3339Nano)
	b, _ := json.MarshalIndent(&f, "", "  ")
	return append(b, '\n')
}

// A tokenFamily is every refresh token descended from one login. Reusing a spent member revokes
// the whole family.
type tokenFamily struct {
	acct    *account
	revoked bool
}

type refreshEntry struct {
	fam   *tokenFamily
	spent bool
}

func (o Options) tokenLifetime() time.Duration {
	if o.TokenLifetime <= 0 {
		return DefaultTokenLifetime
	}
	return o.TokenLifetime
}

// Logins is a Server's login issuer ([Server].Logins): it issues ChatGPT-style logins for its
// accounts, verifies their access tokens and rotates their refresh tokens at RefreshURL. Its
// methods are safe for concurrent use.
type Logins struct {
	accts    *Accounts     // fixed
	key      []byte        // fixed: signs issued tokens
	lifetime time.Duration // fixed: of access tokens

	mu     sync.Mutex
	tokens map[string]*refreshEntry // every refresh token issued
}

func newLogins(accts *Accounts, lifetime time.Duration) *Logins {
	l := &Logins{accts: accts, key: make([]byte, 32), lifetime: lifetime, tokens: make(map[string]*refreshEntry)}
	rand.Read(l.key)
	return l
}

// Issue issues a new login (a new token family) for the named account, as a `codex login`
// would. It fails when the account is unknown.
func (l *Logins) Issue(account string) (Login, error) {
	acct := l.accts.get(account)
	if acct == nil {
		return Login{}, fmt.Errorf("codextest: unknown account %q", account)
	}
	fam := &tokenFamily{acct: acct}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.issueLocked(fam, time.Now()), nil
}

// issueLocked mints tokens for fam at now and records the new refresh token. l.mu is held.
func (l *Logins) issueLocked(fam *tokenFamily, now time.Time) Login {
	a := fam.acct
	exp := unixCeil(now.Add(l.lifetime))
	c := tokenClaims{
		Iss:  "codextest",
		Aud:  audAccess,
		Sub:  a.Name,
		Iat:  now.Unix(),
		Exp:  exp,
		Jti:  rand.Text(),
		Auth: authClaim{ChatGPTAccountID: a.AccountID, ChatGPTPlanType: a.planType()},
	}
	login := Login{AccountID: a.AccountID, ExpiresAt: time.Unix(exp, 0), IssuedAt: now}
	login.AccessToken = signJWT(l.key, &c)
	c.Aud, c.Jti, c.Email = audID, rand.Text(), a.Name+"@codextest.invalid"
	login.IDToken = signJWT(l.key, &c)
	login.RefreshToken = "rt_" + rand.Text()
	l.tokens[login.RefreshToken] = &refreshEntry{fam: fam}
	return login
}

// verify resolves an issued access token at now: its account (nil when the token is not ours)
// and errJWTExpired when it has expired.
func (l *Logins) verify(tok string, now time.Time) (*account, error) {
	c, err := verifyJWT(l.key, tok, now)
	if c == nil {
		return nil, err
	}
	return l.accts.get(c.Sub), err
}

// refreshOutcome is what a refresh token is worth when presented.
type refreshOutcome struct {
	acct  *account // nil for an unknown token
	login Login    // set when ok
	ok    bool
	code  string // when !ok: codeRefreshReused or codeRefreshInvalidated
}

const (
	codeRefreshReused      = "refresh_token_reused"
	codeRefreshInvalidated = "refresh_token_invalidated"
)

// rotate spends tok and issues its successor; a spent token revokes its family.
func (l *Logins) rotate(tok string, now time.Time) refreshOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.tokens[tok]
	switch {
	case e == nil:
		return refreshOutcome{code: codeRefreshInvalidated}
	case e.fam.revoked:
		return refreshOutcome{acct: e.fam.acct, code: codeRefreshInvalidated}
	case e.spent:
		e.fam.revoked = true
		return refreshOutcome{acct: e.fam.acct, code: codeRefreshReused}
	}
	e.spent = true
	return refreshOutcome{acct: e.fam.acct, ok: true, login: l.issueLocked(e.fam, now)}
}

// expiresIn is the expires_in of a refresh answer: the lifetime, not the time to exp, which is
// rounded up to a whole second.
func (o Options) expiresIn() int64 {
	return int64(math.Ceil(o.tokenLifetime().Seconds()))
}
