package codex

import (
	"context"
	"os"
	"time"
)

// How an Auth shares its login through a Coordinator. The login's key holds a sharedLogin: the
// newest tokens any worker has, a claim while one of them refreshes, and the refusal code once
// the token endpoint refused them for good. Every write is a compare-and-set on the revision the
// writer read, so the store orders them; there is no lock to lose and no clock to trust:
//
//   - to refresh, a worker reads the value; newer tokens there are adopted instead; a live claim
//     by another worker means waiting (its new tokens arrive through the watch); otherwise it
//     writes its tokens with its claim at the revision it read. Only one such write succeeds.
//   - while its refresh request is in flight it renews the claim every claimTTL/4; a claim that
//     does not change for claimTTL (by the waiter's clock) is a dead worker's and is taken over.
//   - the refresher writes the rotated tokens without a claim (or, refused, the refusal code);
//     every worker watching the key adopts them and writes its own copy of the auth file.
//   - tokens that a worker reads from its file and that are newer than the pool's (a new
//     `codex login`) are offered to the pool the same way, so a new login reaches everyone.

func statFile(path string) (os.FileInfo, error) { return os.Stat(path) }

type claimResult int

const (
	claimHeld   claimResult = iota // this Auth holds the claim at the returned revision
	claimNewer                     // the pool had newer tokens (or the refusal): adopted, no refresh
	claimBusy                      // another worker holds a live claim
	claimFailed                    // the store is unavailable
)

// storeCtx bounds one Coordinator call; Close cuts it short.
func (a *Auth) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(a.ctx, storeTimeout)
}

// finishCtx bounds one Coordinator call for a refresh already sent (renewing its claim,
// publishing its answer): Close waits for it, since the answer may hold the only valid tokens.
func (a *Auth) finishCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(a.ctx), storeTimeout)
}

// decode opens a shared value; an unreadable one is logged once and treated as absent (it is
// overwritten by the next claim: the pool must share one ShareKey).
func (a *Auth) decode(value []byte) (sharedLogin, bool) {
	if len(value) == 0 {
		return sharedLogin{}, false
	}
	sl, err := a.seal.open(a.key, value)
	if err != nil {
		a.mu.Lock()
		logIt := !a.badShare
		a.badShare = true
		a.mu.Unlock()
		if logIt {
			a.log.Error("codex: cannot read the login shared by the pool; it will be overwritten", "error", err)
		}
		return sharedLogin{}, false
	}
	return sl, true
}

// learn adopts what a shared value says if it is news: newer tokens, or the refusal of ours.
// It reports whether it changed anything.
func (a *Auth) learn(sl sharedLogin, from string) bool {
	if sl.Tokens == nil {
		return false
	}
	a.mu.Lock()
	newer := sl.Tokens.newerThan(a.tok)
	a.mu.Unlock()
	if newer {
		a.writeFile(*sl.Tokens) // this machine's copy of the login, before it is used
	}
	a.mu.Lock()
	switch {
	case sl.Tokens.newerThan(a.tok):
		a.st.FromPool++
		a.adoptLocked(*sl.Tokens, from)
		if sl.Refused != "" {
			a.goDownLocked(sl.Refused, from)
		}
		a.mu.Unlock()
		a.log.Info("codex: new tokens received from the pool", "expires_at", sl.Tokens.expiry(), "refused", sl.Refused)
		return true
	case sl.Refused != "" && sl.Tokens.RefreshToken == a.tok.RefreshToken:
		a.goDownLocked(sl.Refused, from)
		a.mu.Unlock()
		return true
	}
	a.mu.Unlock()
	return false
}

// claim takes the login's refresh turn in the pool for cur.
func (a *Auth) claim(cur tokens) (claimResult, uint64) {
	for range 3 {
		ctx, cancel := a.storeCtx()
		value, rev, err := a.cfg.Coordinator.Get(ctx, a.key)
		cancel()
		if err != nil {
			a.log.Warn("codex: cannot read the pool's credential store", "error", err)
			return claimFailed, 0
		}
		sl, _ := a.decode(value)
		a.learn(sl, "pool")
		// Compare with cur, not just with what learn saw: the watch may have adopted newer
		// tokens meanwhile, and cur's refresh token may be spent already.
		a.mu.Lock()
		moved := !a.tok.same(cur) || a.down != nil
		a.mu.Unlock()
		if moved {
			return claimNewer, 0
		}
		if c := sl.Claim; c != nil && c.By != a.id {
			a.mu.Lock()
			if a.claimRev != rev {
				a.claimRev, a.claimSeen = rev, time.Now()
			}
			live := time.Since(a.claimSeen) < claimTTL
			a.mu.Unlock()
			if live {
				return claimBusy, 0
			}
			a.log.Warn("codex: taking over a refresh claim that has not changed for a while", "holder", c.By, "for", claimTTL)
		}
		ctx, cancel = a.storeCtx()
		nrev, ok, err := a.cfg.Coordinator.Put(ctx, a.key, a.seal.seal(a.key,
			sharedLogin{V: 1, Tokens: &cur, Claim: &shareClaim{By: a.id, At: time.Now().UTC()}}), rev)
		cancel()
		if err != nil {
			a.log.Warn("codex: cannot write to the pool's credential store", "error", err)
			return claimFailed, 0
		}
		if ok {
			return claimHeld, nrev
		}
	}
	return claimBusy, 0
}

// holdClaim renews the claim on cur at rev until the returned stop is called; stop returns the
// claim's latest revision (unchanged if another worker took it over meanwhile).
func (a *Auth) holdClaim(cur tokens, rev uint64) (stop func() uint64) {
	done := make(chan struct{})
	out := make(chan uint64, 1)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		t := time.NewTicker(claimTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				out <- rev
				return
			case <-t.C:
			}
			ctx, cancel := a.finishCtx()
			nrev, ok, err := a.cfg.Coordinator.Put(ctx, a.key, a.seal.seal(a.key,
				sharedLogin{V: 1, Tokens: &cur, Claim: &shareClaim{By: a.id, At: time.Now().UTC()}}), rev)
			cancel()
			switch {
			case err != nil:
				a.log.Warn("codex: cannot renew the refresh claim", "error", err)
			case !ok:
				a.log.Warn("codex: another worker took over the refresh claim while the refresh was in flight")
			default:
				rev = nrev
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-out
	}
}

// publish writes t (and a refusal code, or none) for the pool and drops the claim. The write is
// a compare-and-set on rev; when it fails and force is set (tokens from a successful refresh:
// the only valid ones now, since the refresh spent the old token) they are written anyway at the
// latest revision, unless the pool already has them or newer ones; otherwise the write is
// dropped.
func (a *Auth) publish(t tokens, rev uint64, refused string, force bool) {
	value := a.seal.seal(a.key, sharedLogin{V: 1, Tokens: &t, Refused: refused})
	for range 3 {
		ctx, cancel := a.finishCtx()
		_, ok, err := a.cfg.Coordinator.Put(ctx, a.key, value, rev)
		cancel()
		if err != nil {
			a.log.Warn("codex: cannot publish the login to the pool", "error", err)
			return
		}
		if ok || !force {
			return
		}
		ctx, cancel = a.finishCtx()
		cur, nrev, err := a.cfg.Coordinator.Get(ctx, a.key)
		cancel()
		if err != nil {
			return
		}
		if sl, ok := a.decode(cur); ok && sl.Tokens != nil && !t.newerThan(*sl.Tokens) {
			return // someone published these or newer ones already
		}
		rev = nrev
	}
}

// offer publishes tokens read from the file when they are newer than the pool's and nobody is
// refreshing.
func (a *Auth) offer(t tokens) {
	ctx, cancel := a.storeCtx()
	value, rev, err := a.cfg.Coordinator.Get(ctx, a.key)
	cancel()
	if err != nil {
		return
	}
	sl, _ := a.decode(value)
	if sl.Claim != nil || (sl.Tokens != nil && !t.newerThan(*sl.Tokens)) {
		return
	}
	ctx, cancel = a.storeCtx()
	_, _, _ = a.cfg.Coordinator.Put(ctx, a.key, a.seal.seal(a.key, sharedLogin{V: 1, Tokens: &t}), rev)
	cancel()
}

// watch follows the login's key until Close, restarting a failed watch with backoff.
func (a *Auth) watch() {
	defer a.wg.Done()
	wait := time.Second
	for {
		err := a.cfg.Coordinator.Watch(a.ctx, a.key, func(value []byte, _ uint64) {
			wait = time.Second
			if sl, ok := a.decode(value); ok {
				a.learn(sl, "pool")
			}
		})
		if a.ctx.Err() != nil {
			return
		}
		a.log.Warn("codex: watching the pool's credential store failed; retrying", "error", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-a.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
}
