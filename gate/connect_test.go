package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// originForbidden is a fake origin 403.
type originForbidden struct {
	msg        string
	retryAfter time.Duration
}

func (e *originForbidden) Error() string                  { return "403: " + e.msg }
func (e *originForbidden) OriginForbidden() time.Duration { return e.retryAfter }

// step is one scripted dial: it takes `after`, then fails with err (or succeeds if err is nil).
// A hanging step blocks until its context ends and returns the context's error.
type step struct {
	after time.Duration
	err   error
	hang  bool
}

// script returns a dial function that plays steps in order and records when each attempt began.
func script(t *testing.T, t0 time.Time, steps []step, starts *[]time.Duration) func(context.Context) (string, error) {
	n := 0
	return func(ctx context.Context) (string, error) {
		*starts = append(*starts, time.Since(t0))
		if n == len(steps) {
			t.Errorf("dial called %d times, want %d", n+1, len(steps))
			return "", errors.New("unexpected dial")
		}
		s := steps[n]
		n++
		if s.hang {
			<-ctx.Done()
			return "", ctx.Err()
		}
		select {
		case <-time.After(s.after):
		case <-ctx.Done():
			return "", fmt.Errorf("dial: %w", ctx.Err())
		}
		if s.err != nil {
			return "", s.err
		}
		return fmt.Sprintf("conn%d", n), nil
	}
}

func TestConnect(t *testing.T) {
	var (
		forbiddenA = &originForbidden{msg: "first"}
		forbiddenB = &originForbidden{msg: "second"}
		refused    = errors.New("connection refused")
	)
	tests := []struct {
		name   string
		cfg    Config
		taken  int // slots taken before Connect
		policy Policy
		steps  []step

		wantConn     string
		wantErr      error // compared by identity: Connect returns errors as they are
		wantElapsed  time.Duration
		wantWaited   time.Duration
		wantAttempts []time.Duration // when each network attempt began
		wantSnap     Snapshot        // counters only
	}{
		{
			name: "success at once", steps: []step{{after: 100 * time.Millisecond}},
			wantConn: "conn1", wantElapsed: 100 * time.Millisecond,
			wantAttempts: []time.Duration{0}, wantSnap: Snapshot{Starts: 1, Successes: 1},
		},
		{
			name:  "403 then success after the cooldown",
			steps: []step{{after: time.Second, err: forbiddenA}, {after: time.Second}},
			// 1s attempt, 3s cooldown (the gate's next start, 1s + 1s, is already past), 1s attempt.
			wantConn: "conn2", wantElapsed: 5 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 4 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
		{
			name:    "two 403s return the second error verbatim",
			steps:   []step{{err: forbiddenA}, {err: forbiddenB}},
			wantErr: forbiddenB, wantElapsed: 3 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 3 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 2},
		},
		{
			name:     "a wrapped 403 is found with errors.As",
			steps:    []step{{err: fmt.Errorf("upgrade: %w", forbiddenA)}, {}},
			wantConn: "conn2", wantElapsed: 3 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 3 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
		{
			name:    "other errors are not retried",
			steps:   []step{{after: time.Second, err: refused}},
			wantErr: refused, wantElapsed: time.Second,
			wantAttempts: []time.Duration{0}, wantSnap: Snapshot{Starts: 1, Failures: 1},
		},
		{
			// An off gate, so that the Retry-After push inside the gate cannot stand in for it.
			name: "Retry-After longer than the cooldown wins", cfg: Config{Mode: Off},
			steps:    []step{{err: &originForbidden{retryAfter: 5 * time.Second}}, {}},
			wantConn: "conn2", wantElapsed: 5 * time.Second, wantWaited: 5 * time.Second,
			wantAttempts: []time.Duration{0, 5 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
		{
			name:     "Retry-After shorter than the cooldown",
			steps:    []step{{err: &originForbidden{retryAfter: time.Second}}, {}},
			wantConn: "conn2", wantElapsed: 3 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 3 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
		{
			// The reference proxy's case: 1s attempt -> 403 -> 3s cooldown -> 2s timed-out retry.
			name: "reference: exactly 6s, fixed 1s gate", cfg: Config{Mode: Fixed, Floor: time.Second},
			policy:  Policy{ForbiddenCooldown: 3 * time.Second, ConnectTimeout: 2 * time.Second},
			steps:   []step{{after: time.Second, err: forbiddenA}, {hang: true}},
			wantErr: context.DeadlineExceeded, wantElapsed: 6 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 4 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Failures: 1},
		},
		{
			name:    "reference: exactly 6s, adaptive gate widened to 1s by the 403",
			policy:  Policy{ForbiddenCooldown: 3 * time.Second, ConnectTimeout: 2 * time.Second},
			steps:   []step{{after: time.Second, err: forbiddenA}, {hang: true}},
			wantErr: context.DeadlineExceeded, wantElapsed: 6 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 4 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Failures: 1},
		},
		{
			name: "the timeout excludes the gate wait",
			cfg:  Config{Mode: Fixed, Floor: 5 * time.Second}, taken: 1,
			policy:   Policy{ConnectTimeout: 2 * time.Second},
			steps:    []step{{after: 1500 * time.Millisecond}},
			wantConn: "conn1", wantElapsed: 6500 * time.Millisecond, wantWaited: 5 * time.Second,
			wantAttempts: []time.Duration{5 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Successes: 1},
		},
		{
			name:     "the timeout is per attempt and excludes the cooldown",
			policy:   Policy{ConnectTimeout: 2 * time.Second},
			steps:    []step{{after: 1500 * time.Millisecond, err: forbiddenA}, {after: 1500 * time.Millisecond}},
			wantConn: "conn2", wantElapsed: 6 * time.Second, wantWaited: 3 * time.Second,
			wantAttempts: []time.Duration{0, 4500 * time.Millisecond},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
		{
			// The 403 at 1s widens to 1s, pushing the gate's next start to 2s; the cooldown ends at
			// 1.5s, so the retry waits another 0.5s in the gate.
			name:     "the retry passes through the gate",
			policy:   Policy{ForbiddenCooldown: 500 * time.Millisecond},
			steps:    []step{{after: time.Second, err: forbiddenA}, {}},
			wantConn: "conn2", wantElapsed: 2 * time.Second, wantWaited: time.Second,
			wantAttempts: []time.Duration{0, 2 * time.Second},
			wantSnap:     Snapshot{Starts: 2, Rejections: 1, Successes: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				if cfg.Mode == "" {
					cfg.Mode = ReferenceMode
				}
				g := New(cfg)
				for range tt.taken {
					if _, err := g.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				t0 := time.Now()
				var attempts []time.Duration
				conn, res, err := Connect(t.Context(), g, tt.policy, script(t, t0, tt.steps, &attempts))
				if conn != tt.wantConn || err != tt.wantErr {
					t.Errorf("Connect = %q, %v; want %q, %v", conn, err, tt.wantConn, tt.wantErr)
				}
				if elapsed := time.Since(t0); elapsed != tt.wantElapsed {
					t.Errorf("took %v, want %v", elapsed, tt.wantElapsed)
				}
				if !slices.Equal(attempts, tt.wantAttempts) {
					t.Errorf("attempts began at %v, want %v", attempts, tt.wantAttempts)
				}
				if want := (Result{Attempts: len(tt.wantAttempts), Waited: tt.wantWaited}); res != want {
					t.Errorf("Result = %+v, want %+v", res, want)
				}
				s := g.Snapshot()
				got := Snapshot{Starts: s.Starts, Rejections: s.Rejections, Successes: s.Successes, Failures: s.Failures}
				if got != tt.wantSnap {
					t.Errorf("gate counters = %+v, want %+v", got, tt.wantSnap)
				}
			})
		})
	}
}

func TestConnectContextEnds(t *testing.T) {
	tests := []struct {
		name         string
		cancelAt     time.Duration
		steps        []step
		taken        int // slots taken before Connect on a fixed 10s gate
		wantAttempts int
	}{
		{"while waiting in the gate", 2 * time.Second, nil, 1, 0},
		{"during the dial (which wraps the error)", 500 * time.Millisecond, []step{{after: time.Second}}, 0, 1},
		{"during the cooldown", 2 * time.Second, []step{{err: &originForbidden{}}}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := New(Config{Mode: Fixed, Floor: 10 * time.Second})
				for range tt.taken {
					if _, err := g.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				t0 := time.Now()
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				time.AfterFunc(tt.cancelAt, cancel)
				var attempts []time.Duration
				_, res, err := Connect(ctx, g, Policy{}, script(t, t0, tt.steps, &attempts))
				if err != context.Canceled {
					t.Errorf("Connect error = %v, want context.Canceled unwrapped", err)
				}
				if elapsed := time.Since(t0); elapsed != tt.cancelAt {
					t.Errorf("Connect returned after %v, want %v (at once on cancel)", elapsed, tt.cancelAt)
				}
				if res.Attempts != tt.wantAttempts {
					t.Errorf("Attempts = %d, want %d", res.Attempts, tt.wantAttempts)
				}
			})
		})
	}
}

func TestConnectParentDeadlineShorterThanTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Mode: ReferenceMode})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var attempts []time.Duration
		_, _, err := Connect(ctx, g, Policy{}, script(t, time.Now(), []step{{hang: true}}, &attempts))
		if err != context.DeadlineExceeded {
			t.Errorf("Connect error = %v, want context.DeadlineExceeded", err)
		}
		if s := g.Snapshot(); s.Failures != 1 || s.Spacing != 0 {
			t.Errorf("a timed-out attempt: failures %d, spacing %v; want 1, 0 (no pacing change)", s.Failures, s.Spacing)
		}
	})
}
