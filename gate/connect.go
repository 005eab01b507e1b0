package gate

import (
	"context"
	"time"
)

// Forbidden is implemented by errors that mean "the origin rejected the upgrade with HTTP 403".
// Connect retries those once after the cooldown. RetryAfter is 0 when the origin sent none.
type Forbidden interface {
	error
	OriginForbidden() (retryAfter time.Duration)
}

// Policy is the connect policy around a Gate. Zero values are the defaults.
type Policy struct {
	ForbiddenCooldown time.Duration // wait before the one retry after a 403; default 3s (Retry-After wins if longer)
	ConnectTimeout    time.Duration // per network attempt; default 15s; excludes gate waits and the cooldown
}

// Result tells how a Connect went, for logs.
type Result struct {
	Attempts int           // network attempts made
	Waited   time.Duration // time spent in the gate and the cooldown
}

// Connect runs dial through the gate under policy p: each attempt waits for the gate, runs with
// its own ConnectTimeout, and reports its outcome. An error for which errors.As finds a Forbidden
// is reported as a rejection and retried once after the cooldown; the second error is returned
// as it is. Any other error is returned at once.
func Connect[T any](ctx context.Context, g *Gate, p Policy, dial func(ctx context.Context) (T, error)) (T, Result, error) {
	var res Result
	permit, err := g.Wait(ctx)
	if err != nil {
		var zero T
		return zero, res, err
	}
	res.Attempts++
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := dial(actx)
	if err != nil {
		permit.Failed()
		return v, res, err
	}
	permit.Succeeded()
	return v, res, nil
}
