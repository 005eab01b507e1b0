package gate

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
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
	ForbiddenBudget   time.Duration // Adaptive: longest a request keeps retrying refused upgrades, from the first refusal; default 10s
}

// Policy defaults.
const (
	DefaultForbiddenCooldown = 3 * time.Second
	DefaultConnectTimeout    = 15 * time.Second
	DefaultForbiddenBudget   = 10 * time.Second
)

// ReferencePolicy returns the reference proxy's connect policy: one retry 3 s after a 403, 15 s per
// attempt (and the default forbidden budget, which the reference modes do not use). It stays fixed
// when the defaults change. Pair it with [Reference].
func ReferencePolicy() Policy {
	return Policy{ForbiddenCooldown: 3 * time.Second, ConnectTimeout: 15 * time.Second, ForbiddenBudget: 10 * time.Second}
}

func (p Policy) withDefaults() Policy {
	if p.ForbiddenCooldown <= 0 {
		p.ForbiddenCooldown = DefaultForbiddenCooldown
	}
	if p.ConnectTimeout <= 0 {
		p.ConnectTimeout = DefaultConnectTimeout
	}
	if p.ForbiddenBudget <= 0 {
		p.ForbiddenBudget = DefaultForbiddenBudget
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
// in the line, until an attempt succeeds or fails otherwise, for at most ForbiddenBudget from the
// first refusal; the cooldown is not used. When the budget is spent, when ctx's deadline passes
// while the origin is still refusing (or when the gate already knows that no start can come in
// time, as after a long Retry-After), or when the origin is closed (see [ErrClosed]), Connect
// returns the last 403 error rather than a deadline error, since that is why the request failed
// (a cancelled ctx still gives ctx.Err()); a request that finds the origin closed before its first
// attempt gets the gate's last 403. In the other modes it retries once, through the gate, after
// max(ForbiddenCooldown, Retry-After) spent outside the gate, and returns the retry's error as it
// is.
func Connect[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error)) (T, Result, error) {
	p = p.withDefaults()
	if g.config().Mode == Adaptive {
		return connectAdaptive(ctx, g, p, dial)
	}
	var res Result
	r := request{arrival: time.Now()}
	v, err := attempt(ctx, g, p, dial, &res, r)
	var fb Forbidden
	if err == nil || !errors.As(err, &fb) {
		return v, res, err
	}
	var zero T
	start := time.Now()
	err = sleep(ctx, max(p.ForbiddenCooldown, fb.OriginForbidden()))
	res.Waited += time.Since(start)
	if err != nil {
		return zero, res, err
	}
	v, err = attempt(ctx, g, p, dial, &res, r)
	return v, res, err
}

// connectAdaptive is Connect in Adaptive mode: retries through the gate within the budget.
func connectAdaptive[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error)) (T, Result, error) {
	var res Result
	now := time.Now()
	probeBy := now.Add(p.ForbiddenBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(probeBy) {
		probeBy = d
	}
	v, err := attempt(ctx, g, p, dial, &res, request{arrival: now, probeBy: probeBy})
	var fb Forbidden
	if err == ErrClosed {
		return v, res, g.lastForbidden()
	}
	if err == nil || !errors.As(err, &fb) {
		return v, res, err
	}
	r := request{arrival: now, deadline: time.Now().Add(p.ForbiddenBudget), retry: true}
	if d, ok := ctx.Deadline(); ok && d.Before(r.deadline) {
		r.deadline = d // so that a retry that cannot start in time is answered at once
	}
	for {
		last := err
		v, err = attempt(ctx, g, p, dial, &res, r)
		switch {
		case err == nil:
			return v, res, nil
		case err == ErrClosed || err == errBudget:
			return v, res, last
		case errors.Is(err, context.DeadlineExceeded) && err == ctx.Err():
			// The origin kept refusing until the caller's deadline: its last refusal says more
			// than "deadline exceeded" (and carries any Retry-After).
			return v, res, last
		case !errors.As(err, &fb):
			return v, res, err
		}
	}
}

// attempt makes one network attempt through the gate and reports its outcome.
func attempt[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error), res *Result, r request) (T, error) {
	var zero T
	start := time.Now()
	_, span := tracing.Start(ctx, "gate wait", trace.WithAttributes(attribute.Bool("codexpool.gate.retry", r.retry)))
	permit, err := g.wait(ctx, r)
	res.Waited += time.Since(start)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return zero, err
	}
	span.End()
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
		g.last403.Store(&err)
		permit.Forbidden(fb.OriginForbidden())
	} else {
		permit.Failed()
	}
	if cerr := ctx.Err(); cerr != nil {
		return zero, cerr
	}
	return v, err
}

// lastForbidden returns the last 403 that Connect saw on g, or, if there was none (the rejections
// were reported through Wait), a Forbidden error that wraps ErrClosed.
func (g *Gate) lastForbidden() error {
	if err := g.last403.Load(); err != nil {
		return *err
	}
	return closedError{}
}

// closedError is a closed origin's answer when no 403 error of its own is at hand.
type closedError struct{}

func (closedError) Error() string                  { return ErrClosed.Error() }
func (closedError) Unwrap() error                  { return ErrClosed }
func (closedError) OriginForbidden() time.Duration { return 0 }

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
