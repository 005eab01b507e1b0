package gate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// minSpacing is the spacing below which relaxing goes to Floor: at more than 1000 starts per
// second the window, not the spacing, is what limits.
const minSpacing = time.Millisecond

// A closed origin: closedRefusals refusals with nothing accepted, the first and the last at least
// closedSpans RateWindows apart. With nothing accepted the gate spaces its starts at least a
// RateWindow apart (1 s), and a token-bucket origin refills a token in 1/rate, so an origin that
// is only rate-limited (at 1/s or faster) accepts the second or third paced attempt; three paced
// refusals over two seconds mean the origin is refusing everything. A burst refused in the same
// instant is not enough however large: it is one signal, not several.
const (
	closedRefusals = 3
	closedSpans    = 2
)

// ErrClosed is returned by [Gate.Wait] in Adaptive mode while the origin is closed: no upgrade
// was accepted while several were refused (three, spread over at least two RateWindows). A closed
// origin is probed by one caller at a time at the widest spacing (max(Max, Floor)): a caller that
// may probe waits for the next probe slot if its context's deadline allows; every other caller gets
// ErrClosed at once, and so do the callers waiting when the gate closes. The first accepted
// upgrade reopens the gate. [Connect] returns the last 403 instead.
var ErrClosed = errors.New("gate: origin closed: upgrades refused and none accepted")

// errBudget ends a retry's wait when its forbidden budget is spent.
var errBudget = errors.New("gate: forbidden budget spent")

// adaptive is the Adaptive controller: a window of upgrades in flight, grown by slow start and
// halved on a rejection, and a spacing between starts that converges on the rate the origin
// accepts. The package documentation gives the rules and why the defaults are what they are.
type adaptive struct {
	mu        sync.Mutex
	spacing   time.Duration // gap between consecutive starts
	streak    int           // paced successes towards the next relaxation step
	widenedAt time.Time     // the last reaction: rejections of attempts started before it are not news
	window    int           // upgrades allowed in flight
	ssthresh  int           // slow start below it; MaxWindow until the first rejection
	grow      int           // successes towards the next +1 above ssthresh
	steps     int           // relaxation steps since the last rejection (each cuts harder)
	inflight  int           // permits granted and neither reported nor expired
	last      time.Time     // the last start
	hold      time.Time     // no start before this (a rejection's push, Retry-After); never moves back
	queue     []*waiter     // callers waiting, in arrival order
	slots     slotRing      // the permits in flight, for their leases
	accepted  rateCounter

	refused      int       // refusals since the last acceptance
	firstRefused time.Time // the first and the last of them
	lastRefused  time.Time
	closed       bool      // see ErrClosed
	probing      bool      // a prober is waiting or its probe is in flight
	probeID      uint64    // the probe's slot once granted (0: still waiting)
	probeStart   time.Time // when it was granted

	cfg Config // immutable
}

// waiter is one caller queued in wait.
type waiter struct {
	arrival time.Time
	wake    chan struct{} // buffered(1): "something changed, look again"
	probe   bool          // the closed origin's prober
}

func newAdaptive(c Config) *adaptive {
	return &adaptive{cfg: c, spacing: c.Floor, window: c.InitialWindow, ssthresh: c.MaxWindow}
}

// widest is the spacing of a closed origin's probes.
func (a *adaptive) widest() time.Duration { return max(a.cfg.Max, a.cfg.Floor) }

// earliest is the first time the rate allows the next start.
func (a *adaptive) earliest() time.Time {
	t := a.hold
	if !a.last.IsZero() {
		if n := a.last.Add(a.spacing); n.After(t) {
			t = n
		}
	}
	if a.closed {
		if n := a.lastRefused.Add(a.widest()); n.After(t) {
			t = n
		}
	}
	return t
}

// tryGrant grants a start at now if the window and the spacing allow it.
func (a *adaptive) tryGrant(now time.Time) (grant, bool) {
	if a.inflight >= a.window || now.Before(a.earliest()) {
		return grant{}, false
	}
	a.inflight++
	a.last = now
	return grant{start: now, id: a.slots.push(now)}, true
}

// wakeHead tells the first waiter to look again.
func (a *adaptive) wakeHead() {
	if len(a.queue) > 0 {
		wake(a.queue[0])
	}
}

func wake(w *waiter) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// expire reclaims the slots of permits whose lease ran out unreported.
func (a *adaptive) expire(now time.Time) {
	a.inflight -= a.slots.expire(now.Add(-a.cfg.Lease))
	if a.probeID != 0 && now.Sub(a.probeStart) >= a.cfg.Lease {
		a.probing, a.probeID = false, 0 // its slot was just reclaimed
	}
}

// mayProbe reports whether r may become the closed origin's prober.
func (a *adaptive) mayProbe(r request) bool {
	return !r.retry && !a.probing && (r.probeBy.IsZero() || !a.earliest().After(r.probeBy))
}

// wait is the Adaptive wait. The fast path (nobody queued, window and spacing open) takes the
// lock once and does not allocate.
func (a *adaptive) wait(ctx context.Context, now time.Time, r request) (grant, error) {
	a.mu.Lock()
	a.expire(now)
	probe := false
	if a.closed {
		if !a.mayProbe(r) {
			a.mu.Unlock()
			return grant{}, ErrClosed
		}
		probe, a.probing = true, true
	} else if len(a.queue) == 0 {
		if gr, ok := a.tryGrant(now); ok {
			a.mu.Unlock()
			return gr, nil
		}
	}
	w := &waiter{arrival: r.arrival, wake: make(chan struct{}, 1), probe: probe}
	i, _ := slices.BinarySearchFunc(a.queue, r.arrival, func(x *waiter, t time.Time) int {
		if x.arrival.After(t) || r.retry && x.arrival.Equal(t) {
			return 1 // a retry goes before the callers that arrived with it but have not started
		}
		return -1 // equal arrivals keep their order
	})
	a.queue = slices.Insert(a.queue, i, w)
	began := now
	for {
		var err error
		switch {
		case a.closed && (!w.probe || !r.probeBy.IsZero() && a.earliest().After(r.probeBy)):
			err = ErrClosed
		case !r.deadline.IsZero() && (!now.Before(r.deadline) || a.hold.After(r.deadline)):
			err = errBudget // the hold never moves back: no start can come in time
		}
		if err != nil {
			a.leave(w)
			a.mu.Unlock()
			return grant{waited: now.Sub(began)}, err
		}
		d := time.Duration(-1) // wait for a wake-up only
		if a.queue[0] == w {
			if gr, ok := a.tryGrant(now); ok {
				a.queue = slices.Delete(a.queue, 0, 1)
				if w.probe && a.closed {
					a.probeID, a.probeStart = gr.id, now
				}
				a.wakeHead()
				a.mu.Unlock()
				gr.waited = now.Sub(began)
				return gr, nil
			}
			d = max(a.earliest().Sub(now), 0)
			if a.inflight >= a.window {
				if oldest, ok := a.slots.oldest(); ok {
					d = max(d, oldest.Add(a.cfg.Lease).Sub(now))
				}
			}
		}
		if !r.deadline.IsZero() && (d < 0 || r.deadline.Sub(now) < d) {
			d = r.deadline.Sub(now)
		}
		a.mu.Unlock()
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
		a.mu.Lock()
		now = time.Now()
		if err := ctx.Err(); err != nil {
			a.leave(w)
			a.mu.Unlock()
			return grant{waited: now.Sub(began)}, err
		}
		a.expire(now)
	}
}

// leave takes w out of the queue without a start.
func (a *adaptive) leave(w *waiter) {
	head := a.queue[0] == w
	a.queue = slices.DeleteFunc(a.queue, func(x *waiter) bool { return x == w })
	if w.probe && a.probeID == 0 {
		a.probing = false
	}
	if head {
		a.wakeHead()
	}
}

// report applies one outcome report at time now.
func (a *adaptive) report(p Permit, o outcome, now time.Time, retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o == outcomeForbidden && retryAfter > 0 {
		if t := now.Add(retryAfter); t.After(a.hold) {
			a.hold = t
		}
	}
	if !a.slots.release(p.id) {
		return // reported before, or its lease ran out: the slot is no longer its own
	}
	if p.id == a.probeID {
		a.probing, a.probeID = false, 0
	}
	a.inflight--
	a.expire(now)
	defer a.wakeHead()
	switch o {
	case outcomeSuccess:
		a.accepted.add(now, a.cfg.RateWindow)
		a.reopen()
		a.succeeded()
	case outcomeForbidden:
		a.forbidden(p.start, now)
		a.refusedAt(now)
	}
}

// reopen records an accepted upgrade: the origin is not closed.
func (a *adaptive) reopen() {
	a.refused = 0
	a.closed, a.probing, a.probeID = false, false, 0
}

// refusedAt records a refusal at now and closes the gate when the origin refuses everything.
func (a *adaptive) refusedAt(now time.Time) {
	if a.refused == 0 {
		a.firstRefused = now
	}
	a.refused++
	a.lastRefused = now
	if !a.closed && a.refused >= closedRefusals && now.Sub(a.firstRefused) >= closedSpans*a.cfg.RateWindow {
		a.closed = true
		for _, w := range a.queue { // they are answered at once
			wake(w)
		}
	}
}

// succeeded grows the window and relaxes the spacing, each only while it is what limits.
func (a *adaptive) succeeded() {
	c := &a.cfg
	queued := len(a.queue) > 0
	if queued || a.inflight+1 >= (a.window+1)/2 {
		if a.window < a.ssthresh {
			a.window++
		} else if a.grow++; a.grow >= a.window {
			a.grow = 0
			a.window++
		}
		a.window = min(a.window, c.MaxWindow)
	}
	if !queued || a.spacing <= c.Floor {
		return
	}
	if a.streak++; a.streak < c.RelaxRun {
		return
	}
	a.streak = 0
	a.steps++
	cut := (1 - c.Relax) * float64(a.steps)
	s := time.Duration(float64(a.spacing) * max(1-cut, 0.5))
	if s < minSpacing {
		s = 0
	}
	a.spacing = max(s, c.Floor)
}

// forbidden reacts to a rejection of an attempt that started at start.
func (a *adaptive) forbidden(start, now time.Time) {
	c := &a.cfg
	a.streak = 0
	a.steps = 0
	if start.After(a.widenedAt) {
		a.widenedAt = now
		a.window = max(a.window/2, 1)
		a.ssthresh = a.window
		a.grow = 0
		measured := c.RateWindow / time.Duration(max(a.accepted.sum(now, c.RateWindow), 1))
		s := max(time.Duration(float64(a.spacing)*c.Backoff), measured)
		a.spacing = max(min(s, c.Max), c.Floor)
	}
	if t := now.Add(a.spacing); t.After(a.hold) {
		a.hold = t
	}
}

func (a *adaptive) snapshot(s *Snapshot) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s.Spacing, s.Streak = a.spacing, a.streak
	s.Window, s.InFlight, s.Queued = a.window, a.inflight, len(a.queue)
	s.Closed = a.closed
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
