package gate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestFleetLiarAmongEight is issue 43's bar for a lying peer in virtual time (queue's
// TestGateLiarAmongEightOverNATS plays the same over real NATS): eight honest gates on the bus
// (1 ms, jitter and late tails) share a 10/s burst-10 origin with five callers each in a closed
// loop (more demand than it accepts), beside a liar that publishes a valid signal every 10 ms,
// is trusted like any peer, and for 8 s
//   - says nothing false ("honest": the reference);
//   - stalls: a refusal, a new reaction epoch, a Retry-After and a spacing of an hour and the
//     most demand a signal can carry, in every signal;
//   - rushes: 30 acceptances, a Recent of 1,000, no demand and no spacing, in every signal;
//   - rotates: a refusal with a new epoch and an hour's Retry-After once a second (what an honest
//     gate could report), from a new id every 4 s;
//   - rotates-stalling: stalls in every signal, from a new id every 4 s.
//
// In every variant and seed the honest gates together must get at least 80 % of the origin's
// rate (8 upgrades/s) with at most 15 % of their attempts refused, and no caller answered
// ErrClosed.
func TestFleetLiarAmongEight(t *testing.T) {
	for _, tt := range liarVariants() {
		t.Run(tt.name, func(t *testing.T) {
			s := seeds(t, 4, func(seed uint64) fleetResult { return runLiar(8, tt.lie, seed) })
			for _, r := range s.runs {
				t.Logf("%s: %.1f upgrades/s, %d refused (%.1f%%), %d waits failed; accepted per second %v, refused per second %v",
					tt.name, r.goodput, r.rejected, 100*r.share, r.failed, r.perSecond, r.rejPerSec)
				if r.failed > 0 {
					t.Errorf("%s: %d waits ended without an upgrade (ErrClosed); want none, the origin never closed", tt.name, r.failed)
				}
				if r.goodput < 8 {
					t.Errorf("%s: %.1f upgrades/s, want >= 8 (80 %% of the origin's 10)", tt.name, r.goodput)
				}
				if r.share > 0.15 {
					t.Errorf("%s: %.1f%% of the honest attempts refused, want at most 15%%", tt.name, 100*r.share)
				}
			}
		})
	}
}

type liarVariant struct {
	name string
	lie  func(s *Signal)
}

// liarVariants are the lies of TestFleetLiarAmongEight (and of queue's test over NATS).
func liarVariants() []liarVariant {
	stall := func(s *Signal) {
		s.Epoch++
		s.Rejected++
		s.RetryAfter, s.Spacing, s.Demand, s.Recent = time.Hour, time.Hour, maxSignalDemand, 0
	}
	slow := func(s *Signal) {
		if s.Seq%100 == 5 {
			s.Epoch++
			s.Rejected++
			s.RetryAfter = time.Hour
		}
	}
	rotate := func(lie func(*Signal)) func(*Signal) {
		return func(s *Signal) {
			if s.Seq%400 == 0 { // a new id every 4 s (this signal, seq 0, is invalid and dropped)
				*s = Signal{Gate: s.Gate + 1}
				return
			}
			lie(s)
		}
	}
	return []liarVariant{
		{"honest", func(s *Signal) {}},
		{"stall", stall},
		{"rush", func(s *Signal) {
			s.Accepted += 30
			s.Recent, s.Demand, s.Spacing, s.RetryAfter = 1000, 0, 0, 0
		}},
		{"rotate", rotate(slow)},
		{"rotate-stalling", rotate(stall)},
	}
}

// runLiar runs n honest gates and a liar (see TestFleetLiarAmongEight) for 8 s of load after a
// second in which they get to know each other, and returns the honest gates' outcomes: goodput
// and share are over the 8 s.
func runLiar(n int, lie func(*Signal), seed uint64) fleetResult {
	b := newBus(time.Millisecond, 0, seed)
	b.tail = true
	gates := make([]*Gate, n)
	for i := range gates {
		gates[i] = New(Config{})
		b.join(gates[i])
	}
	liarOn := make(chan struct{})
	b.wg.Go(func() {
		s := Signal{Gate: 0x5eed}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		on := false
		for {
			select {
			case <-b.stop:
				return
			case <-liarOn:
				on, liarOn = true, nil
			case <-tick.C:
				s.Seq++
				if on {
					lie(&s)
				}
				msg, err := s.MarshalBinary()
				if err != nil {
					if s.Seq == 0 {
						continue // a new id's first, invalid signal: not sent
					}
					panic(err)
				}
				b.publish(nil, msg)
			}
		}
	})
	time.Sleep(time.Second)
	for i, g := range gates {
		if p := g.Snapshot().Peers; p != n {
			panic(fmt.Sprintf("gate %d counts %d peers after a second, want %d", i, p, n))
		}
	}
	close(liarOn)
	origin := newBucketOrigin(10, 10)
	origin.slow = true
	const span = 8 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var (
		mu  sync.Mutex
		res fleetResult
		wg  sync.WaitGroup
	)
	for _, g := range gates {
		for range 5 {
			wg.Go(func() {
				for ctx.Err() == nil {
					p, err := g.Wait(ctx)
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							res.failed++
							mu.Unlock()
							time.Sleep(10 * time.Millisecond)
						}
						continue
					}
					time.Sleep(time.Millisecond) // the handshake
					if origin.allow() {
						p.Succeeded()
					} else {
						p.Forbidden(0)
					}
				}
			})
		}
	}
	wg.Wait()
	b.close()
	res.accepted, res.rejected = origin.totals()
	res.perSecond, res.rejPerSec = origin.accepted, origin.rejected
	res.goodput = float64(res.accepted) / span.Seconds()
	res.share = float64(res.rejected) / float64(max(res.accepted+res.rejected, 1))
	return res
}
