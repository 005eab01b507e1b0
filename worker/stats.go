package worker

import (
	"strconv"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
)

// AccountInfo is what other packages may hold of one account: its name, its connect gate and a
// non-secret identity of its credentials. It never carries a credential.
type AccountInfo struct {
	Name string
	// Gate is the account's own connect gate (e.g. to share its state with the other workers
	// that use the same credentials).
	Gate *gate.Gate
	// Identity is a hex hash of the credentials, the same in every worker that uses them: of the
	// ChatGPT account id when there is one (stable across token refreshes), else of the token.
	Identity string
}

// Accounts returns the worker's accounts in configuration order (one named DefaultAccountName
// with the one-account shortcut).
func (w *Worker) Accounts() []AccountInfo {
	out := make([]AccountInfo, len(w.router.accounts))
	for i, a := range w.router.accounts {
		out[i] = AccountInfo{Name: a.name, Gate: a.gate, Identity: a.identity}
	}
	return out
}

// AccountStats is one account's state and counters, for metrics and the service's stats (which
// show it as a schemas.AccountStats).
type AccountStats struct {
	Name string
	// Windows are the usage windows the origin last reported, by family and length.
	Windows []schemas.WindowUsage
	// CoolingDown is true until CooldownUntil; Reason says why (never a secret).
	CoolingDown   bool
	CooldownUntil time.Time
	Reason        string
	// LastCall is true when the next generation could reach the account's ceiling: it runs one
	// at a time.
	LastCall       bool
	MaxUsedPercent float64
	Inflight       int

	Requests     int64 // generations started on the account
	Completed    int64 // of those, completed
	Limited      int64 // refused for a usage or rate limit (429)
	Unauthorized int64 // refused for its credentials (401)
	Proxy        int64 // tries its proxy failed (unreachable, 407, no answer in time)
	Moved        int64 // refused ones that moved to another account
	Cooldowns    int64 // cooldowns begun or extended
	// Answered counts requests answered at once, naming this account, because every account was
	// cooling down.
	Answered int64

	Gate     gate.Snapshot
	Upstream schemas.UpstreamStats
}

// CooldownLeft returns how long the cooldown lasts after now; 0 when not cooling down.
func (s AccountStats) CooldownLeft(now time.Time) time.Duration {
	if !s.CoolingDown {
		return 0
	}
	return max(s.CooldownUntil.Sub(now), 0)
}

// AccountStats returns every account's state and counters, in configuration order.
func (w *Worker) AccountStats() []AccountStats {
	now := time.Now()
	r := w.router
	out := make([]AccountStats, len(r.accounts))
	r.mu.Lock()
	for i, a := range r.accounts {
		av := a.lim.available(now)
		out[i] = AccountStats{Name: a.name, Windows: a.lim.usage(now), MaxUsedPercent: a.lim.ceiling,
			Inflight: a.lim.inflight, LastCall: av.lastCall}
		if av.cooling {
			out[i].CoolingDown, out[i].CooldownUntil, out[i].Reason = true, av.until, a.lim.coolWhy
		}
	}
	r.mu.Unlock()
	for i, a := range r.accounts {
		s := &out[i]
		s.Requests, s.Completed = a.requests.Load(), a.completed.Load()
		s.Limited, s.Unauthorized, s.Moved = a.limited.Load(), a.unauthorized.Load(), a.moved.Load()
		s.Proxy = a.proxyFailures.Load()
		s.Cooldowns, s.Answered = a.cooldowns.Load(), a.fasts.Load()
		s.Gate, s.Upstream = a.gate.Snapshot(), a.codex.Stats()
	}
	return out
}

// StatsData returns the worker's part of the service's stats (schemas.Stats): gate and upstream
// over all accounts, and every account's state.
func (w *Worker) StatsData() schemas.WorkerStats {
	accts := w.AccountStats()
	now := time.Now()
	out := schemas.WorkerStats{Gate: gateData(w.GateSnapshot()), Upstream: w.UpstreamStats(), Accounts: make([]schemas.AccountStats, len(accts))}
	for i, s := range accts {
		out.Accounts[i] = accountData(s, now)
	}
	return out
}

func accountData(s AccountStats, now time.Time) schemas.AccountStats {
	d := schemas.AccountStats{
		Name: s.Name, Windows: s.Windows, CoolingDown: s.CoolingDown, LastCall: s.LastCall,
		MaxUsedPercent: s.MaxUsedPercent, Inflight: s.Inflight,
		Requests: s.Requests, Completed: s.Completed, Limited: s.Limited, Unauthorized: s.Unauthorized,
		Proxy: s.Proxy, Moved: s.Moved, Cooldowns: s.Cooldowns, Answered: s.Answered,
		Gate: gateData(s.Gate), Upstream: s.Upstream,
	}
	if s.CoolingDown {
		d.Cooldown = &schemas.Cooldown{Until: s.CooldownUntil, LeftMS: s.CooldownLeft(now).Milliseconds(), Reason: s.Reason}
	}
	return d
}

func gateData(s gate.Snapshot) schemas.GateStats {
	return schemas.GateStats{
		Mode: string(s.Mode), SpacingMS: s.Spacing.Milliseconds(), Streak: s.Streak,
		Rejections: s.Rejections, Starts: s.Starts, WaitedMS: s.Waited.Milliseconds(),
		Successes: s.Successes, Failures: s.Failures,
		Window: s.Window, InFlight: s.InFlight, Queued: s.Queued,
		Closed: s.Closed, Epoch: s.Epoch, Peers: s.Peers, FleetAccepted: s.FleetAccepted,
		Signals: schemas.GateSignals{Applied: s.SignalsApplied, Invalid: s.SignalsInvalid,
			Stale: s.SignalsStale, Flooded: s.SignalsFlooded, Unknown: s.SignalsUnknown,
			Doubted: s.SignalsDoubted, PeersDoubted: s.PeersDoubted, HoldsContradicted: s.HoldsContradicted},
	}
}

// UpstreamStats returns the Codex clients' counters summed over the accounts.
func (w *Worker) UpstreamStats() schemas.UpstreamStats {
	var t schemas.UpstreamStats
	for _, a := range w.router.accounts {
		s := a.codex.Stats()
		t.Dials += s.Dials
		t.Upgrades += s.Upgrades
		t.Forbidden += s.Forbidden
		t.Generations += s.Generations
		t.Completed += s.Completed
		t.Reused += s.Reused
		t.Retries += s.Retries
		t.Discarded += s.Discarded
		t.Expired += s.Expired
		t.Idle += s.Idle
		t.Pinned += s.Pinned
		t.Open += s.Open
	}
	return t
}

// GateSnapshot returns the accounts' gates as one: counters, windows, permits in flight and
// callers queued summed; the widest spacing; the mode and streak of the first account.
func (w *Worker) GateSnapshot() gate.Snapshot {
	var t gate.Snapshot
	for i, a := range w.router.accounts {
		s := a.gate.Snapshot()
		if i == 0 {
			t.Mode, t.Streak = s.Mode, s.Streak
		}
		t.Spacing = max(t.Spacing, s.Spacing)
		t.Rejections += s.Rejections
		t.Starts += s.Starts
		t.Waited += s.Waited
		t.Successes += s.Successes
		t.Failures += s.Failures
		t.Window += s.Window
		t.InFlight += s.InFlight
		t.Queued += s.Queued
		t.Closed = t.Closed || s.Closed
		t.Epoch = max(t.Epoch, s.Epoch)
		t.Peers = max(t.Peers, s.Peers)
		t.FleetAccepted += s.FleetAccepted
		t.SignalsApplied += s.SignalsApplied
		t.SignalsInvalid += s.SignalsInvalid
		t.SignalsStale += s.SignalsStale
		t.SignalsFlooded += s.SignalsFlooded
		t.SignalsUnknown += s.SignalsUnknown
		t.SignalsDoubted += s.SignalsDoubted
		t.PeersDoubted += s.PeersDoubted
		t.HoldsContradicted += s.HoldsContradicted
	}
	return t
}

// Gate returns the first account's connect gate (the only one with the one-account shortcut).
// See Accounts for every account's.
func (w *Worker) Gate() *gate.Gate { return w.router.accounts[0].gate }

// formatMinutes names a window length: "5-hour", "7-day", "90-minute".
func formatMinutes(m int) string {
	switch {
	case m%(24*60) == 0:
		return strconv.Itoa(m/(24*60)) + "-day"
	case m%60 == 0:
		return strconv.Itoa(m/60) + "-hour"
	}
	return strconv.Itoa(m) + "-minute"
}

// formatPercent writes a percentage without noise: 42%, 12.5%.
func formatPercent(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}
