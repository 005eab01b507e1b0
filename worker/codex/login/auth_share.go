package login

import (
	"context"
	"os"
	"time"
)

// How an Auth shares its login through a Coordinator. The login's key holds a sealed
// sharedLogin: the newest tokens any worker has with their Seq, a claim while one of them
// refreshes, and the refusal code once the token endpoint refused them for good. Every write is a
// compare-and-set on the revision the writer read, so the store orders them; there is no lock to
// lose and no clock to trust:
//
//   - to refresh, a worker reads the value; newer tokens there are adopted instead; a live claim
//     by another worker means waiting (its new tokens arrive through the watch); otherwise it
//     writes its tokens with its claim at the revision it read. Only one such write succeeds.
//   - while its refresh request is in flight it renews the claim every claimTTL/4; a claim that
//     does not change for claimTTL (by the waiter's clock) is a dead worker's and is taken over.
//   - the refresher writes the rotated tokens (one Seq up) without a claim (or, refused, the
//     refusal code); every worker watching the key adopts them and writes its own copy of the
//     auth file.
//   - tokens a worker reads from its file (a new `codex login`) are offered to the pool one Seq
//     up, and so are its own when the pool is behind it (it refreshed while the store was down).
//   - a value that does not open under the pool key is never adopted: it is counted, logged
//     (once per revision, without any of it) and overwritten by the next write.
//   - a store that does not answer never stops a refresh: the worker refreshes alone (it says
//     so once per outage) and shares again when the store answers (see storeHealth).
//
// Which tokens are newer is lineage's business (lineage.go).

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
	return context.WithTimeout(a.ctx, a.cfg.StoreTimeout)
}

// finishCtx bounds one Coordinator call for a refresh already sent (renewing its claim,
// publishing its answer): Close waits for it, since the answer may hold the only valid tokens.
func (a *Auth) finishCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(a.ctx), a.cfg.StoreTimeout)
}

// decode opens the shared value at rev. A value that does not open is counted and logged once
// per revision, and treated as absent (the next write overwrites it).
func (a *Auth) decode(value []byte, rev uint64) (sharedLogin, bool) {
	if len(value) == 0 {
		return sharedLogin{}, false
	}
	sl, err := a.seal.open(a.key, value)
	if err == nil {
		return sl, true
	}
	a.mu.Lock()
	logIt := a.share.badRev != rev
	if logIt {
		a.share.badRev = rev
		a.st.Ignored++
	}
	a.mu.Unlock()
	if logIt {
		a.log.Error("codex: ignored a shared login that does not open under the pool key; it is never used and will be overwritten",
			"reason", err, "revision", rev)
	}
	return sharedLogin{}, false
}

// learn acts on what an opened shared value says: newer tokens are adopted (and written to the
// file first), the refusal of ours takes the account out of service, and a pool that is behind
// is sent ours. It reports whether it changed anything.
func (a *Auth) learn(sl sharedLogin, from string) bool {
	a.mu.Lock()
	v := a.lin.judge(*sl.Tokens, sl.Seq, a.tok, time.Now())
	cur := a.tok
	a.mu.Unlock()
	if v == verdictAdopt {
		a.writeFile(*sl.Tokens) // this machine's copy of the login, before it is used
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.tok.same(cur) { // changed meanwhile (a reload): judge again
		v = a.lin.judge(*sl.Tokens, sl.Seq, a.tok, time.Now())
	}
	a.lin.saw(sl.Seq)
	switch {
	case v == verdictAdopt:
		a.st.FromPool++
		a.adoptLocked(*sl.Tokens, from)
		if sl.Refused != "" {
			a.goDownLocked(sl.Refused, from)
		}
		a.log.Info("codex: new tokens received from the pool", "expires_at", sl.Tokens.expiry(), "refused", sl.Refused)
		return true
	case v == verdictOffer:
		a.offerLocked()
	case sl.Refused != "" && sl.Tokens.RefreshToken == a.tok.RefreshToken:
		a.goDownLocked(sl.Refused, from)
		return true
	}
	return false
}

// claim takes the login's refresh turn in the pool for cur. It returns the claim's revision
// and the Seq it was written with.
func (a *Auth) claim(cur tokens) (claimResult, uint64, uint64) {
	for range 3 {
		if a.skipStore() {
			return claimFailed, 0, 0
		}
		ctx, cancel := a.storeCtx()
		value, rev, err := a.cfg.Coordinator.Get(ctx, a.key)
		cancel()
		if err != nil {
			a.storeFailed(err)
			return claimFailed, 0, 0
		}
		a.storeUp()
		sl, ok := a.decode(value, rev)
		if ok {
			a.learn(sl, "pool")
		}
		// Compare with cur, not just with what learn saw: the watch may have adopted newer
		// tokens meanwhile, and cur's refresh token may be spent already.
		a.mu.Lock()
		moved := !a.tok.same(cur) || a.outage.down != nil
		seq := a.seqForLocked(sl, ok, cur)
		a.mu.Unlock()
		if moved {
			return claimNewer, 0, 0
		}
		if ok && sl.Claim != nil && sl.Claim.By != a.id && a.liveClaim(rev, sl.Claim.By) {
			return claimBusy, 0, 0
		}
		ctx, cancel = a.storeCtx()
		nrev, done, err := a.cfg.Coordinator.Put(ctx, a.key, a.seal.seal(a.key,
			sharedLogin{V: shareVersion, Tokens: &cur, Seq: seq, Claim: &shareClaim{By: a.id, At: time.Now().UTC()}}), rev)
		cancel()
		if err != nil {
			a.storeFailed(err)
			return claimFailed, 0, 0
		}
		if done {
			a.mu.Lock()
			a.lin.saw(seq)
			a.mu.Unlock()
			return claimHeld, nrev, seq
		}
	}
	return claimBusy, 0, 0
}

// seqForLocked is the Seq to write t with over the value sl (ok: it opened): the same as the
// pool's when it holds t already, else one more than any seen. a.mu is held.
func (a *Auth) seqForLocked(sl sharedLogin, ok bool, t tokens) uint64 {
	if ok && sl.Tokens.same(t) {
		return max(sl.Seq, a.lin.seq)
	}
	return a.lin.next(sl.Seq)
}

// liveClaim reports whether another worker's claim, seen at rev, is still live: it changed less
// than claimTTL ago by this Auth's clock.
func (a *Auth) liveClaim(rev uint64, by string) bool {
	a.mu.Lock()
	if a.share.claimRev != rev {
		a.share.claimRev, a.share.claimSeen = rev, time.Now()
	}
	live := time.Since(a.share.claimSeen) < claimTTL
	a.mu.Unlock()
	if !live {
		a.log.Warn("codex: taking over a refresh claim that has not changed for a while", "holder", by, "for", claimTTL)
	}
	return live
}

// holdClaim renews the claim on cur (at Seq seq) at rev until the returned stop is called; stop
// returns the claim's latest revision (unchanged if another worker took it over meanwhile).
func (a *Auth) holdClaim(cur tokens, rev, seq uint64) (stop func() uint64) {
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
				sharedLogin{V: shareVersion, Tokens: &cur, Seq: seq, Claim: &shareClaim{By: a.id, At: time.Now().UTC()}}), rev)
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

// publish writes t at Seq seq (and a refusal code, or none) for the pool and drops the claim.
// The write is a compare-and-set on rev; when it fails and force is set (tokens from a
// successful refresh: the only valid ones now, since the refresh spent the old token) they are
// written anyway at the latest revision, unless the pool holds them already or tokens this Auth
// has not seen replaced (another worker's newer ones); otherwise the write is dropped.
func (a *Auth) publish(t tokens, seq, rev uint64, refused string, force bool) {
	for range 3 {
		value := a.seal.seal(a.key, sharedLogin{V: shareVersion, Tokens: &t, Seq: seq, Refused: refused})
		ctx, cancel := a.finishCtx()
		_, ok, err := a.cfg.Coordinator.Put(ctx, a.key, value, rev)
		cancel()
		if err != nil {
			a.storeFailed(err)
			return // the watch re-offers them when the store is back (the pool is behind)
		}
		if ok {
			a.mu.Lock()
			a.lin.saw(seq)
			a.mu.Unlock()
			return
		}
		if !force {
			return
		}
		ctx, cancel = a.finishCtx()
		cur, nrev, err := a.cfg.Coordinator.Get(ctx, a.key)
		cancel()
		if err != nil {
			return
		}
		sl, opened := a.decode(cur, nrev)
		a.mu.Lock()
		theirs := opened && (sl.Tokens.same(t) || !a.lin.isSpent(sl.Tokens.RefreshToken))
		seq = a.lin.next(sl.Seq)
		a.mu.Unlock()
		if theirs {
			return // someone published these or newer ones already
		}
		rev = nrev
	}
}

// offerLocked sends the tokens in use to the pool in the background. One offer runs at a time;
// it offers again when the tokens changed while it ran, so the newest always gets there. a.mu is
// held.
func (a *Auth) offerLocked() {
	if a.key == "" || a.share.offering || a.ctx.Err() != nil {
		return
	}
	a.share.offering = true
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.mu.Lock()
		defer a.mu.Unlock()
		for a.ctx.Err() == nil {
			t := a.tok
			a.mu.Unlock()
			a.offer(t)
			a.mu.Lock()
			if a.tok.same(t) {
				break
			}
		}
		a.share.offering = false
	}()
}

// offer writes t (a new login from the file, or tokens the pool is behind on) over whatever the
// pool holds, one Seq up, unless the pool holds t already or this Auth moved on from t.
func (a *Auth) offer(t tokens) {
	for range 3 {
		if a.skipStore() {
			return
		}
		ctx, cancel := a.storeCtx()
		value, rev, err := a.cfg.Coordinator.Get(ctx, a.key)
		cancel()
		if err != nil {
			a.storeFailed(err)
			return
		}
		a.storeUp()
		sl, ok := a.decode(value, rev)
		a.mu.Lock()
		stale := !a.tok.same(t) || (ok && sl.Tokens.same(t))
		seq := a.lin.next(sl.Seq)
		a.mu.Unlock()
		if stale {
			return
		}
		ctx, cancel = a.storeCtx()
		_, done, err := a.cfg.Coordinator.Put(ctx, a.key, a.seal.seal(a.key, sharedLogin{V: shareVersion, Tokens: &t, Seq: seq}), rev)
		cancel()
		if err != nil {
			a.storeFailed(err)
			return
		}
		if done {
			a.mu.Lock()
			a.lin.saw(seq)
			a.mu.Unlock()
			a.log.Info("codex: offered this worker's login to the pool")
			return
		}
	}
}

// watch follows the login's key until Close, restarting a failed watch with backoff.
func (a *Auth) watch() {
	defer a.wg.Done()
	wait := time.Second
	for {
		err := a.cfg.Coordinator.Watch(a.ctx, a.key, func(value []byte, rev uint64) {
			wait = time.Second
			a.storeUp()
			if sl, ok := a.decode(value, rev); ok {
				a.learn(sl, "pool")
			}
		})
		if a.ctx.Err() != nil {
			return
		}
		a.storeFailed(err)
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
