package gate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Mode selects how a Gate paces starts.
type Mode string

// Modes.
const (
	Adaptive      Mode = "adaptive"  // a congestion controller for upgrades (the default)
	ReferenceMode Mode = "reference" // the reference design: spacing is the price of observed rejections
	Fixed         Mode = "fixed"     // spacing is Config.Floor forever; outcomes change nothing
	Off           Mode = "off"       // never waits; outcomes change nothing
)

// ParseMode returns the Mode named s ("adaptive", "reference", "fixed" or "off"; "" means
// Adaptive).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Adaptive, nil
	case Adaptive, ReferenceMode, Fixed, Off:
		return m, nil
	default:
		return "", fmt.Errorf("gate: unknown mode %q (want %q, %q, %q or %q)", s, Adaptive, ReferenceMode, Fixed, Off)
	}
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseMode], so configuration loaders
// (envconfig, flag.TextVar) reject an unknown mode.
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Config configures a Gate. Zero (or negative) values are the documented defaults. Floor and Max
// apply to the Adaptive and ReferenceMode modes, Widen and RelaxAfter to ReferenceMode only, the
// rest to Adaptive only (docs/gate-design.md says what each does and why its default is what it
// is).
type Config struct {
	Mode       Mode          // default Adaptive
	Floor      time.Duration // lowest spacing, never relaxed away; default 0 (an idle gate never waits)
	Widen      time.Duration // ReferenceMode: spacing after the first rejection; default 1s
	Max        time.Duration // highest spacing; default 8s (a Floor above it wins)
	RelaxAfter int           // ReferenceMode: successes in a row that halve the spacing; default 20

	InitialWindow int           // Adaptive: upgrades in flight at first; default 2
	MaxWindow     int           // Adaptive: upgrades in flight at most; default 1024
	Backoff       float64       // Adaptive: spacing multiplier on a rejection (> 1); default 1.25
	Relax         float64       // Adaptive: first relaxation's spacing multiplier (< 1), the k-th cuts k times as much; default 15/16
	RelaxRun      int           // Adaptive: paced successes in a row per relaxation step; default 8
	RateWindow    time.Duration // Adaptive: how far back accepted upgrades are counted; default 1s
	Lease         time.Duration // Adaptive: longest an unreported Permit holds its window slot; default 1m

	ReportInterval time.Duration // Adaptive, shared: how often the transport publishes NextSignal (peers silent for 3 are expired); default 100ms; every gate of a fleet should use the same
}

// Defaults.
const (
	DefaultWiden      = time.Second
	DefaultMax        = 8 * time.Second
	DefaultRelaxAfter = 20

	DefaultInitialWindow = 2
	DefaultMaxWindow     = 1024
	DefaultBackoff       = 1.25
	DefaultRelax         = 15.0 / 16
	DefaultRelaxRun      = 8
	DefaultRateWindow    = time.Second
	DefaultLease         = time.Minute

	DefaultReportInterval = 100 * time.Millisecond
)

// Reference returns the reference proxy's parameters: mode ReferenceMode, floor 0, widen to 1 s,
// double up to 8 s, halve after 20 successes in a row. It stays fixed when the defaults change,
// so an A/B against the reference can always be rerun. Pair it with [ReferencePolicy].
func Reference() Config {
	return Config{Mode: ReferenceMode, Floor: 0, Widen: time.Second, Max: 8 * time.Second, RelaxAfter: 20}
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = Adaptive
	}
	if c.InitialWindow <= 0 {
		c.InitialWindow = DefaultInitialWindow
	}
	if c.MaxWindow <= 0 {
		c.MaxWindow = DefaultMaxWindow
	}
	c.InitialWindow = min(c.InitialWindow, c.MaxWindow)
	if !(c.Backoff > 1) { // also NaN
		c.Backoff = DefaultBackoff
	}
	if !(c.Relax > 0 && c.Relax < 1) {
		c.Relax = DefaultRelax
	}
	if c.RelaxRun <= 0 {
		c.RelaxRun = DefaultRelaxRun
	}
	if c.RateWindow <= 0 {
		c.RateWindow = DefaultRateWindow
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = DefaultReportInterval
	}
	c.Floor = max(c.Floor, 0)
	if c.Widen <= 0 {
		c.Widen = DefaultWiden
	}
	if c.Max <= 0 {
		c.Max = DefaultMax
	}
	if c.RelaxAfter <= 0 {
		c.RelaxAfter = DefaultRelaxAfter
	}
	return c
}

// A Gate paces the starts of new upstream connections (WebSocket upgrades) to one origin, so that
// a burst of requests does not provoke the origin into refusing them with HTTP 403.
//
// [Gate.Wait] blocks until a start may happen and returns a [Permit], on which the caller reports
// the upgrade's outcome exactly once; the reported outcomes set the pace. Most callers want
// [Connect], which waits, dials with a per-attempt timeout, reports, and retries a 403.
//
// Config.Mode chooses the pacing, one controller per mode:
//   - Adaptive (the default): a window of upgrades in flight grown by slow start, and a spacing
//     between starts that converges on the rate the origin accepts (see the package rules).
//   - ReferenceMode: the reference design: a spacing from Floor, widened to Widen and doubled up
//     to Max on a rejection, halved after RelaxAfter successes in a row.
//   - Fixed: starts are Floor apart, forever; outcomes are counted and change nothing.
//   - Off: starts never wait; outcomes are counted and change nothing.
//
// A Retry-After on a rejection holds every start back until it has passed (Adaptive and
// ReferenceMode). Outcome reports never block on I/O or a wait. Cancelling a wait returns the
// context's error at once and gives the slot back where that is cheap. In Adaptive mode, the
// gates of processes that share one upgrade limit can share what they learn ([Gate.NextSignal],
// [Gate.Observe]); without that, each is on its own.
//
// The zero value is a ready-to-use Adaptive Gate with the defaults, as is New(Config{}). A Gate is
// safe for concurrent use by multiple goroutines; it must not be copied after first use.
type Gate struct {
	once sync.Once
	cfg  Config     // the defaults applied once set up; immutable after that
	ctl  controller // the Mode's controller, set up with cfg

	starts     atomic.Int64
	rejections atomic.Int64
	successes  atomic.Int64
	failures   atomic.Int64
	waited     atomic.Int64 // nanoseconds

	last403 atomic.Pointer[error] // the last 403 Connect saw, for a closed origin's answer
}

// controller is the pacing algorithm of one Mode. The Gate counts; the controller decides.
type controller interface {
	// wait blocks until a start may happen for r, which came to the gate at now. It reports how
	// long it waited, also when it fails.
	wait(ctx context.Context, now time.Time, r request) (grant, error)
	// report applies the outcome of p's attempt at now; it must not block on a wait.
	report(p Permit, o outcome, now time.Time, retryAfter time.Duration)
	// snapshot fills in the controller's part of s.
	snapshot(s *Snapshot)
}

// request is one caller of wait. Only the Adaptive controller looks beyond arrival.
type request struct {
	arrival  time.Time // when the caller first came (a retry keeps it, and so its place in line)
	deadline time.Time // the wait ends with errBudget then, or at once when no start can come before it (zero: none)
	probeBy  time.Time // closed origin: the latest probe slot this caller will wait for (zero: any)
	retry    bool      // the caller was refused already: a closed origin answers it at once
}

// grant is one start a controller allowed (or, with an error, the time a failed wait took).
type grant struct {
	start  time.Time
	id     uint64 // Adaptive: the window slot it holds (0 = none)
	waited time.Duration
}

type outcome int

const (
	outcomeSuccess outcome = iota
	outcomeForbidden
	outcomeFailure
)

// New returns a Gate configured by cfg (zero fields take the defaults). It panics if cfg.Mode is
// not one of the Modes; use [ParseMode] to validate configuration input.
func New(cfg Config) *Gate {
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		panic(err)
	}
	g := &Gate{cfg: cfg}
	g.controller()
	return g
}

// controller sets the gate up on first use (the zero Gate too) and returns its controller.
func (g *Gate) controller() controller {
	g.once.Do(g.setup)
	return g.ctl
}

func (g *Gate) setup() {
	g.cfg = g.cfg.withDefaults()
	switch g.cfg.Mode {
	case ReferenceMode:
		g.ctl = newReference(g.cfg)
	case Fixed:
		g.ctl = newFixed(g.cfg)
	case Off:
		g.ctl = off{}
	default:
		g.ctl = newAdaptive(g.cfg)
	}
}

// config returns the configuration with the defaults applied.
func (g *Gate) config() Config {
	g.controller()
	return g.cfg
}

// Wait blocks until the caller may start a new upgrade and returns the Permit on which to report
// its outcome. If ctx is done first, Wait returns ctx.Err() (unwrapped) at once and gives the slot
// back when that is possible. Wait does not allocate when it does not have to wait.
func (g *Gate) Wait(ctx context.Context) (Permit, error) {
	d, _ := ctx.Deadline()
	return g.wait(ctx, request{probeBy: d})
}

// wait is Wait for r (a zero arrival means now); in Adaptive mode, waiting callers start in
// arrival order, so a retry keeps its place in the line.
func (g *Gate) wait(ctx context.Context, r request) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	c := g.controller()
	now := time.Now()
	if r.arrival.IsZero() {
		r.arrival = now
	}
	gr, err := c.wait(ctx, now, r)
	if gr.waited != 0 {
		g.waited.Add(int64(gr.waited))
	}
	if err != nil {
		return Permit{}, err
	}
	g.starts.Add(1)
	return Permit{g: g, start: gr.start, id: gr.id}, nil
}

// Snapshot is a read-only view of a Gate's state, for logs and metrics.
type Snapshot struct {
	Mode       Mode
	Spacing    time.Duration // current gap between starts (Adaptive: the fleet's; see OwnSpacing)
	Streak     int           // successes in a row counted towards the next relaxation
	Rejections int64         // origin rejections reported
	Starts     int64         // permits granted (every upgrade attempt)
	Waited     time.Duration // total time callers spent waiting, including cancelled waits
	Successes  int64         // successful upgrades reported
	Failures   int64         // other failures reported
	Window     int           // Adaptive: upgrades allowed in flight (0 in the other modes)
	InFlight   int           // Adaptive: permits granted and not yet reported
	Queued     int           // Adaptive: callers waiting in the gate
	Closed     bool          // Adaptive: the origin is closed (see [ErrClosed])

	// Adaptive, the shared state (see [Gate.Observe]). Without peers, OwnSpacing is Spacing,
	// FleetAccepted counts this gate's upgrades only, and the counts of signals are 0.
	OwnSpacing     time.Duration // this gate's gap between starts: Spacing over its share of the fleet's demand
	Epoch          uint64        // reactions so far, this gate's and its peers'
	Peers          int           // peers that count (trusted, heard within 3 report intervals)
	FleetAccepted  float64       // upgrades accepted per second in the last RateWindow, here and at the peers
	SignalsApplied int64         // peers' signals applied
	SignalsInvalid int64         // signals dropped as malformed, out of range or inconsistent
	SignalsStale   int64         // signals dropped as older than one already applied
	SignalsFlooded int64         // signals dropped beyond a peer's rate, or with the peer table full
	SignalsUnknown int64         // signals from ids not (yet) counted as peers
	SignalsDoubted int64         // signals dropped from peers found out: claims that did not add up (see docs/gate-design.md)

	PeersDoubted      int64 // peers found out (their outcomes or rate did not add up)
	HoldsContradicted int64 // peers' Retry-After holds that an accepted probe of this gate ended
}

// Snapshot returns the current state.
func (g *Gate) Snapshot() Snapshot {
	var s Snapshot
	g.controller().snapshot(&s)
	s.Mode = g.cfg.Mode
	s.Rejections = g.rejections.Load()
	s.Starts = g.starts.Load()
	s.Waited = time.Duration(g.waited.Load())
	s.Successes = g.successes.Load()
	s.Failures = g.failures.Load()
	return s
}
