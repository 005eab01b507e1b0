package gate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A simulated origin in virtual time: a token bucket on upgrades (as golang.org/x/time/rate, which
// the real simulator uses: a rejected upgrade takes no token), handshakes of 1ms. It lets the
// controller be tuned and checked against the targets in milliseconds of real time.

type bucketOrigin struct {
	mu       sync.Mutex
	rate     float64
	burst    float64
	tokens   float64
	last     time.Time
	t0       time.Time
	accepted []int // per second since t0
	rejected []int
	rejAt    []time.Duration // every rejection, since t0
	accAt    []time.Duration // every acceptance, since t0
	rnd      *rand.Rand
	slow     bool          // one handshake in five takes up to 10ms longer (a loaded machine)
	away     time.Duration // one-way delay between the gates and the origin (another host)
	tcp      bool          // TCP's handshake: a round trip of away before the upgrade request, as over real sockets
}

func newBucketOrigin(rate float64, burst int) *bucketOrigin {
	now := time.Now()
	return &bucketOrigin{rate: rate, burst: float64(burst), tokens: float64(burst), last: now, t0: now,
		rnd: rand.New(rand.NewPCG(1, 2))}
}

// setLimit replaces the bucket with a full one, as codextest.Server.SetUpgradeLimit does.
func (o *bucketOrigin) setLimit(rate float64, burst int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rate, o.burst, o.tokens, o.last = rate, float64(burst), float64(burst), time.Now()
}

func (o *bucketOrigin) allow() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.tokens = math.Min(o.burst, o.tokens+now.Sub(o.last).Seconds()*o.rate)
	o.last = now
	sec := int(now.Sub(o.t0) / time.Second)
	for len(o.accepted) <= sec {
		o.accepted = append(o.accepted, 0)
		o.rejected = append(o.rejected, 0)
	}
	if o.tokens >= 1 {
		o.tokens--
		o.accepted[sec]++
		o.accAt = append(o.accAt, now.Sub(o.t0))
		return true
	}
	o.rejected[sec]++
	o.rejAt = append(o.rejAt, now.Sub(o.t0))
	return false
}

// dial is one handshake: the origin decides after 0.2-3ms (jitter, as on a loaded machine), and
// answers 0.5ms later.
func (o *bucketOrigin) dial(ctx context.Context) (struct{}, error) {
	o.mu.Lock()
	d := 200*time.Microsecond + time.Duration(o.rnd.Int64N(int64(2800*time.Microsecond)))
	if o.slow && o.rnd.IntN(5) == 0 {
		d += time.Duration(o.rnd.Int64N(int64(10 * time.Millisecond)))
	}
	o.mu.Unlock()
	there := o.away // the upgrade request's way to the origin
	if o.tcp {
		there += 2 * o.away
	}
	time.Sleep(d + there)
	ok := o.allow()
	time.Sleep(500*time.Microsecond + o.away)
	if !ok {
		return struct{}{}, &originForbidden{msg: "rate limited"}
	}
	return struct{}{}, nil
}

func (o *bucketOrigin) totals() (acc, rej int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.accepted {
		acc += o.accepted[i]
		rej += o.rejected[i]
	}
	return acc, rej
}

type simResult struct {
	ok, failed int
	wall       time.Duration // until the last request's upgrade
	accepted   int
	rejected   int
	perSecond  []int
	rejPerSec  []int
	rejAt      []time.Duration // every rejection, since the origin started
	accAt      []time.Duration // every acceptance
}

func (r simResult) rejectedShare() float64 {
	return float64(r.rejected) / float64(max(r.accepted+r.rejected, 1))
}

func (r simResult) String() string {
	return fmt.Sprintf("ok %d failed %d wall %v accepted %d rejected %d (%.1f%%)",
		r.ok, r.failed, r.wall.Round(time.Millisecond), r.accepted, r.rejected, 100*r.rejectedShare())
}

// simulate runs Connect for every arrival (offsets from now) against o, with policy p and a
// per-request deadline, and optional origin limit changes.
func simulate(cfg Config, o *bucketOrigin, arrivals []time.Duration, deadline time.Duration, changes map[time.Duration][2]float64) simResult {
	g := New(cfg)
	t0 := time.Now()
	var (
		mu  sync.Mutex
		res simResult
		wg  sync.WaitGroup
	)
	for at, lim := range changes {
		wg.Go(func() {
			time.Sleep(at)
			o.setLimit(lim[0], int(lim[1]))
		})
	}
	for _, at := range arrivals {
		wg.Go(func() {
			time.Sleep(at)
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			_, _, err := Connect(ctx, g, Policy{}, o.dial)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.failed++
				return
			}
			res.ok++
			res.wall = max(res.wall, time.Since(t0))
		})
	}
	wg.Wait()
	res.accepted, res.rejected = o.totals()
	res.perSecond, res.rejPerSec = o.accepted, o.rejected
	return res
}

func burst(n int) []time.Duration { return make([]time.Duration, n) }

func openLoop(rate float64, d time.Duration) []time.Duration {
	var out []time.Duration
	for t := time.Duration(0); t < d; t += time.Duration(float64(time.Second) / rate) {
		out = append(out, t)
	}
	return out
}

// TestSimulatedTargets checks the targets against the simulated origin, for Adaptive, and
// logs the reference preset's figures beside them (go test -v -run Simulated ./gate).
func TestSimulatedTargets(t *testing.T) {
	modes := []struct {
		name  string
		cfg   Config
		check bool
	}{{"adaptive", Config{}, true}, {"reference", Reference(), false}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Run("1: 5/s burst 5, 60-burst", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := simulate(m.cfg, newBucketOrigin(5, 5), burst(60), 2*time.Minute, nil)
					t.Log(r)
					t.Logf("accepted/s %v rejected/s %v", r.perSecond, r.rejPerSec)
					if m.check && (r.ok != 60 || r.wall > 16500*time.Millisecond || r.rejectedShare() > 0.15) {
						t.Errorf("want 60/60 by 16.5s (17s with 500ms latency), rejected <= 15%%")
					}
				})
			})
			t.Run("2: 1/s burst 1, 20-burst", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := simulate(m.cfg, newBucketOrigin(1, 1), burst(20), 2*time.Minute, nil)
					t.Log(r)
					if m.check && (r.ok != 20 || r.wall > 29500*time.Millisecond) {
						t.Errorf("want 20/20 by 29.5s")
					}
				})
			})
			t.Run("3: healthy, 30-burst", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					r := simulate(m.cfg, newBucketOrigin(1e9, 1e9), burst(30), 2*time.Minute, nil)
					t.Log(r)
					if m.check && (r.ok != 30 || r.wall > 15*time.Millisecond) {
						t.Errorf("want 30/30 within 5 handshakes (3ms each at most)")
					}
				})
			})
			t.Run("4: 5/s, 50/s from 20s, 5/s from 40s, demand 60/s", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					changes := map[time.Duration][2]float64{20 * time.Second: {50, 50}, 40 * time.Second: {5, 5}}
					r := simulate(m.cfg, newBucketOrigin(5, 5), openLoop(60, 60*time.Second), 5*time.Minute, changes)
					t.Log(r)
					t.Logf("accepted/s %v", r.perSecond)
					t.Logf("rejected/s %v", r.rejPerSec)
					if !m.check {
						return
					}
					if got := r.perSecond[30]; got < 40 {
						t.Errorf("accepted %d/s at 30s (10s after the origin went to 50/s), want >= 40", got)
					}
					for s := 50; s < min(60, len(r.rejPerSec)); s++ {
						if r.rejPerSec[s] > 1 {
							t.Errorf("%d rejections in second %d (10s after the origin went back to 5/s), want <= 1", r.rejPerSec[s], s)
						}
					}
				})
			})
			t.Run("5: demand 10/s on a 5/s origin for 60s", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					o := newBucketOrigin(5, 5)
					r := simulate(m.cfg, o, openLoop(10, 60*time.Second), 5*time.Minute, nil)
					acc60 := 0
					rej60 := 0
					for s := range min(60, len(r.perSecond)) {
						acc60 += r.perSecond[s]
						rej60 += r.rejPerSec[s]
					}
					share := float64(rej60) / float64(acc60+rej60)
					t.Logf("%v; first 60s: goodput %.2f/s, rejected %.1f%%", r, float64(acc60)/60, 100*share)
					t.Logf("accepted/s %v", r.perSecond)
					t.Logf("rejected/s %v", r.rejPerSec)
					if m.check && (float64(acc60)/60 < 4 || share > 0.10) {
						t.Errorf("want goodput >= 4/s and rejections <= 10%% over the 60s")
					}
				})
			})
		})
	}
	_ = strings.Join
}
