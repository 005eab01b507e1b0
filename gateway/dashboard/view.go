package dashboard

import (
	"cmp"
	"github.com/codexpool/codexpool/schemas"
	"slices"
	"time"
)

// Data is the body of GET /dashboard/data: one sample of the fleet and the history after the
// request's ?since.
type Data struct {
	Time         time.Time `json:"time"`
	IntervalMS   int64     `json:"interval_ms"`   // between samples
	ResolutionMS int64     `json:"resolution_ms"` // between history points
	Totals       Totals    `json:"totals"`
	Workers      []Worker  `json:"workers"`
	Accounts     []Account `json:"accounts"` // by name, merged over the workers that use them
	Gates        []Gate    `json:"gates"`    // one per worker and account
	// Jobs is nil without a jobs stream (no JetStream, or no worker with jobs yet): JobsNote says why.
	Jobs     *Jobs  `json:"jobs"`
	JobsNote string `json:"jobs_note,omitempty"`
	// Usage is what Config.Usage returned; UsageOn is false without the hook.
	UsageOn    bool   `json:"usage_enabled"`
	Usage      any    `json:"usage,omitempty"`
	UsageError string `json:"usage_error,omitempty"`
	// Recent is what Config.Recent returned: the gateway's slow and failed requests.
	Recent any `json:"recent,omitempty"`
	// Problems are the sample's own failures (e.g. NATS down), shown on the page.
	Problems []string `json:"problems,omitempty"`
	History  []Point  `json:"history"`
}

// Totals sum the workers' counters.
type Totals struct {
	Workers   int    `json:"workers"`
	Requests  uint64 `json:"requests"`
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
	Errors    uint64 `json:"errors"`
	Inflight  int64  `json:"inflight"`
}

// Worker is one worker's row.
type Worker struct {
	ID           string   `json:"id"`
	Draining     bool     `json:"draining"`
	Inflight     int64    `json:"inflight"`
	MaxInflight  int      `json:"max_inflight"`
	Requests     uint64   `json:"requests"`
	Completed    uint64   `json:"completed"`
	Failed       uint64   `json:"failed"`
	Busy         uint64   `json:"busy"`
	Forwarded    uint64   `json:"forwarded"`
	Errors       uint64   `json:"errors"`
	LatencyAvgMS float64  `json:"latency_avg_ms"`
	Sockets      int64    `json:"sockets"`
	Accounts     []string `json:"accounts"`
}

// Account is one account over the workers that use it: windows at their highest used %,
// cooldown until the latest end, counters summed.
type Account struct {
	Name           string    `json:"name"`
	Workers        []string  `json:"workers"`
	Windows        []Window  `json:"windows"`
	CoolingDown    bool      `json:"cooling_down"`
	CooldownUntil  time.Time `json:"cooldown_until,omitzero"`
	CooldownReason string    `json:"cooldown_reason,omitempty"`
	Inflight       int       `json:"inflight"`
	Requests       int64     `json:"requests"`
	Completed      int64     `json:"completed"`
	Limited        int64     `json:"limited"`
}

// Window is one usage window of an account, classified by its length (see classify).
type Window struct {
	Class       string    `json:"class"` // "5h", "weekly", "monthly" or "other"
	Label       string    `json:"label"`
	Limit       string    `json:"limit"`
	Minutes     int       `json:"window_minutes"`
	UsedPercent float64   `json:"used_percent"`
	ResetAt     time.Time `json:"reset_at,omitzero"`
}

// Gate is one worker's connect gate for one account.
type Gate struct {
	Worker     string `json:"worker"`
	Account    string `json:"account"`
	Mode       string `json:"mode"`
	SpacingMS  int64  `json:"spacing_ms"`
	Closed     bool   `json:"closed"`
	InFlight   int    `json:"in_flight"`
	Queued     int    `json:"queued"`
	Rejections int64  `json:"rejections"`
}

// Jobs is the jobs stream and its consumer, from JetStream.
type Jobs struct {
	Stream      string `json:"stream"`
	Stored      uint64 `json:"stored"`
	Pending     uint64 `json:"pending"`     // not yet delivered to a worker
	Running     int    `json:"running"`     // delivered, not acked
	Redelivered int    `json:"redelivered"` // of the running ones, delivered more than once
	Waiting     int    `json:"waiting"`     // pull requests open: workers with a free slot
}

// fleetView turns the workers' stats into the page's tables.
func fleetView(ws []schemas.Stats) (Totals, []Worker, []Account, []Gate) {
	t := Totals{Workers: len(ws)}
	workers := make([]Worker, 0, len(ws))
	var gates []Gate
	accts := map[string]*Account{}
	for _, s := range ws {
		w := workerRow(s)
		workers = append(workers, w)
		t.Requests += s.Requests
		t.Completed += s.Completed
		t.Failed += s.Failed
		t.Errors += w.Errors
		t.Inflight += s.Inflight
		for _, a := range s.Accounts {
			mergeAccount(accts, s.Worker, a)
			gates = append(gates, Gate{Worker: s.Worker, Account: a.Name, Mode: a.Gate.Mode,
				SpacingMS: a.Gate.SpacingMS, Closed: a.Gate.Closed, InFlight: a.Gate.InFlight,
				Queued: a.Gate.Queued, Rejections: a.Gate.Rejections})
		}
	}
	out := make([]Account, 0, len(accts))
	for _, a := range accts {
		slices.SortFunc(a.Windows, func(x, y Window) int {
			return cmp.Or(cmp.Compare(x.Limit, y.Limit), cmp.Compare(x.Minutes, y.Minutes))
		})
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y Account) int { return cmp.Compare(x.Name, y.Name) })
	return t, workers, out, gates
}

func workerRow(s schemas.Stats) Worker {
	w := Worker{ID: s.Worker, Draining: s.Draining, Inflight: s.Inflight, MaxInflight: s.MaxInflight,
		Requests: s.Requests, Completed: s.Completed, Failed: s.Failed, Busy: s.Busy,
		Forwarded: s.Forwarded, Errors: errorCount(s), Sockets: s.Upstream.Open,
		LatencyAvgMS: float64(s.LatencyAvg) / float64(time.Millisecond)}
	for _, a := range s.Accounts {
		w.Accounts = append(w.Accounts, a.Name)
	}
	return w
}

// mergeAccount adds one worker's view of an account to accts.
func mergeAccount(accts map[string]*Account, worker string, a schemas.AccountStats) {
	m := accts[a.Name]
	if m == nil {
		m = &Account{Name: a.Name}
		accts[a.Name] = m
	}
	m.Workers = append(m.Workers, worker)
	m.Inflight += a.Inflight
	m.Requests += a.Requests
	m.Completed += a.Completed
	m.Limited += a.Limited
	if a.CoolingDown {
		m.CoolingDown = true
		if a.Cooldown != nil && a.Until.After(m.CooldownUntil) {
			m.CooldownUntil, m.CooldownReason = a.Until, a.Reason
		}
	}
	for _, w := range a.Windows {
		mergeWindow(m, w)
	}
}

// mergeWindow keeps, per limit and length, the window with the highest used percentage: the
// worker that heard from the origin last has the latest figure, and usage only grows within a
// window.
func mergeWindow(m *Account, w schemas.WindowUsage) {
	class, label := classify(w.Minutes)
	nw := Window{Class: class, Label: label, Limit: w.Limit, Minutes: w.Minutes, UsedPercent: w.UsedPercent, ResetAt: w.ResetAt}
	for i, have := range m.Windows {
		if have.Limit == w.Limit && have.Minutes == w.Minutes {
			if w.UsedPercent > have.UsedPercent {
				m.Windows[i] = nw
			}
			return
		}
	}
	m.Windows = append(m.Windows, nw)
}
