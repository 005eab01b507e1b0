package gate

import (
	"context"
	"slices"
	"time"
)

// The Adaptive controller (see the Gate doc comment): a window of upgrades in flight, grown by
// slow start and halved on a rejection, and a spacing that converges on the accepted rate.

// minSpacing is the spacing below which relaxing goes to Floor: at more than 1000 starts per
// second the window, not the spacing, is what limits.
const minSpacing = time.Millisecond

type outcome int

const (
	outcomeSuccess outcome = iota
	outcomeForbidden
	outcomeFailure
)

// adaptive is the Adaptive controller's state, guarded by Gate.mu (with Gate.spacing, the
// relaxation run in Gate.streak and Gate.widenedAt).
type adaptive struct {
	ready    bool      // init has run
	window   int       // upgrades allowed in flight
	ssthresh int       // slow start below it; MaxWindow until the first rejection
	grow     int       // successes towards the next +1 above ssthresh
	steps    int       // relaxation steps since the last rejection (each cuts harder)
	inflight int       // permits granted and neither reported nor expired
	last     time.Time // the last start
	hold     time.Time // no start before this (a rejection's push, Retry-After)
	queue    []*waiter // callers waiting, in arrival order
	slots    slotRing  // the permits in flight, for their leases
	accepted rateCounter
}

// waiter is one caller queued in Wait.
type waiter struct {
	arrival time.Time
	wake    chan struct{} // buffered(1): "something changed, look again"
}

func (a *adaptive) init(c Config) {
	if !a.ready {
		a.ready = true
		a.window = c.InitialWindow
		a.ssthresh = c.MaxWindow
	}
}

// earliest is the first time the rate allows the next start.
func (g *Gate) earliest() time.Time {
	t := g.a.hold
	if !g.a.last.IsZero() {
		if n := g.a.last.Add(g.spacing); n.After(t) {
			t = n
		}
	}
	return t
}

// tryGrant grants a start at now if the window and the spacing allow it.
func (g *Gate) tryGrant(now time.Time) (Permit, bool) {
	if g.a.inflight >= g.a.window || now.Before(g.earliest()) {
		return Permit{}, false
	}
	g.a.inflight++
	g.a.last = now
	return Permit{g: g, start: now, id: g.a.slots.push(now)}, true
}

// wakeHead tells the first waiter to look again.
func (g *Gate) wakeHead() {
	if len(g.a.queue) > 0 {
		select {
		case g.a.queue[0].wake <- struct{}{}:
		default:
		}
	}
}

// expire reclaims the slots of permits whose lease ran out unreported.
func (g *Gate) expire(now time.Time, lease time.Duration) {
	g.a.inflight -= g.a.slots.expire(now.Add(-lease))
}

// waitAdaptive is Wait in Adaptive mode. The fast path (nobody queued, window and spacing open)
// takes the lock once and does not allocate.
func (g *Gate) waitAdaptive(ctx context.Context, now, arrival time.Time) (Permit, error) {
	c := g.config()
	g.mu.Lock()
	g.a.init(c)
	g.expire(now, c.Lease)
	if len(g.a.queue) == 0 {
		if p, ok := g.tryGrant(now); ok {
			g.mu.Unlock()
			g.starts.Add(1)
			return p, nil
		}
	}
	w := &waiter{arrival: arrival, wake: make(chan struct{}, 1)}
	i, _ := slices.BinarySearchFunc(g.a.queue, arrival, func(x *waiter, t time.Time) int {
		if x.arrival.After(t) {
			return 1
		}
		return -1 // equal arrivals keep their order
	})
	g.a.queue = slices.Insert(g.a.queue, i, w)
	began := now
	for {
		d := time.Duration(-1) // wait for a wake-up only
		if g.a.queue[0] == w {
			if p, ok := g.tryGrant(now); ok {
				g.a.queue = slices.Delete(g.a.queue, 0, 1)
				g.wakeHead()
				g.mu.Unlock()
				g.waited.Add(int64(now.Sub(began)))
				g.starts.Add(1)
				return p, nil
			}
			d = max(g.earliest().Sub(now), 0)
			if g.a.inflight >= g.a.window {
				if oldest, ok := g.a.slots.oldest(); ok {
					d = max(d, oldest.Add(c.Lease).Sub(now))
				}
			}
		}
		g.mu.Unlock()
		var timer <-chan time.Time
		var t *time.Timer
		if d >= 0 {
			t = time.NewTimer(d)
			timer = t.C
		}
		select {
		case <-w.wake:
		case <-timer:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		g.mu.Lock()
		now = time.Now()
		if err := ctx.Err(); err != nil {
			head := g.a.queue[0] == w
			g.a.queue = slices.DeleteFunc(g.a.queue, func(x *waiter) bool { return x == w })
			if head {
				g.wakeHead()
			}
			g.mu.Unlock()
			g.waited.Add(int64(now.Sub(began)))
			return Permit{}, err
		}
		g.expire(now, c.Lease)
	}
}

// reportAdaptive applies one outcome report at time now.
func (g *Gate) reportAdaptive(p Permit, o outcome, now time.Time, retryAfter time.Duration) {
	c := g.config()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.a.init(c)
	if o == outcomeForbidden && retryAfter > 0 {
		if t := now.Add(retryAfter); t.After(g.a.hold) {
			g.a.hold = t
		}
	}
	if !g.a.slots.release(p.id) {
		return // reported before, or its lease ran out: the slot is no longer its own
	}
	g.a.inflight--
	g.expire(now, c.Lease)
	defer g.wakeHead()
	switch o {
	case outcomeSuccess:
		g.a.accepted.add(now, c.RateWindow)
		g.succeededAdaptive(c)
	case outcomeForbidden:
		g.forbiddenAdaptive(c, p.start, now)
	}
}

// succeededAdaptive grows the window and relaxes the spacing, each only while it is what limits.
func (g *Gate) succeededAdaptive(c Config) {
	queued := len(g.a.queue) > 0
	if queued || g.a.inflight+1 >= (g.a.window+1)/2 {
		if g.a.window < g.a.ssthresh {
			g.a.window++
		} else if g.a.grow++; g.a.grow >= g.a.window {
			g.a.grow = 0
			g.a.window++
		}
		g.a.window = min(g.a.window, c.MaxWindow)
	}
	if !queued || g.spacing <= c.Floor {
		return
	}
	if g.streak++; g.streak < c.RelaxRun {
		return
	}
	g.streak = 0
	g.a.steps++
	cut := (1 - c.Relax) * float64(g.a.steps)
	s := time.Duration(float64(g.spacing) * max(1-cut, 0.5))
	if s < minSpacing {
		s = 0
	}
	g.spacing = max(s, c.Floor)
}

// forbiddenAdaptive reacts to a rejection of an attempt that started at start.
func (g *Gate) forbiddenAdaptive(c Config, start, now time.Time) {
	g.streak = 0
	g.a.steps = 0
	if start.After(g.widenedAt) {
		g.widenedAt = now
		g.a.window = max(g.a.window/2, 1)
		g.a.ssthresh = g.a.window
		g.a.grow = 0
		measured := c.RateWindow / time.Duration(max(g.a.accepted.sum(now, c.RateWindow), 1))
		s := max(time.Duration(float64(g.spacing)*c.Backoff), measured)
		g.spacing = max(min(s, c.Max), c.Floor)
	}
	if t := now.Add(g.spacing); t.After(g.a.hold) {
		g.a.hold = t
	}
}

// slotRing holds the start times of the permits in flight, indexed by permit id: ids are handed
// out in order, so the oldest outstanding permit is at the front and a report finds its slot in
// O(1). It grows (amortised) only when more permits are outstanding than ever before.
type slotRing struct {
	buf  []slot // len is 0 or a power of two
	head int    // index in buf of id base
	n    int    // ids base .. base+n-1 are in the ring
	base uint64 // id of the front slot; ids start at 1, so 0 is never outstanding
}

type slot struct {
	start time.Time
	done  bool // reported or expired
}

func (r *slotRing) at(i int) *slot { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// push adds a slot started at start and returns its id.
func (r *slotRing) push(start time.Time) uint64 {
	if r.base == 0 {
		r.base = 1
	}
	if r.n == len(r.buf) {
		buf := make([]slot, max(2*len(r.buf), 16))
		for i := range r.n {
			buf[i] = *r.at(i)
		}
		r.buf, r.head = buf, 0
	}
	*r.at(r.n) = slot{start: start}
	r.n++
	return r.base + uint64(r.n-1)
}

// release marks id done and reports whether it was outstanding.
func (r *slotRing) release(id uint64) bool {
	if id < r.base || id >= r.base+uint64(r.n) {
		return false
	}
	s := r.at(int(id - r.base))
	if s.done {
		return false
	}
	s.done = true
	r.trim()
	return true
}

// expire marks done the outstanding slots that started at or before cutoff and returns how many.
func (r *slotRing) expire(cutoff time.Time) int {
	n := 0
	for r.n > 0 {
		s := r.at(0)
		if !s.done {
			if s.start.After(cutoff) {
				break
			}
			n++
		}
		r.pop()
	}
	return n
}

// oldest returns the start of the oldest outstanding slot.
func (r *slotRing) oldest() (time.Time, bool) {
	r.trim()
	if r.n == 0 {
		return time.Time{}, false
	}
	return r.at(0).start, true
}

func (r *slotRing) trim() {
	for r.n > 0 && r.at(0).done {
		r.pop()
	}
}

func (r *slotRing) pop() {
	*r.at(0) = slot{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	r.base++
}

// rateCounter counts events in rateBuckets buckets that together span a RateWindow.
type rateCounter struct {
	counts [rateBuckets]int
	epochs [rateBuckets]int64
}

const rateBuckets = 10

func bucketOf(now time.Time, window time.Duration) int64 {
	return now.UnixNano() / max(int64(window)/rateBuckets, 1)
}

func (c *rateCounter) add(now time.Time, window time.Duration) {
	e := bucketOf(now, window)
	i := int(e % rateBuckets)
	if c.epochs[i] != e {
		c.epochs[i], c.counts[i] = e, 0
	}
	c.counts[i]++
}

// sum returns the events of the last window (whole buckets, the current one included).
func (c *rateCounter) sum(now time.Time, window time.Duration) int {
	e := bucketOf(now, window)
	n := 0
	for i := range rateBuckets {
		if e-c.epochs[i] < rateBuckets {
			n += c.counts[i]
		}
	}
	return n
}
