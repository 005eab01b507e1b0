package login

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
)

// refresh runs one refresh attempt, unless it turns out not to be needed (a re-read found newer
// tokens, another holder of the login is refreshing it). unauthorized: a 401 asked for it.
func (a *Auth) refresh(unauthorized bool) {
	a.reload()
	cur, due := a.due(unauthorized)
	if !due {
		a.attemptEnded(cur.bearer(), false)
		return
	}
	if a.ctx.Err() != nil {
		return // closing: no new refresh
	}
	unlock, ok, err := tryLockFile(a.lock)
	if err != nil {
		a.log.Debug("codex: no lock file beside the auth file; refreshing without it", "error", err)
		unlock, ok = func() {}, true
	}
	if !ok {
		a.busy() // another process of this machine is refreshing: its tokens will be in the file
		return
	}
	defer unlock()
	a.reload() // the previous holder of the lock may have just written new tokens
	a.mu.Lock()
	again := a.tok.same(cur)
	a.mu.Unlock()
	if !again {
		a.attemptEnded(cur.bearer(), false)
		return
	}
	tr, ok := a.takeTurn(cur, unauthorized)
	if ok {
		a.send(cur, tr, unauthorized)
	}
}

// due returns the tokens in use and whether refreshing them is due now.
func (a *Auth) due(unauthorized bool) (tokens, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.tok
	skip := a.outage.down != nil || cur.RefreshToken == "" ||
		(unauthorized && a.sched.kickedFor != cur.bearer()) || // a re-read cured the 401
		(unauthorized && a.sched.doneFor == cur.bearer()) || // the scheduled pass already tried it
		(!unauthorized && time.Now().Before(a.nextRefreshLocked()))
	return cur, !skip
}

// turn is this Auth's right to refresh: a claim in the pool (shared), or none when the login
// is not shared or the pool's store is unreachable (the Auth then refreshes alone).
type turn struct {
	shared   bool
	rev, seq uint64                  // the claim's revision and the Seq of the tokens it holds
	stop     func() (uint64, uint64) // stops renewing the claim; returns its latest revision
}

// takeTurn claims the login's refresh turn in the pool, if it is shared. ok is false when no
// refresh is to be made now (newer tokens arrived, another worker is refreshing, or the store is
// down and the token can wait for it).
func (a *Auth) takeTurn(cur tokens, unauthorized bool) (turn, bool) {
	if a.key == "" {
		return turn{}, true
	}
	res, rev, seq := a.claim(cur)
	switch res {
	case claimNewer:
		a.attemptEnded(cur.bearer(), false)
		return turn{}, false
	case claimBusy:
		a.busy()
		return turn{}, false
	case claimFailed:
		if a.ctx.Err() != nil {
			return turn{}, false // not the store: Close cut the call short
		}
		if !unauthorized && a.waitForStore() {
			return turn{}, false
		}
		a.mu.Lock()
		a.st.AloneRefreshes++
		a.mu.Unlock()
		return turn{}, true // refresh alone: the store said so once already (storeFailed)
	}
	tr := turn{shared: true, rev: rev, seq: seq}
	stop := a.holdClaim(cur, rev, seq)
	tr.stop = func() (uint64, uint64) { return stop(), seq }
	return tr, true
}

// send makes the refresh request for cur and acts on its answer.
func (a *Auth) send(cur tokens, tr turn, unauthorized bool) {
	red := origintext.NewRedactor(append(cur.secrets(), a.cfg.RefreshURL)...)
	// From here on Close waits: once sent, the request may spend the refresh token.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), a.cfg.RefreshTimeout)
	start := time.Now()
	ans, err := postRefresh(rctx, a.hc, a.cfg.RefreshURL, a.cfg.ClientID, cur.RefreshToken, red)
	cancel()
	if tr.shared {
		tr.rev, _ = tr.stop()
	}
	var re *refreshError
	switch {
	case err == nil:
		a.refreshed(cur, ans, tr, unauthorized, time.Since(start))
	case errors.As(err, &re) && re.permanent:
		a.mu.Lock()
		a.st.RefreshFailures++
		a.goDownLocked(re.code, "refresh")
		a.mu.Unlock()
		a.log.Warn("codex: token refresh refused", "error", re.msg)
		if tr.shared {
			a.publish(cur, tr.seq, tr.rev, re.code, false)
		}
		a.attemptEnded(cur.bearer(), true)
	default:
		uncertain := !errors.As(err, &re) || re.uncertain
		msg := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer within %s", a.cfg.RefreshTimeout)
		}
		if tr.shared {
			a.publish(cur, tr.seq, tr.rev, "", false) // release the claim
		}
		a.failed(cur, uncertain, msg)
	}
}

// refreshed adopts the tokens of a successful refresh of cur, writes them to the file and, when
// the turn was the pool's, publishes them there (one Seq up).
func (a *Auth) refreshed(cur tokens, ans refreshAnswer, tr turn, unauthorized bool, took time.Duration) {
	nt := cur
	nt.IDToken = or(ans.IDToken, cur.IDToken)
	nt.AccessToken = or(ans.AccessToken, cur.AccessToken)
	nt.RefreshToken = or(ans.RefreshToken, cur.RefreshToken)
	nt.LastRefresh = time.Now().UTC()
	if nt.AccountID == "" {
		nt.AccountID = accountFromIDToken(nt.IDToken)
	}
	a.writeFile(nt) // before the tokens are used: then whoever learns of them finds them there
	a.mu.Lock()
	a.st.Refreshes++
	a.adoptLocked(nt, "refresh")
	seq := a.lin.next(tr.seq)
	a.mu.Unlock()
	if ans.RefreshToken == "" {
		a.log.Warn("codex: the token endpoint sent no new refresh token; keeping the old one")
	}
	a.log.Info("codex: tokens refreshed", "unauthorized", unauthorized, "took", took.Round(time.Millisecond),
		"expires_at", nt.expiry(), "shared", tr.shared)
	if tr.shared {
		a.publish(nt, seq, tr.rev, "", true)
	}
	a.attemptEnded(cur.bearer(), true)
}

// waitForStore puts a scheduled refresh off while the pool's store is down and the token has
// more than half its refresh lead left to live: a worker on another machine may be due at the
// same moment, and two refreshes alone would spend the refresh token twice (the endpoint then
// revokes the login). Short outages thus cost no refresh alone. It reports whether it did.
func (a *Auth) waitForStore() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, lead := a.leadLocked()
	if exp.IsZero() || time.Until(exp) <= lead/2 {
		return false
	}
	a.sched.retryAt = time.Now().Add(min(lead/8, storeRetry))
	return true
}
