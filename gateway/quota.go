package gateway

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// The pool's quota, for clients that show their account's usage (the Codex CLI's status line):
// the x-codex-primary-* / x-codex-secondary-* headers on generation replies, and GET
// /backend-api/wham/usage and GET /api/codex/usage in the origin's shape, with the figures of
// the whole pool instead of one account's.

// Window is one pool-wide usage window: the mean used percent of the accounts reporting a window
// of that length (each account's share of the pool's capacity is the same), and the soonest
// reset among them (when some of that capacity comes back).
type Window struct {
	UsedPercent float64
	Minutes     int
	ResetAt     time.Time // zero: unknown
}

// Quota is the pool's usage: the 5 h window (primary) and the weekly one (secondary), each nil
// when no account reported it, over Accounts accounts.
type Quota struct {
	Primary, Secondary *Window
	Accounts           int
}

// QuotaSource hands out the latest Quota without blocking (QuotaPoller is one); ok is false
// while there is none. Fresh may block for a short while to return one that is at most a
// second old and newer than the last Used (the usage routes ask it: a client that just ran a
// generation expects to see it); the gateway calls Used for every generation it forwards.
type QuotaSource interface {
	Quota() (q Quota, ok bool)
	Fresh(ctx context.Context) (q Quota, ok bool)
	Used()
}

// Window lengths by duration, as the origin reports them (clients.md: classify by duration).
const (
	fiveHourMinutes = 300
	weekMinutes     = 7 * 24 * 60
)

// sendQuota puts the pool's quota headers on the reply to an authorized POST.
func (g *Gateway) sendQuota(w http.ResponseWriter, r *http.Request, c call) {
	if g.cfg.Quota == nil || !c.authed || r.Method != http.MethodPost {
		return
	}
	g.cfg.Quota.Used()
	if q, ok := g.cfg.Quota.Quota(); ok {
		quotaHeaders(w.Header(), q, time.Now())
	}
}

// quotaHeaders sets the x-codex-* headers of q on h.
func quotaHeaders(h http.Header, q Quota, now time.Time) {
	for _, w := range []struct {
		name string
		win  *Window
	}{{"primary", q.Primary}, {"secondary", q.Secondary}} {
		if w.win == nil {
			continue
		}
		p := "X-Codex-" + w.name + "-"
		h.Set(p+"Used-Percent", strconv.FormatFloat(w.win.UsedPercent, 'f', -1, 64))
		h.Set(p+"Window-Minutes", strconv.Itoa(w.win.Minutes))
		if !w.win.ResetAt.IsZero() {
			h.Set(p+"Reset-At", strconv.FormatInt(w.win.ResetAt.Unix(), 10))
			h.Set(p+"Reset-After-Seconds", strconv.FormatInt(int64(max(w.win.ResetAt.Sub(now), 0)/time.Second), 10))
		}
	}
}

// whamWindow is a window of the origin's usage endpoint (integers: the Codex CLI decodes them as
// such).
type whamWindow struct {
	UsedPercent        int   `json:"used_percent"`
	LimitWindowSeconds int   `json:"limit_window_seconds"`
	ResetAfterSeconds  int64 `json:"reset_after_seconds"`
	ResetAt            int64 `json:"reset_at"`
}

// whamUsage is the body of GET /backend-api/wham/usage (and /api/codex/usage).
type whamUsage struct {
	PlanType  string `json:"plan_type"`
	RateLimit struct {
		Allowed         bool        `json:"allowed"`
		LimitReached    bool        `json:"limit_reached"`
		PrimaryWindow   *whamWindow `json:"primary_window"`
		SecondaryWindow *whamWindow `json:"secondary_window"`
	} `json:"rate_limit"`
	Credits struct {
		HasCredits bool    `json:"has_credits"`
		Unlimited  bool    `json:"unlimited"`
		Balance    *string `json:"balance"`
	} `json:"credits"`
}

func toWham(w *Window, now time.Time) *whamWindow {
	if w == nil {
		return nil
	}
	out := &whamWindow{UsedPercent: int(math.Round(w.UsedPercent)), LimitWindowSeconds: w.Minutes * 60}
	if !w.ResetAt.IsZero() {
		out.ResetAt = w.ResetAt.Unix()
		out.ResetAfterSeconds = int64(max(w.ResetAt.Sub(now), 0) / time.Second)
	}
	return out
}

// usageBody is the wham/usage body of q: plan "pro", limit reached when a window is at 100%.
func usageBody(q Quota, now time.Time) []byte {
	var u whamUsage
	u.PlanType = "pro"
	u.RateLimit.PrimaryWindow, u.RateLimit.SecondaryWindow = toWham(q.Primary, now), toWham(q.Secondary, now)
	for _, w := range []*Window{q.Primary, q.Secondary} {
		if w != nil && w.UsedPercent >= 100 {
			u.RateLimit.LimitReached = true
		}
	}
	u.RateLimit.Allowed = !u.RateLimit.LimitReached
	b, _ := json.Marshal(u)
	return b
}

// getQuota serves GET /backend-api/wham/usage and GET /api/codex/usage.
func (g *Gateway) getQuota(w http.ResponseWriter, r *http.Request) outcome {
	if r.Method != http.MethodGet {
		return g.methodNotAllowed(w, r, http.MethodGet)
	}
	var q Quota
	if g.cfg.Quota != nil {
		q, _ = g.cfg.Quota.Fresh(r.Context())
	}
	writeJSON(w, http.StatusOK, usageBody(q, time.Now()))
	return ok(http.StatusOK)
}

// QuotaPoller keeps the pool's Quota from the workers' micro stats ($SRV.STATS.codexpool: each
// account's usage windows), asked every Every, so no request waits for it. Make one with
// NewQuotaPoller, run Run on a goroutine the caller waits for; it is safe for concurrent use.
type QuotaPoller struct {
	nc    *nats.Conn
	every time.Duration
	wait  time.Duration

	polling sync.Mutex // held by a Poll: callers of Fresh wait for it instead of asking again

	mu    sync.Mutex
	q     Quota
	ok    bool
	at    time.Time // when q was polled
	dirty bool      // a generation ran since
}

// quotaMaxAge is how old a Quota that Fresh returns may be.
const quotaMaxAge = time.Second

// DefaultQuotaEvery is how often a QuotaPoller asks the workers by default.
const DefaultQuotaEvery = 5 * time.Second

// NewQuotaPoller returns a poller asking over nc every every (default 5 s).
func NewQuotaPoller(nc *nats.Conn, every time.Duration) *QuotaPoller {
	if every <= 0 {
		every = DefaultQuotaEvery
	}
	return &QuotaPoller{nc: nc, every: every, wait: min(every/2, 500*time.Millisecond)}
}

// Quota returns the last poll's Quota.
func (p *QuotaPoller) Quota() (Quota, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.q, p.ok
}

// Used notes that a generation ran: the next Fresh polls.
func (p *QuotaPoller) Used() {
	p.mu.Lock()
	p.dirty = true
	p.mu.Unlock()
}

// Fresh returns a Quota at most quotaMaxAge old and polled after the last Used: when it has
// none, it polls first (waiting at most half of Every, and 500 ms, for the workers' answers).
func (p *QuotaPoller) Fresh(ctx context.Context) (Quota, bool) {
	if p.stale() {
		p.polling.Lock()
		if p.stale() { // not polled meanwhile by another caller
			p.Poll(ctx)
		}
		p.polling.Unlock()
	}
	return p.Quota()
}

func (p *QuotaPoller) stale() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dirty || time.Since(p.at) > quotaMaxAge
}

// Run polls until ctx ends, at once and then every Every.
func (p *QuotaPoller) Run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		p.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll asks the workers once and keeps what they answered.
func (p *QuotaPoller) Poll(ctx context.Context) {
	p.mu.Lock()
	p.dirty = false // what ran before this poll shows in its answers
	p.mu.Unlock()
	stats, err := client.Stats(ctx, p.nc, p.wait)
	if err != nil && len(stats) == 0 {
		p.mu.Lock()
		p.at = time.Now() // keep the last Quota; Fresh asks again after quotaMaxAge, not at once
		p.mu.Unlock()
		return
	}
	accts := map[string][]schemas.WindowUsage{}
	for _, s := range stats {
		for _, ep := range s.Endpoints {
			var d schemas.WorkerStats
			if json.Unmarshal(ep.Data, &d) != nil {
				continue
			}
			for _, a := range d.Accounts {
				accts[a.Name] = freshest(accts[a.Name], a.Windows)
			}
		}
	}
	q := poolQuota(accts)
	p.mu.Lock()
	p.q, p.ok, p.at = q, true, time.Now()
	p.mu.Unlock()
}

// used is a window's best estimate of the used percent: the projection adds what the worker
// completed since the origin's last report (which comes before a response, so it lags by one),
// shown when higher.
func used(w schemas.WindowUsage) float64 { return min(max(w.UsedPercent, w.Projected), 100) }

// freshest merges what two workers report of one account: per window, the higher use (the
// worker that saw the later report, as use only grows until the reset).
func freshest(a, b []schemas.WindowUsage) []schemas.WindowUsage {
	out := append([]schemas.WindowUsage(nil), a...)
	for _, w := range b {
		found := false
		for i := range out {
			if out[i].Limit == w.Limit && out[i].Minutes == w.Minutes {
				found = true
				if used(w) > used(out[i]) {
					out[i] = w
				}
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// poolQuota sums the accounts' codex-family windows into the pool's: an account that reports
// no window of a length counts as unused in it.
func poolQuota(accts map[string][]schemas.WindowUsage) Quota {
	q := Quota{Accounts: len(accts)}
	for _, class := range []struct {
		minutes int
		into    **Window
	}{{fiveHourMinutes, &q.Primary}, {weekMinutes, &q.Secondary}} {
		var sum float64
		var reset time.Time
		seen := false
		for _, ws := range accts {
			for _, w := range ws {
				if (w.Limit != "" && w.Limit != "codex") || w.Minutes != class.minutes {
					continue
				}
				seen = true
				sum += used(w)
				if !w.ResetAt.IsZero() && (reset.IsZero() || w.ResetAt.Before(reset)) {
					reset = w.ResetAt
				}
			}
		}
		if seen {
			*class.into = &Window{UsedPercent: math.Round(sum/float64(len(accts))*10) / 10, Minutes: class.minutes, ResetAt: reset}
		}
	}
	return q
}
