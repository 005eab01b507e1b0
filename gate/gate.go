// Package gate paces the starts of new upstream WebSocket upgrades. (API skeleton: being implemented.)
package gate

import (
	"context"
	"time"
)

// Mode selects how a Gate paces starts.
type Mode string

// Modes.
const (
	Adaptive Mode = "adaptive"
	Fixed    Mode = "fixed"
	Off      Mode = "off"
)

// Config configures a Gate. Zero values are the documented defaults.
type Config struct {
	Mode       Mode          // default Adaptive
	Floor      time.Duration // default 0
	Widen      time.Duration // default 1s
	Max        time.Duration // default 8s
	RelaxAfter int           // default 20
}

// Gate paces connection starts. Safe for concurrent use.
type Gate struct{}

// New returns a Gate.
func New(cfg Config) *Gate { return &Gate{} }

// Permit is one reserved start. Report its outcome exactly once.
type Permit struct {
	g     *Gate
	start time.Time
}

// Wait blocks until the caller may start a new upgrade, or ctx is done (returning ctx.Err()).
func (g *Gate) Wait(ctx context.Context) (Permit, error) {
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	return Permit{g: g, start: time.Now()}, nil
}

// Succeeded reports that the upgrade succeeded.
func (p Permit) Succeeded() {}

// Forbidden reports an origin 403 on the upgrade, with the Retry-After it carried (0 if none).
func (p Permit) Forbidden(retryAfter time.Duration) {}

// Failed reports any other failure (timeout, 5xx, refused TCP): no change to pacing.
func (p Permit) Failed() {}

// Snapshot is a read-only view of a Gate's state, for logs and metrics.
type Snapshot struct {
	Mode       Mode
	Spacing    time.Duration
	Streak     int
	Rejections int64
	Starts     int64
	Waited     time.Duration // total time callers spent waiting
}

// Snapshot returns the current state.
func (g *Gate) Snapshot() Snapshot { return Snapshot{} }
