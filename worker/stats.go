package worker

import (
	"strconv"
	"time"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/worker/codex"
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

// AccountStats is one account's state and counters, for metrics and the service's stats.
type AccountStats struct {
	Name string `json:"name"`
	// Windows are the usage windows the origin last reported, by family and length.
	Windows []WindowUsage `json:"windows,omitempty"`
	// CoolingDown is true until CooldownUntil; Reason says why (never a secret).
	CoolingDown   bool      `json:"cooling_down"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	Reason        string    `json:"cooldown_reason,omitempty"`
	// LastCall is true when the next generation could reach the account's ceiling: it runs one
	// at a time.
	LastCall       bool    `json:"last_call"`
	MaxUsedPercent float64 `json:"max_used_percent"`
	Inflight       int     `json:"inflight"`

	Requests     int64 `json:"requests"`     // generations started on the account
	Completed    int64 `json:"completed"`    // of those, completed
	Limited      int64 `json:"limited"`      // refused for a usage or rate limit (429)
	Unauthorized int64 `json:"unauthorized"` // refused for its credentials (401)
	Moved        int64 `json:"moved"`        // refused ones that moved to another account
	Cooldowns    int64 `json:"cooldowns"`    // cooldowns begun or extended
	// Answered counts requests answered at once, naming this account, because every account was
	// cooling down.
	Answered int64 `json:"answered_cooling"`

	Gate     gate.Snapshot `json:"-"`
	Upstream codex.Stats   `json:"upstream"`
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
		s.Cooldowns, s.Answered = a.cooldowns.Load(), a.fasts.Load()
		s.Gate, s.Upstream = a.gate.Snapshot(), a.codex.Stats()
	}
	return out
}

// StatsData returns the worker's gate and upstream state for the service's stats: "gate" and
// "upstream" over all accounts (see GateSnapshot and UpstreamStats) and "accounts", one entry per
// account with its usage windows, cooldown, counters, gate and upstream counters.
func (w *Worker) StatsData() map[string]any {
	accts := w.AccountStats()
	list := make([]map[string]any, len(accts))
	for i, s := range accts {
		m := map[string]any{
			"name": s.Name, "cooling_down": s.CoolingDown, "last_call": s.LastCall,
			"max_used_percent": s.MaxUsedPercent, "inflight": s.Inflight,
			"requests": s.Requests, "completed": s.Completed, "limited": s.Limited,
			"unauthorized": s.Unauthorized, "moved": s.Moved, "cooldowns": s.Cooldowns,
			"answered_cooling": s.Answered, "gate": gateData(s.Gate), "upstream": s.Upstream,
		}
		if len(s.Windows) > 0 {
			m["windows"] = s.Windows
		}
		if s.CoolingDown {
			m["cooldown_until"] = s.CooldownUntil
			m["cooldown_left_ms"] = s.CooldownLeft(time.Now()).Milliseconds()
			m["cooldown_reason"] = s.Reason
		}
		list[i] = m
	}
	return map[string]any{
		"gate":     gateData(w.GateSnapshot()),
		"upstream": w.UpstreamStats(),
		"accounts": list,
	}
}

func gateData(s gate.Snapshot) map[string]any {
	return map[string]any{
		"mode": s.Mode, "spacing_ms": s.Spacing.Milliseconds(), "streak": s.Streak,
		"rejections": s.Rejections, "starts": s.Starts, "waited_ms": s.Waited.Milliseconds(),
		"successes": s.Successes, "failures": s.Failures,
		"window": s.Window, "in_flight": s.InFlight, "queued": s.Queued,
		"closed": s.Closed, "epoch": s.Epoch, "peers": s.Peers, "fleet_accepted_per_s": s.FleetAccepted,
		"signals": map[string]int64{"applied": s.SignalsApplied, "invalid": s.SignalsInvalid,
			"stale": s.SignalsStale, "flooded": s.SignalsFlooded, "unknown": s.SignalsUnknown},
	}
}

// UpstreamStats returns the Codex clients' counters summed over the accounts.
func (w *Worker) UpstreamStats() codex.Stats {
	var t codex.Stats
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
