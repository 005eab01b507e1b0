package login

import (
	"crypto/sha256"
	"math"
	"slices"
	"time"
)

// Which of two token sets of a login is the newer one. Nothing a token says about itself is
// trusted for this: JWTs are not verified here, so a far-future exp (or iat) proves nothing, and
// a fresh `codex login` may well expire before the tokens it replaces. Instead:
//
//   - a change of the local auth file is always adopted (a `codex login`, or another process of
//     this machine refreshing), unless it brings back a refresh token this Auth has seen
//     replaced; it is then offered to the pool with a higher Seq, so it wins there too;
//   - a pool value is adopted when its Seq is above every Seq this Auth has seen (writers of new
//     tokens write one more than the highest they saw, under compare-and-set, so Seq grows along
//     the store's revisions). A value holding a refresh token this Auth has seen replaced is
//     behind: this Auth offers its own tokens instead (it refreshed while the store was down);
//   - only where the history is unknown — the first pool value after start, or a Seq that went
//     back (the bucket was recreated) — the later issued-at wins (the access token's iat, else
//     last_refresh; a time more than maxSkew ahead of this clock counts as none).
//
// Sealing keeps anyone without the pool key out of the store; this ordering makes sure that even
// a key holder's bogus entry cannot pin the pool: the next genuine login replaces it.
type lineage struct {
	seq    uint64     // the highest Seq seen in the pool or written there
	synced bool       // a pool value was seen (or written) since start
	spent  [][32]byte // hashes of refresh tokens this Auth saw replaced, oldest first
}

// maxSpent bounds lineage.spent: a worker only needs to recognise recent states.
const maxSpent = 64

// maxSkew is how far ahead of this clock an issued-at may be and still count.
const maxSkew = 5 * time.Minute

// verdict is what a pool value means to an Auth.
type verdict int

const (
	verdictKeep  verdict = iota // nothing new (the same tokens, or a stale read)
	verdictAdopt                // the pool's tokens are newer: use them
	verdictOffer                // the pool is behind this Auth: write ours there
)

// replaced records that the refresh token rt was replaced by another (a refresh, a new login).
func (l *lineage) replaced(rt string) {
	if rt == "" || l.isSpent(rt) {
		return
	}
	l.spent = append(l.spent, sha256.Sum256([]byte(rt)))
	if len(l.spent) > maxSpent {
		l.spent = slices.Delete(l.spent, 0, len(l.spent)-maxSpent)
	}
}

func (l *lineage) isSpent(rt string) bool {
	return rt != "" && slices.Contains(l.spent, sha256.Sum256([]byte(rt)))
}

// saw records a pool value of sequence seq.
func (l *lineage) saw(seq uint64) {
	l.seq, l.synced = max(l.seq, seq), true
}

// next is the Seq of a new token set written over a value of sequence seq.
func (l *lineage) next(seq uint64) uint64 {
	if m := max(l.seq, seq); m < math.MaxUint64 {
		return m + 1
	}
	return math.MaxUint64
}

// judge says what the pool's tokens pt at sequence seq mean for an Auth holding cur, at now.
func (l *lineage) judge(pt tokens, seq uint64, cur tokens, now time.Time) verdict {
	switch {
	case pt.same(cur):
		return verdictKeep
	case l.isSpent(pt.RefreshToken):
		return verdictOffer
	case !l.synced:
		if issued(pt, now).Before(issued(cur, now)) {
			return verdictOffer
		}
		return verdictAdopt
	case seq > l.seq:
		return verdictAdopt
	case issued(pt, now).After(issued(cur, now)):
		return verdictAdopt // the Seq went back: the store lost its history
	}
	return verdictKeep
}

// issued is when t was issued: its access token's iat, else its last_refresh; zero when neither
// is known or it lies more than maxSkew ahead of now.
func issued(t tokens, now time.Time) time.Time {
	at := parseClaims(t.AccessToken).issued()
	if at.IsZero() {
		at = t.LastRefresh
	}
	if at.After(now.Add(maxSkew)) {
		return time.Time{}
	}
	return at
}
