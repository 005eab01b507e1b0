package codextest

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits are what a Server lets through ([Server].Limits): the upgrade token buckets, the
// Retry-After of their 403s, and whether WebSockets are on at all. Options set them at start;
// the methods change them at run time. They are safe for concurrent use.
type Limits struct {
	accts *Accounts // fixed: to find an account's bucket by name

	mu         sync.Mutex
	global     *rate.Limiter              // nil = unlimited
	perAccount map[*account]*rate.Limiter // no entry = no per-account limit
	retryAfter time.Duration              // with rate-limit 403s
	wsOff      bool
}

func newLimits(opts Options, accts *Accounts) *Limits {
	l := &Limits{
		accts:      accts,
		global:     newBucket(opts.UpgradeRate, opts.UpgradeBurst),
		perAccount: make(map[*account]*rate.Limiter),
		retryAfter: opts.RetryAfter,
		wsOff:      opts.WSOff,
	}
	for _, a := range accts.list {
		if b := newBucket(a.UpgradeRate, a.UpgradeBurst); b != nil {
			l.perAccount[a] = b
		}
	}
	return l
}

// newBucket is a full token bucket of burst tokens refilled at r per second; nil (no limit) for
// r <= 0 or +Inf. burst <= 0 means max(1, ceil(r)).
func newBucket(r float64, burst int) *rate.Limiter {
	if r <= 0 || math.IsInf(r, 1) || math.IsNaN(r) {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r), defaultBurst(r, burst))
}

func defaultBurst(rate float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(math.Ceil(rate)))
}

// SetUpgradeRate replaces an upgrade token bucket with a full one of burst tokens refilled at r
// per second: the named account's, or with name "" the server-wide one, which applies on top
// of every account's. r <= 0 removes the limit; burst <= 0 means max(1, ceil(r)). It fails for
// an unknown account.
func (l *Limits) SetUpgradeRate(name string, r float64, burst int) error {
	var a *account
	if name != "" {
		if a = l.accts.get(name); a == nil {
			return fmt.Errorf("codextest: unknown account %q", name)
		}
	}
	b := newBucket(r, burst)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case a == nil:
		l.global = b
	case b == nil:
		delete(l.perAccount, a)
	default:
		l.perAccount[a] = b
	}
	return nil
}

// SetRetryAfter changes the Retry-After sent with rate-limit 403s (0 = none).
func (l *Limits) SetRetryAfter(d time.Duration) {
	l.mu.Lock()
	l.retryAfter = d
	l.mu.Unlock()
}

// SetWSOff switches WebSockets off (every upgrade answered 426 upgrade_required) or back on;
// HTTP streaming is unaffected. Options.WSOff is the initial setting.
func (l *Limits) SetWSOff(off bool) {
	l.mu.Lock()
	l.wsOff = off
	l.mu.Unlock()
}

func (l *Limits) webSocketsOff() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wsOff
}

// allowUpgrade takes a token from acct's bucket (nil = none) and from the server-wide one, or
// from neither: a refusal by one bucket gives the other's token back. When refused it returns
// the Retry-After to send.
func (l *Limits) allowUpgrade(acct *account, now time.Time) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var res *rate.Reservation
	if b := l.perAccount[acct]; b != nil {
		res = b.ReserveN(now, 1)
		if !res.OK() || res.DelayFrom(now) > 0 {
			res.CancelAt(now)
			return false, l.retryAfter
		}
	}
	if l.global != nil && !l.global.AllowN(now, 1) {
		if res != nil {
			res.CancelAt(now)
		}
		return false, l.retryAfter
	}
	return true, 0
}
