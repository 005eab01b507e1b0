package codextest

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPlanType is the plan an Account reports when its PlanType is empty.
const DefaultPlanType = "pro"

// An Account is one ChatGPT account the server knows, set in Options.Accounts. A request is
// served as the account whose static Token it carries, or whose issued access token
// ([Logins.Issue], /oauth/token) it carries.
type Account struct {
	// Name identifies the account in Stats, Accounts.SetUsage, Logins.Issue and the control endpoints; it is
	// required and unique. Issued tokens carry it as their "sub" claim.
	Name string
	// Token is a static bearer token accepted for the account, never expiring. Empty = only
	// issued tokens (logins) are accepted for it.
	Token string
	// AccountID is the ChatGPT account id, put in issued tokens (the
	// "https://api.openai.com/auth" claim's chatgpt_account_id) and in Login.AccountID.
	// Empty = none.
	AccountID string
	// UpgradeRate is the account's own upgrade token bucket: new upgrades per second accepted for
	// it; above it its upgrades get 403, exactly like Options.UpgradeRate (which still applies on
	// top). 0 = no per-account limit.
	UpgradeRate float64
	// UpgradeBurst is the account's bucket size. 0 = max(1, ceil(UpgradeRate)).
	UpgradeBurst int
	// PlanType is reported in codex.rate_limits events, usage_limit_reached errors and issued
	// tokens. "" = DefaultPlanType ("pro").
	PlanType string
	// Windows are the account's usage windows, at most two: the first is reported as "primary",
	// the second as "secondary". nil = no usage limits, no rate-limit headers or events.
	Windows []Window
}

// A Window is one usage window of an Account. It starts at the account's first use (its first
// authenticated upgrade or HTTP request, or a SetUsage call) and resets every Length after that:
// its reset is at start + k·Length for the smallest k that lies in the future.
type Window struct {
	// Length is the window's duration; it must be positive. The origin reports it in whole
	// minutes, max(1, round(Length/time.Minute)), so windows shorter than a minute (for tests)
	// report 1.
	Length time.Duration
	// Budget is how many completed responses the window allows; at Budget the account is
	// exhausted until the window resets. 0 = unlimited (reported as 0% used).
	Budget int
}

func (a *Account) planType() string {
	if a.PlanType == "" {
		return DefaultPlanType
	}
	return a.PlanType
}

// AccountStats are one account's counters and usage, as returned by [Accounts.Stats], in
// Stats.Accounts and by GET ControlURL+"/accounts".
type AccountStats struct {
	Responses          int64         `json:"responses"`           // responses started for the account, both transports
	SSEResponses       int64         `json:"sse_responses"`       // of those, over HTTP streaming
	Completed          int64         `json:"completed"`           // response.completed sent
	UpgradesAccepted   int64         `json:"upgrades_accepted"`   // 101 sent
	UpgradesRejected   int64         `json:"upgrades_rejected"`   // authenticated upgrades refused (403, 503)
	Rejected403        int64         `json:"rejected_403"`        // of those, by a rate limit (the account's or the global one)
	Unauthorized       int64         `json:"unauthorized"`        // 401s for an expired token of the account
	UsageLimited       int64         `json:"usage_limited"`       // responses refused with usage_limit_reached
	RefreshCalls       int64         `json:"refresh_calls"`       // /oauth/token calls with a refresh token of the account
	RefreshOK          int64         `json:"refresh_ok"`          // of those, that spent a valid token and issued new ones
	RefreshReused      int64         `json:"refresh_reused"`      // of those, answered refresh_token_reused
	RefreshInvalidated int64         `json:"refresh_invalidated"` // of those, answered refresh_token_invalidated
	InputTokens        int64         `json:"input_tokens"`        // usage.input_tokens summed over the responses started
	CachedTokens       int64         `json:"cached_tokens"`       // of those, cached_tokens: the account's prompt cache hits
	InFlight           int64         `json:"in_flight"`           // responses of the account running now
	MaxConcurrent      int64         `json:"max_concurrent"`      // the most that ran at once (since ResetStats)
	ToolCalls          int64         `json:"tool_calls"`          // function_call items of the responses started
	Windows            []WindowStats `json:"windows,omitempty"`   // usage per window, in Account.Windows order
}

// WindowStats is the state of one usage window.
type WindowStats struct {
	Length        time.Duration `json:"length_ns"`
	WindowMinutes int           `json:"window_minutes"` // as reported to clients
	Budget        int           `json:"budget"`         // 0 = unlimited
	Used          int           `json:"used"`           // completed responses counted in the current window
	UsedPercent   float64       `json:"used_percent"`   // as reported to clients: min(100, 100·Used/Budget), 0 when unlimited
	ResetAt       time.Time     `json:"reset_at,omitzero"`
}

// account is an Account with its state. Its upgrade bucket lives in Limits.
type account struct {
	Account

	mu      sync.Mutex
	windows []windowState

	c acctCounters
}

type acctCounters struct {
	responses, sse, completed, accepted, rejected, rejected403, unauthorized, usageLimited atomic.Int64
	refreshCalls, refreshOK, refreshReused, refreshInvalidated                             atomic.Int64
	tokens                                                                                 tokenCounters
	inflight                                                                               concurrency
}

func (c *acctCounters) reset() {
	for _, v := range []*atomic.Int64{&c.responses, &c.sse, &c.completed, &c.accepted, &c.rejected,
		&c.rejected403, &c.unauthorized, &c.usageLimited, &c.refreshCalls, &c.refreshOK,
		&c.refreshReused, &c.refreshInvalidated} {
		v.Store(0)
	}
	c.tokens.reset()
	c.inflight.resetMax()
}

// windowState is a Window and its current period. The zero start means "not used yet".
type windowState struct {
	Window
	start time.Time // start of the current period
	used  int
}

// roll moves w to the period containing now, starting the window at now on its first use.
func (w *windowState) roll(now time.Time) {
	if w.start.IsZero() {
		w.start = now
		return
	}
	if el := now.Sub(w.start); el >= w.Length {
		w.start = w.start.Add(el / w.Length * w.Length)
		w.used = 0
	}
}

func (w *windowState) end() time.Time { return w.start.Add(w.Length) }

func (w *windowState) exhausted() bool { return w.Budget > 0 && w.used >= w.Budget }

func (w *windowState) snapshot() WindowStats {
	ws := WindowStats{Length: w.Length, WindowMinutes: windowMinutes(w.Length), Budget: w.Budget, Used: w.used}
	if w.Budget > 0 {
		ws.UsedPercent = min(100, 100*float64(w.used)/float64(w.Budget))
	}
	if !w.start.IsZero() {
		ws.ResetAt = w.end()
	}
	return ws
}

func windowMinutes(d time.Duration) int {
	return max(1, int(math.Round(float64(d)/float64(time.Minute))))
}

func newAccount(a Account) *account {
	acct := &account{Account: a}
	for _, w := range a.Windows {
		acct.windows = append(acct.windows, windowState{Window: w})
	}
	return acct
}

// use marks a use of the account at now (starting its windows) and returns its usage.
func (a *account) use(now time.Time) []WindowStats { return a.usage(now, true) }

// usage returns the account's usage at now, starting unused windows when start is set.
func (a *account) usage(now time.Time, start bool) []WindowStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]WindowStats, len(a.windows))
	for i := range a.windows {
		w := &a.windows[i]
		if start || !w.start.IsZero() {
			w.roll(now)
		}
		out[i] = w.snapshot()
	}
	return out
}

// admit decides, at now, whether the account may start a response. When a window is exhausted it
// returns false and the latest reset among the exhausted windows (the account is usable only
// after every one has reset). It also returns the usage the response reports.
func (a *account) admit(now time.Time) (ok bool, resetAt time.Time, usage []WindowStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	usage = make([]WindowStats, len(a.windows))
	ok = true
	for i := range a.windows {
		w := &a.windows[i]
		w.roll(now)
		usage[i] = w.snapshot()
		if w.exhausted() {
			ok = false
			if e := w.end(); e.After(resetAt) {
				resetAt = e
			}
		}
	}
	return ok, resetAt, usage
}

// complete counts a completed response in every window.
func (a *account) complete(now time.Time) {
	a.c.completed.Add(1)
	if len(a.windows) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.windows {
		a.windows[i].roll(now)
		a.windows[i].used++
	}
}

// setUsage sets window i's used count at now, starting the window if unused.
func (a *account) setUsage(i, used int, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i < 0 || i >= len(a.windows) {
		return fmt.Errorf("codextest: account %q has no window %d (it has %d)", a.Name, i, len(a.windows))
	}
	if used < 0 {
		return errors.New("codextest: used must not be negative")
	}
	a.windows[i].roll(now)
	a.windows[i].used = used
	return nil
}

func (a *account) stats(now time.Time) AccountStats {
	c := &a.c
	return AccountStats{
		Responses:          c.responses.Load(),
		SSEResponses:       c.sse.Load(),
		Completed:          c.completed.Load(),
		UpgradesAccepted:   c.accepted.Load(),
		UpgradesRejected:   c.rejected.Load(),
		Rejected403:        c.rejected403.Load(),
		Unauthorized:       c.unauthorized.Load(),
		UsageLimited:       c.usageLimited.Load(),
		RefreshCalls:       c.refreshCalls.Load(),
		RefreshOK:          c.refreshOK.Load(),
		RefreshReused:      c.refreshReused.Load(),
		RefreshInvalidated: c.refreshInvalidated.Load(),
		InputTokens:        c.tokens.input.Load(),
		CachedTokens:       c.tokens.cached.Load(),
		ToolCalls:          c.tokens.calls.Load(),
		Windows:            a.usage(now, false),
		InFlight:           c.inflight.cur.Load(),
		MaxConcurrent:      c.inflight.max.Load(),
	}
}

// validateAccounts checks Options.Accounts, naming the offending field as an accounts file does.
func validateAccounts(accts []Account) error {
	names := make(map[string]int, len(accts))
	tokens := make(map[string]int, len(accts))
	for i, a := range accts {
		at := func(field string) string { return fmt.Sprintf("accounts[%d].%s", i, field) }
		if a.Name == "" {
			return fmt.Errorf("%s: required", at("name"))
		}
		if j, dup := names[a.Name]; dup {
			return fmt.Errorf("%s: %q is also accounts[%d].name", at("name"), a.Name, j)
		}
		names[a.Name] = i
		if a.Token != "" {
			if j, dup := tokens[a.Token]; dup {
				return fmt.Errorf("%s: the same token as accounts[%d]", at("token"), j)
			}
			tokens[a.Token] = i
		}
		if a.UpgradeRate < 0 || math.IsNaN(a.UpgradeRate) {
			return fmt.Errorf("%s: must not be negative", at("upgrade_rate"))
		}
		if a.UpgradeBurst < 0 {
			return fmt.Errorf("%s: must not be negative", at("upgrade_burst"))
		}
		if len(a.Windows) > 2 {
			return fmt.Errorf("%s: at most 2 (primary and secondary), got %d", at("windows"), len(a.Windows))
		}
		for k, w := range a.Windows {
			if w.Length <= 0 {
				return fmt.Errorf("%s: must be positive", at(fmt.Sprintf("windows[%d].length", k)))
			}
			if w.Budget < 0 {
				return fmt.Errorf("%s: must not be negative", at(fmt.Sprintf("windows[%d].budget", k)))
			}
		}
	}
	return nil
}

// Accounts are the accounts a Server serves ([Server].Accounts), from Options.Accounts: their
// usage windows and counters. Without Options.Accounts there are none. The set is fixed at
// start; the methods are safe for concurrent use.
type Accounts struct {
	list    []*account // in Options.Accounts order
	byName  map[string]*account
	byToken map[string]*account // static tokens
}

func newAccounts(accts []Account) *Accounts {
	as := &Accounts{byName: make(map[string]*account, len(accts)), byToken: make(map[string]*account)}
	for _, a := range accts {
		acct := newAccount(a)
		as.byName[a.Name] = acct
		as.list = append(as.list, acct)
		if a.Token != "" {
			as.byToken[a.Token] = acct
		}
	}
	return as
}

// get returns the named account, nil if unknown.
func (as *Accounts) get(name string) *account { return as.byName[name] }

// SetUsage sets the used count of the named account's window (an index into its
// Account.Windows) in the window's current period, starting the window if it was unused; at the
// window's Budget the account is exhausted until the window resets. It fails for an unknown
// account or window, or a negative used.
func (as *Accounts) SetUsage(account string, window int, used int) error {
	a := as.get(account)
	if a == nil {
		return fmt.Errorf("codextest: unknown account %q", account)
	}
	return a.setUsage(window, used, time.Now())
}

// Stats returns the named account's counters and usage; the zero AccountStats for an unknown
// name.
func (as *Accounts) Stats(name string) AccountStats {
	a := as.get(name)
	if a == nil {
		return AccountStats{}
	}
	return a.stats(time.Now())
}

// all returns every account's stats by name at now; nil without accounts.
func (as *Accounts) all(now time.Time) map[string]AccountStats {
	if len(as.list) == 0 {
		return nil
	}
	m := make(map[string]AccountStats, len(as.list))
	for _, a := range as.list {
		m[a.Name] = a.stats(now)
	}
	return m
}

func (as *Accounts) resetCounters() {
	for _, a := range as.list {
		a.c.reset()
	}
}
