// Package gate paces the starts of new upstream WebSocket upgrades so that a burst of requests does
// not provoke the origin into rejecting them with HTTP 403.
//
// Call [New] once per process and origin, then wrap every new upgrade in [Connect], which waits in
// the gate, dials with a per-attempt timeout, reports the outcome and retries an origin 403 once.
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
	Adaptive Mode = "adaptive" // spacing is the price of observed rejections (the default)
	Fixed    Mode = "fixed"    // spacing is Config.Floor forever; outcomes change nothing
	Off      Mode = "off"      // never waits; outcomes change nothing
)

// ParseMode returns the Mode named s ("adaptive", "fixed" or "off"; "" means Adaptive).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return Adaptive, nil
	case Adaptive, Fixed, Off:
		return m, nil
	default:
		return "", fmt.Errorf("gate: unknown mode %q (want %q, %q or %q)", s, Adaptive, Fixed, Off)
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

// Config configures a Gate. Zero (or negative) values are the documented defaults.
type Config struct {
	Mode       Mode          // default Adaptive
	Floor      time.Duration // lowest spacing, never relaxed away; default 0 (an idle gate never waits)
	Widen      time.Duration // spacing after the first rejection; default 1s
	Max        time.Duration // highest spacing reached by doubling; default 8s (a Floor above it wins)
	RelaxAfter int           // successes in a row that halve the spacing; default 20
}

// Defaults.
const (
	DefaultWiden      = time.Second
	DefaultMax        = 8 * time.Second
	DefaultRelaxAfter = 20
)

// Reference returns the reference proxy's parameters: adaptive, floor 0, widen to 1 s, double up to
// 8 s, halve after 20 successes in a row. It stays fixed when the defaults change, so an A/B
// against the reference can always be rerun. Pair it with [ReferencePolicy].
func Reference() Config {
	return Config{Mode: Adaptive, Floor: 0, Widen: time.Second, Max: 8 * time.Second, RelaxAfter: 20}
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = Adaptive
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

// A Gate spaces the starts of new upstream connections, per process and per origin.
//
// A start reserves the next slot, start = max(now, next), and moves next to start + spacing; the
// caller then waits until start outside any lock. How spacing moves depends on the Mode:
//
//   - Adaptive (the default). Spacing starts at Floor (default 0): an idle, healthy process is not
//     paced at all. An origin rejection ([Permit.Forbidden]) widens it to Widen (default 1s) if it
//     was below, else doubles it, capped at Max (default 8s); it also resets the success streak and
//     pushes the next start to at least now + spacing, and to now + Retry-After when the origin sent
//     one. Only a rejection of an attempt that started after the last widening widens again, so a
//     burst of attempts rejected together is one signal, not one doubling each. RelaxAfter (default
//     20) successes in a row ([Permit.Succeeded]) halve the spacing; a halved spacing below Widen
//     snaps to Floor. Other failures ([Permit.Failed]) change nothing. Spacing is never below
//     Floor, and a Floor above Max wins over Max.
//   - Fixed: spacing is Floor forever; outcomes are counted but change nothing.
//   - Off: starts never wait; outcomes are counted but change nothing.
//
// Outcome reports never block: one that finds the gate busy may be dropped, which is harmless (the
// next rejection carries the same signal). Cancelling a wait gives its slot back when no later start
// has been reserved behind it.
//
// Most callers want [Connect]; [Gate.Wait] is the primitive under it. [Reference] returns the
// reference proxy's parameters as a named preset.
//
// The zero value is a ready-to-use adaptive Gate with the defaults, as is New(Config{}).
// A Gate is safe for concurrent use by multiple goroutines.
type Gate struct {
	mu        sync.Mutex
	spacing   time.Duration // current gap between starts
	streak    int           // successes in a row since the last rejection or relaxation
	next      time.Time     // earliest start of the next reservation
	widenedAt time.Time     // when spacing last widened: older attempts' rejections do not widen again
	seq       uint64        // bumped whenever next moves, so a cancelled wait knows it was the last

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

// reservation is one reserved slot. seq is 0 when the reservation did not move next.
type reservation struct {
	start time.Time
	seq   uint64
}

// Wait blocks until the caller may start a new upgrade and returns the Permit on which to report
// its outcome. If ctx is done first, Wait returns ctx.Err() (unwrapped) at once and gives the slot
// back when that is possible. Wait does not allocate when it does not have to wait.
func (g *Gate) Wait(ctx context.Context) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	now := time.Now()
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
}

// Snapshot returns the current state.
func (g *Gate) Snapshot() Snapshot {
	g.mu.Lock()
	spacing, streak := g.spacing, g.streak
	g.mu.Unlock()
	return Snapshot{
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
