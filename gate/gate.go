// Package gate paces the starts of new upstream WebSocket upgrades so that a burst of requests does
// not provoke the origin into rejecting them with HTTP 403.
//
// Call [New] once per process and origin, then wrap every new upgrade in [Connect], which waits in
// the gate, dials with a per-attempt timeout, reports the outcome and retries an origin 403 (paced
// by the gate until the context ends in Adaptive mode, once after a cooldown in the others).
// Callers that need finer control use [Gate.Wait] and report on the returned [Permit] themselves.
//
// The package is pure logic: it does no I/O and imports nothing but the standard library.
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
// rest to Adaptive only (see [Gate] for what each does and why its default is what it is).
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

// A Gate paces the starts of new upstream connections (WebSocket upgrades), per process and per
// origin. [Gate.Wait] blocks until a start may happen and returns a [Permit] on which the caller
// reports the upgrade's outcome exactly once; most callers want [Connect], which does both.
//
// # Adaptive (the default): a congestion controller for upgrades
//
// An origin's upgrade limit behaves like a token bucket (a burst, then a rate). The gate probes
// for both instead of jumping, with two limits that a start must both pass:
//
//   - A window of upgrades in flight (granted, not yet reported). It starts at InitialWindow (2),
//     grows by one per success while below the slow-start threshold (so it doubles every round
//     of handshakes; loopback handshakes take about a millisecond, so a healthy origin sees it
//     at hundreds within milliseconds), and by one per window of successes above it. A rejection
//     halves it (never below 1) and sets the threshold there. It grows only while it limits
//     (callers are queued or it is at least half full), so a quiet period does not build up a
//     window that the next burst would storm the origin with. MaxWindow (1024) caps it.
//     Against a burst-5 origin a 60-burst loses a handful of upgrades instead of 55.
//   - A spacing between consecutive starts, for the rate. It is Floor (0) until the first
//     rejection, which sets it to the rate the origin was just measured to accept: RateWindow
//     (1s) divided by the upgrades accepted in the last RateWindow (1s when none were). Every
//     later rejection multiplies it by Backoff (1.25), never to below that measured value.
//     While callers are queued behind the spacing (the pace, not the demand, is what limits),
//     every RelaxRun (8) successes relax it: the first step since the last rejection cuts it by
//     1-Relax (1/16), the k-th by k times that, at most by half. So the gate probes gently just
//     above a rate that was rejected (a small bucket then costs one rejection per probe, not a
//     storm) and fast once the origin has clearly recovered (5/s to 50/s in about 3s). It never
//     snaps to 0 (below 1ms it becomes Floor: at that rate the window is the limit anyway), and
//     it stays within [Floor, max(Max, Floor)]; Max is 8s.
//
// Why these defaults: measured against a token-bucket origin (5/s burst 5, 1/s burst 1,
// unlimited, a rate that changes at run time, and demand at twice the rate for a minute; see
// TestSimulatedTargets), an initial window of 2 costs a healthy 30-burst no more handshake
// rounds than one of 4 (2+4+8+16 = 30), and loses fewer upgrades to a small bucket; Backoff 1.25 with the measured floor keeps goodput above 90% of
// the origin's rate with about 5% rejections; 1/16 steps every 8 successes keep a 60-burst
// against 5/s under 15% rejections, and the growing steps follow a tenfold rise within seconds.
//
// Rejections of attempts that started before the last reaction are one signal, not one each, as
// in the reference design (compare TCP, which cuts its window once per round trip). Every
// rejection pushes the next start to at least now + spacing, and a Retry-After to at least now +
// Retry-After: Retry-After always wins. Other failures ([Permit.Failed]) only free the slot.
// Waiting callers start in arrival order; [Connect] retries an origin 403 through the gate, in
// its original place in the line, until it succeeds or its context ends.
//
// Every Permit must be reported (Connect always does). An unreported one holds its window slot
// for at most Lease (1m), then the slot is reclaimed; a second report of a Permit, or one after
// its lease, changes only the counters (and a Retry-After it carries is still honoured).
//
// # ReferenceMode ("reference"): the reference design, kept for the A/B
//
// A start reserves the next slot, start = max(now, next), and moves next to start + spacing; the
// caller then waits until start outside any lock. Spacing starts at Floor (default 0): an idle,
// healthy process is not paced at all. An origin rejection ([Permit.Forbidden]) widens it to Widen
// (default 1s) if it was below, else doubles it, capped at Max (default 8s); it also resets the
// success streak and pushes the next start to at least now + spacing, and to now + Retry-After
// when the origin sent one. Only a rejection of an attempt that started after the last widening
// widens again, so a burst of attempts rejected together is one signal, not one doubling each.
// RelaxAfter (default 20) successes in a row ([Permit.Succeeded]) halve the spacing; a halved
// spacing below Widen snaps to Floor. Other failures ([Permit.Failed]) change nothing. Spacing is
// never below Floor, and a Floor above Max wins over Max. [Reference] returns these parameters;
// Connect retries a 403 once, after the cooldown ([ReferencePolicy]).
//
// # Fixed and Off
//
// Fixed: spacing is Floor forever; outcomes are counted but change nothing. Off: starts never
// wait; outcomes are counted but change nothing.
//
// Outcome reports never block on I/O or a wait. In ReferenceMode one that finds the gate busy may
// be dropped, which is harmless (the next rejection carries the same signal). Cancelling a wait
// gives its slot back (in ReferenceMode and Fixed when no later start has been reserved behind
// it).
//
// The zero value is a ready-to-use adaptive Gate with the defaults, as is New(Config{}).
// A Gate is safe for concurrent use by multiple goroutines.
type Gate struct {
	mu        sync.Mutex
	spacing   time.Duration // current gap between starts
	streak    int           // successes in a row since the last rejection or relaxation
	next      time.Time     // Reference, Fixed: earliest start of the next reservation
	widenedAt time.Time     // when spacing last widened: older attempts' rejections do not widen again
	seq       uint64        // bumped whenever next moves, so a cancelled wait knows it was the last
	a         adaptive      // the Adaptive controller's state

	cfg Config // immutable after New; the zero value means "the defaults"

	starts     atomic.Int64
	rejections atomic.Int64
	successes  atomic.Int64
	failures   atomic.Int64
	waited     atomic.Int64 // nanoseconds
}

// New returns a Gate configured by cfg (zero fields take the defaults). It panics if cfg.Mode is
// not one of the Modes; use [ParseMode] to validate configuration input.
func New(cfg Config) *Gate {
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	g := &Gate{cfg: cfg}
	if cfg.Mode != Off {
		g.spacing = cfg.Floor
	}
	return g
}

// config returns the configuration with the defaults applied (they matter for the zero Gate).
func (g *Gate) config() Config { return g.cfg.withDefaults() }

// mode returns the Mode without the cost of applying every default.
func (g *Gate) mode() Mode {
	if g.cfg.Mode == "" {
		return Adaptive
	}
	return g.cfg.Mode
}

// reservation is one reserved slot. seq is 0 when the reservation did not move next.
type reservation struct {
	start time.Time
	seq   uint64
}

// Wait blocks until the caller may start a new upgrade and returns the Permit on which to report
// its outcome. If ctx is done first, Wait returns ctx.Err() (unwrapped) at once and gives the slot
// back when that is possible. Wait does not allocate when it does not have to wait.
func (g *Gate) Wait(ctx context.Context) (Permit, error) {
	return g.wait(ctx, time.Time{})
}

// wait is Wait for a caller that arrived at arrival (zero: now); in Adaptive mode, waiting callers
// start in arrival order, so a retry keeps its place in the line.
func (g *Gate) wait(ctx context.Context, arrival time.Time) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	now := time.Now()
	if g.mode() == Adaptive {
		if arrival.IsZero() {
			arrival = now
		}
		return g.waitAdaptive(ctx, now, arrival)
	}
	r := g.reserve(now)
	if delay := r.start.Sub(now); delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			g.cancel(r)
			g.waited.Add(int64(time.Since(now)))
			return Permit{}, ctx.Err()
		}
		g.waited.Add(int64(time.Since(now)))
	}
	g.starts.Add(1)
	return Permit{g: g, start: r.start}, nil
}

// reserve takes the next slot at time now (rule 2 of the design).
func (g *Gate) reserve(now time.Time) reservation {
	if g.cfg.Mode == Off {
		return reservation{start: now}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	start := now
	if g.next.After(now) {
		start = g.next
	}
	if g.spacing <= 0 {
		// next = start + 0 = max(now, next): leaving it alone is equivalent, and callers that read
		// the clock a little earlier are not made to wait a few nanoseconds on a timer.
		return reservation{start: start}
	}
	g.next = start.Add(g.spacing)
	g.seq++
	return reservation{start: start, seq: g.seq}
}

// cancel gives r's slot back if nothing has moved next since r took it.
func (g *Gate) cancel(r reservation) {
	if r.seq == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seq == r.seq {
		g.next = r.start
		g.seq++
	}
}

// Snapshot is a read-only view of a Gate's state, for logs and metrics.
type Snapshot struct {
	Mode       Mode
	Spacing    time.Duration // current gap between starts
	Streak     int           // successes in a row counted towards the next relaxation
	Rejections int64         // origin rejections reported
	Starts     int64         // permits granted (every upgrade attempt)
	Waited     time.Duration // total time callers spent waiting, including cancelled waits
	Successes  int64         // successful upgrades reported
	Failures   int64         // other failures reported
	Window     int           // Adaptive: upgrades allowed in flight (0 in the other modes)
	InFlight   int           // Adaptive: permits granted and not yet reported
	Queued     int           // Adaptive: callers waiting in the gate
}

// Snapshot returns the current state.
func (g *Gate) Snapshot() Snapshot {
	g.mu.Lock()
	spacing, streak := g.spacing, g.streak
	var window, inflight, queued int
	if g.mode() == Adaptive {
		g.a.init(g.config())
		window, inflight, queued = g.a.window, g.a.inflight, len(g.a.queue)
	}
	g.mu.Unlock()
	return Snapshot{
		Window:     window,
		InFlight:   inflight,
		Queued:     queued,
		Mode:       g.config().Mode,
		Spacing:    spacing,
		Streak:     streak,
		Rejections: g.rejections.Load(),
		Starts:     g.starts.Load(),
		Waited:     time.Duration(g.waited.Load()),
		Successes:  g.successes.Load(),
		Failures:   g.failures.Load(),
	}
}
