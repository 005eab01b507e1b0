package gate

import (
	"context"
	"errors"
	"time"
)

// Forbidden is implemented by errors that mean "the origin rejected the upgrade with HTTP 403".
// Connect finds it with errors.As and retries the upgrade (see [Connect]). RetryAfter is 0 when
// the origin sent none. A 403 from a forward proxy is not an origin rejection and must not implement it.
type Forbidden interface {
	error
	OriginForbidden() (retryAfter time.Duration)
}

// Policy is the connect policy around a Gate. Zero (or negative) values are the defaults.
type Policy struct {
	ForbiddenCooldown time.Duration // wait before the one retry after a 403; default 3s (Retry-After wins if longer); not used in Adaptive mode
	ConnectTimeout    time.Duration // per network attempt; default 15s; excludes gate waits and the cooldown
}

// Policy defaults.
const (
	DefaultForbiddenCooldown = 3 * time.Second
	DefaultConnectTimeout    = 15 * time.Second
)

// ReferencePolicy returns the reference proxy's connect policy: one retry 3 s after a 403, 15 s per
// attempt. It stays fixed when the defaults change. Pair it with [Reference].
func ReferencePolicy() Policy {
	return Policy{ForbiddenCooldown: 3 * time.Second, ConnectTimeout: 15 * time.Second}
}

func (p Policy) withDefaults() Policy {
	if p.ForbiddenCooldown <= 0 {
		p.ForbiddenCooldown = DefaultForbiddenCooldown
	}
	if p.ConnectTimeout <= 0 {
		p.ConnectTimeout = DefaultConnectTimeout
	}
	return p
}

// Result tells how a Connect went, for logs.
type Result struct {
	Attempts int           // network attempts made
	Waited   time.Duration // time spent in the gate and the cooldown
}

// Connect runs dial through the gate under policy p, for one new upgrade (a socket reused from a
// pool does not pass the gate). Each attempt waits in g, then runs dial with its own ConnectTimeout
// context, so the timeout covers the network attempt only, and reports the outcome on its Permit.
// Any error for which errors.As finds no [Forbidden] is returned at once and as it is. If ctx
// ends, Connect returns ctx.Err() unwrapped. g must not be nil.
//
// An origin 403 (an error for which errors.As finds a [Forbidden]) is reported as a rejection and
// retried. In Adaptive mode the gate paces the retries (the rejection has already slowed it down,
// and a Retry-After holds every start back): Connect retries through the gate, keeping its place
// in the line, until an attempt succeeds or fails otherwise, or ctx ends; the cooldown is not
// used. If ctx's deadline passes while it is still being refused, Connect returns the last 403
// error rather than ctx.Err(), since that is why the request failed (a cancelled ctx still gives
// ctx.Err()). In the other modes it retries once, through the gate, after max(ForbiddenCooldown,
// Retry-After) spent outside the gate, and returns the retry's error as it is.
func Connect[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error)) (T, Result, error) {
	p = p.withDefaults()
	var res Result
	arrival := time.Now()
	v, err := attempt(ctx, g, p, dial, &res, arrival)
	var fb Forbidden
	if err == nil || !errors.As(err, &fb) {
		return v, res, err
	}
	if g.config().Mode == Adaptive {
		last := err
		for err != nil && errors.As(err, &fb) {
			last = err
			v, err = attempt(ctx, g, p, dial, &res, arrival)
		}
		if errors.Is(err, context.DeadlineExceeded) && err == ctx.Err() {
			// The origin kept refusing until the caller's deadline: its last refusal says more
			// than "deadline exceeded" (and carries any Retry-After).
			return v, res, last
		}
		return v, res, err
	}
	var zero T
	start := time.Now()
	err = sleep(ctx, max(p.ForbiddenCooldown, fb.OriginForbidden()))
	res.Waited += time.Since(start)
	if err != nil {
		return zero, res, err
	}
	v, err = attempt(ctx, g, p, dial, &res, arrival)
	return v, res, err
}

// attempt makes one network attempt through the gate and reports its outcome.
func attempt[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error), res *Result, arrival time.Time) (T, error) {
	var zero T
	start := time.Now()
	permit, err := g.wait(ctx, arrival)
	res.Waited += time.Since(start)
	if err != nil {
		return zero, err
	}
	res.Attempts++
	actx, cancel := context.WithTimeout(ctx, p.ConnectTimeout)
	v, err := dial(actx)
	cancel()
	if err == nil {
		permit.Succeeded()
		return v, nil
	}
	var fb Forbidden
	if errors.As(err, &fb) {
		permit.Forbidden(fb.OriginForbidden())
	} else {
		permit.Failed()
	}
	if cerr := ctx.Err(); cerr != nil {
		return zero, cerr
	}
	return v, err
}

// sleep waits for d or until ctx is done, returning ctx.Err() in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
