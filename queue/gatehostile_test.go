package queue

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
)

// TestGateLiarOverNATS plays a gate peer that follows the protocol but lies, for real over
// NATS, against two honest gates linked by LinkGate that share a 10/s (burst 10) origin with
// twice as much demand as it accepts. The liar is trusted like any peer (valid signals, seqs
// and totals that only grow), then for 8 s either
//   - says nothing false ("honest": the reference);
//   - stalls: reports a refusal in every signal, with a new reaction epoch, a Retry-After of an
//     hour, a spacing of an hour and the most demand a signal can carry; or
//   - rushes: reports 30 acceptances in every signal, no demand and no spacing, to make the
//     honest gates storm the origin.
//
// What it asserts: no honest caller is ever answered ErrClosed (before, the stalling liar closed
// both honest gates within 2 s, failing 9,000-16,000 waits in 8 s), and the reference gets at
// least 9 upgrades/s. What it logs and does not bound yet: the stalled rate (about 0.5-1.4/s of
// the origin's 10) and the rushed refusals (about half the attempts); see docs/gate-design.md.
func TestGateLiarOverNATS(t *testing.T) {
	for _, tt := range []struct {
		name string
		lie  func(s *gate.Signal)
	}{
		{name: "honest", lie: func(s *gate.Signal) {}},
		{name: "stall", lie: func(s *gate.Signal) {
			s.Epoch++
			s.Rejected++
			s.RetryAfter, s.Spacing, s.Demand, s.Recent = time.Hour, time.Hour, 1<<20, 0
		}},
		{name: "rush", lie: func(s *gate.Signal) {
			s.Accepted += 30
			s.Recent, s.Demand, s.Spacing, s.RetryAfter = 1000, 0, 0, 0
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := startServer(t)
			subject := GateSubject("test\x00" + t.Name())
			origin := newTestBucket(10, 10)
			var honest []*gate.Gate
			for range 2 {
				g := gate.New(gate.Config{})
				l, err := LinkGate(connect(t, ns), subject, g, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				honest = append(honest, g)
			}
			liar := startLiar(t, connect(t, ns), subject, tt.lie)
			defer liar.stop()
			waitFor(t, "the honest gates to trust the liar and each other", func() bool {
				return honest[0].Snapshot().Peers == 2 && honest[1].Snapshot().Peers == 2
			})
			liar.lying.Store(true)
			const span = 8 * time.Second
			r := driveGates(t, honest, origin, 20, span)
			rate := float64(r.accepted) / span.Seconds()
			share := float64(r.rejected) / math.Max(float64(r.accepted+r.rejected), 1)
			t.Logf("%s: honest gates got %.1f upgrades/s of the origin's 10 (%d refused, %.0f%%; %d waits failed), the longest wait %v; liar sent %d signals",
				tt.name, rate, r.rejected, 100*share, r.failed, r.longest.Round(time.Millisecond), liar.sent.Load())
			if r.failed > 0 {
				t.Errorf("%s: %d waits ended without an upgrade (ErrClosed: a closed origin); want none, the origin never closed", tt.name, r.failed)
			}
			if tt.name == "honest" && rate < 9 {
				t.Errorf("honest: %.1f upgrades/s, want >= 9 of the origin's 10 (11.25 with its burst)", rate)
			}
		})
	}
}

// liar publishes valid, consistent signals from one id every 10 ms (a third of what a peer
// may send); once lying is set, each is changed by lie first.
type liar struct {
	lying atomic.Bool
	sent  atomic.Int64
	done  chan struct{}
	wg    sync.WaitGroup
}

func startLiar(t *testing.T, nc *nats.Conn, subject string, lie func(*gate.Signal)) *liar {
	t.Helper()
	l := &liar{done: make(chan struct{})}
	s := gate.Signal{Gate: 0x5eed}
	l.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var buf []byte
		for {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			s.Seq++
			if l.lying.Load() {
				lie(&s)
			}
			buf, _ = s.AppendBinary(buf[:0])
			if nc.Publish(subject, buf) == nil {
				l.sent.Add(1)
			}
		}
	})
	return l
}

func (l *liar) stop() { close(l.done); l.wg.Wait() }

// testBucket is a token-bucket origin: rate upgrades a second, burst at once.
type testBucket struct {
	mu           sync.Mutex
	rate, tokens float64
	burst        float64
	last         time.Time
}

func newTestBucket(rate, burst float64) *testBucket {
	return &testBucket{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (b *testBucket) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// driven is what driveGates counted.
type driven struct {
	accepted, rejected, failed int
	longest                    time.Duration
}

// driveGates keeps perGate callers waiting at each gate for span (closed loop: each starts an
// upgrade, takes 1 ms for the handshake, reports it and comes back) and counts the outcomes.
func driveGates(t *testing.T, gates []*gate.Gate, origin *testBucket, perGate int, span time.Duration) driven {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var (
		mu sync.Mutex
		r  driven
		wg sync.WaitGroup
	)
	for _, g := range gates {
		for range perGate {
			wg.Go(func() {
				for ctx.Err() == nil {
					t0 := time.Now()
					pm, err := g.Wait(ctx)
					waited := time.Since(t0)
					if err != nil {
						mu.Lock()
						r.longest = max(r.longest, waited) // still waiting at the end, or refused
						if ctx.Err() == nil {
							r.failed++ // a request the gate answered without an upgrade (a closed origin)
							if r.failed == 1 {
								t.Logf("first failed wait at %v: %v (%+v)", time.Since(t0), err, g.Snapshot())
							}
						}
						mu.Unlock()
						if ctx.Err() == nil {
							time.Sleep(10 * time.Millisecond) // the next request
						}
						continue
					}
					time.Sleep(time.Millisecond) // the handshake
					ok := origin.allow()
					if ok {
						pm.Succeeded()
					} else {
						pm.Forbidden(0)
					}
					mu.Lock()
					r.longest = max(r.longest, waited)
					if ok {
						r.accepted++
					} else {
						r.rejected++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return r
}
