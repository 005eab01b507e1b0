package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// An in-memory bus between gates, in virtual time: what a NATS transport does, without NATS.
// Each gate has a transport goroutine that publishes NextSignal at once, then after every
// NextSignalDelay and when Pending fires, as queue.GateLink does; the bus delivers every signal to
// every other gate after latency/2 to 3·latency/2 (one in ten up to 10·latency later: a busy
// receiver, as measured over NATS on a loaded 2-core machine), losing a share of them, and not
// to or from a gate cut off from it.

type bus struct {
	latency time.Duration
	loss    float64
	tail    bool // one in ten signals up to 10·latency late

	mu      sync.Mutex
	rnd     *rand.Rand
	members []*member
	wg      sync.WaitGroup
	stop    chan struct{}
	sent    atomic.Int64
}

type member struct {
	g   *Gate
	cut atomic.Bool
}

func newBus(latency time.Duration, loss float64, seed uint64) *bus {
	return &bus{latency: latency, loss: loss, rnd: rand.New(rand.NewPCG(seed, 11)), stop: make(chan struct{})}
}

// join starts g's transport on the bus.
func (b *bus) join(g *Gate) *member {
	m := &member{g: g}
	b.mu.Lock()
	b.members = append(b.members, m)
	b.mu.Unlock()
	b.wg.Go(func() {
		tick := time.NewTimer(0)
		defer tick.Stop()
		pending := g.Pending()
		buf := make([]byte, 0, signalSize)
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
				tick.Reset(g.NextSignalDelay())
			case <-pending:
			}
			s, ok := g.NextSignal()
			if !ok || m.cut.Load() {
				continue
			}
			var err error
			if buf, err = s.AppendBinary(buf[:0]); err != nil {
				panic(err)
			}
			b.publish(m, slices.Clone(buf))
		}
	})
	return m
}

func (b *bus) publish(from *member, msg []byte) {
	b.sent.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, to := range b.members {
		if b.rnd.Float64() < b.loss { // the sender hears its own, as over NATS
			continue
		}
		d := b.latency/2 + time.Duration(b.rnd.Int64N(int64(b.latency))) // jitter around latency
		if b.tail && b.rnd.IntN(10) == 0 {
			d += time.Duration(b.rnd.Int64N(int64(10 * b.latency)))
		}
		b.wg.Go(func() {
			select {
			case <-time.After(d):
			case <-b.stop:
				return
			}
			if !to.cut.Load() {
				if err := to.g.ObserveBinary(msg); err != nil {
					panic(err)
				}
			}
		})
	}
}

// flood sends perSecond bogus messages to every gate until the bus stops: garbage bytes, and
// valid signals from random ids with extreme values.
func (b *bus) flood(perSecond int, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 13))
	const tick = time.Millisecond
	per := perSecond / int(time.Second/tick)
	b.wg.Go(func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
			}
			b.mu.Lock()
			members := slices.Clone(b.members)
			b.mu.Unlock()
			for i := range per {
				msg := bogus(rnd, i%2 == 0)
				for _, m := range members {
					m.g.ObserveBinary(msg)
				}
			}
		}
	})
}

// bogus returns garbage (random bytes, often with the right version and length) or a valid
// signal from a random id whose every field is extreme.
func bogus(rnd *rand.Rand, garbage bool) []byte {
	if garbage {
		b := make([]byte, rnd.IntN(2*signalSize))
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		if len(b) > 0 && rnd.IntN(2) == 0 {
			b[0] = signalVersion
		}
		return b
	}
	s := Signal{Gate: rnd.Uint64() | 1, Seq: rnd.Uint64N(maxSignalCount-1) + 1, Epoch: maxSignalEpoch - 1 - rnd.Uint64N(10),
		Accepted: rnd.Uint64N(maxSignalCount), Rejected: rnd.Uint64N(maxSignalCount), Recent: maxSignalRecent,
		Demand: maxSignalDemand, Spacing: maxSignalDuration, RetryAfter: maxSignalDuration, Wait: 0, Closed: rnd.IntN(2) == 0}
	b, err := s.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return b
}

func (b *bus) close() {
	close(b.stop)
	b.wg.Wait()
}

// fleetOpts says how the gates of a fleet run are connected.
//
// By default a run is as close to `codexpool bench` with worker processes as virtual time gets
// (measured with per-process traces of a bench with 8 workers on a 2-core machine): the gates
// link to the bus within 40ms of each other, and the load begins 250ms after the first (the
// bench starts it once every worker serves); a request reaches its gate up to 10ms after it is
// sent (NATS, and 8 processes waking on 2 cores); one signal in ten is up to 10ms late; and one
// handshake in five takes up to 10ms longer. ideal is the world of the first simulations: links
// a second before the load, and none of that.
type fleetOpts struct {
	ideal     bool          // links a second before the load, requests on time, no tails
	shared    bool          // a bus between the gates (else process scope)
	loss      float64       // share of signals lost
	cutOne    bool          // gate 0 is cut off from the bus...
	cutAfter  time.Duration // ...this long after the first arrival (0: from the start)
	flood     int           // bogus signals per second
	handBack  time.Duration // hand a request back when here > fleetBest + this (0: never)
	seed      uint64
	latency   time.Duration // default 1ms
	deadline  time.Duration // per request; default 2m
	closed    bool          // the origin refuses every upgrade
	away      time.Duration // one-way delay of every gate from NATS and the origin (other hosts): the bus takes 2·away, requests and handshakes away more each way
	tcp       bool          // a handshake takes a round trip of away more before the upgrade request (TCP's, as in the bench)
	cfg       Config
	observeOf func(gates []*Gate)                                           // called at the end, before the bus stops
	trace     func(gate int, start time.Duration, before Snapshot, ok bool) // every attempt, when set
}

// fleetResult is one run of N gates sharing the simulated origin.
type fleetResult struct {
	simResult
	goodput  float64         // accepted upgrades per second over the arrivals' span
	share    float64         // rejected share of attempts over the arrivals' span
	handed   int             // requests handed back
	perGate  []int           // requests served per gate
	signals  int64           // signals published
	cutOK    int             // requests served by the cut-off gate
	cutTotal int             // requests that the cut-off gate got
	latency  []time.Duration // of the requests served, arrival to upgrade, sorted
	answered time.Duration   // the longest any request took to be answered, served or not
}

// pct returns the p-th percentile of the served requests' latency, in seconds.
func (r fleetResult) pct(p float64) float64 {
	if len(r.latency) == 0 {
		return 0
	}
	return r.latency[min(int(p*float64(len(r.latency))), len(r.latency)-1)].Seconds()
}

// runFleet runs Connect for every arrival (offsets from the start, each on a gate chosen at
// random) against a 5/s burst-5 origin, on n gates, after a warm-up in which the transports (if
// any) get to know each other (see fleetOpts).
func runFleet(n int, arrivals []time.Duration, o fleetOpts) fleetResult {
	if o.latency == 0 {
		o.latency = time.Millisecond
	}
	if o.deadline == 0 {
		o.deadline = 2 * time.Minute
	}
	if o.away > 0 {
		o.latency = max(o.latency, 2*o.away) // gate to NATS to gate
	}
	gates := make([]*Gate, n)
	var b *bus
	if o.shared {
		b = newBus(o.latency, o.loss, o.seed)
		b.tail = !o.ideal
	}
	rnd := rand.New(rand.NewPCG(o.seed, 7))
	warmup, joined := time.Second, time.Duration(0)
	if !o.ideal {
		warmup = 250 * time.Millisecond
	}
	var cut *member
	for i := range gates {
		gates[i] = New(o.cfg)
		if !o.ideal {
			d := time.Duration(rnd.Int64N(int64(40 * time.Millisecond / time.Duration(n))))
			time.Sleep(d)
			joined += d
		}
		if b != nil {
			m := b.join(gates[i])
			if o.cutOne && i == 0 {
				cut = m
				m.cut.Store(o.cutAfter == 0)
			}
		}
	}
	if b != nil && o.flood > 0 {
		b.flood(o.flood, o.seed)
	}
	time.Sleep(warmup - joined)
	origin := newBucketOrigin(5, 5)
	if o.closed {
		origin = newBucketOrigin(0, 0)
	}
	origin.slow, origin.away, origin.tcp = !o.ideal, o.away, o.tcp
	var rmu sync.Mutex
	pick := func() int { rmu.Lock(); defer rmu.Unlock(); return rnd.IntN(n) }
	t0 := time.Now()
	var (
		mu  sync.Mutex
		res fleetResult
		wg  sync.WaitGroup
	)
	res.perGate = make([]int, n)
	if cut != nil && o.cutAfter > 0 {
		wg.Go(func() {
			time.Sleep(o.cutAfter)
			cut.cut.Store(true)
		})
	}
	span := time.Duration(0)
	for _, at := range arrivals {
		span = max(span, at)
		var late time.Duration // on its way to the gate
		if !o.ideal {
			rmu.Lock()
			late = time.Duration(rnd.Int64N(int64(10 * time.Millisecond)))
			rmu.Unlock()
		}
		wg.Go(func() {
			time.Sleep(at + late + o.away)
			ctx, cancel := context.WithTimeout(context.Background(), o.deadline)
			defer cancel()
			i := pick()
			for hops := 0; o.handBack > 0 && hops < 3; hops++ {
				here, best := gates[i].Estimate()
				if here <= best+o.handBack {
					break
				}
				time.Sleep(2 * time.Millisecond) // back to the queue group, to another worker
				i = pick()
				mu.Lock()
				res.handed++
				mu.Unlock()
			}
			dial := origin.dial
			if o.trace != nil {
				dial = func(ctx context.Context) (struct{}, error) {
					at, before := time.Since(t0), gates[i].Snapshot()
					v, err := origin.dial(ctx)
					o.trace(i, at, before, err == nil)
					return v, err
				}
			}
			_, _, err := Connect(ctx, gates[i], Policy{}, dial)
			mu.Lock()
			defer mu.Unlock()
			res.answered = max(res.answered, time.Since(t0)-at)
			if o.cutOne && i == 0 {
				res.cutTotal++
			}
			if err != nil {
				res.failed++
				return
			}
			res.ok++
			res.latency = append(res.latency, time.Since(t0)-at)
			res.perGate[i]++
			if o.cutOne && i == 0 {
				res.cutOK++
			}
			res.wall = max(res.wall, time.Since(t0))
		})
	}
	wg.Wait()
	if o.observeOf != nil {
		o.observeOf(gates)
	}
	if b != nil {
		b.close()
		res.signals = b.sent.Load()
	}
	slices.Sort(res.latency)
	res.accepted, res.rejected = origin.totals()
	res.perSecond, res.rejPerSec = origin.accepted, origin.rejected
	res.rejAt, res.accAt = origin.rejAt, origin.accAt
	secs := max(int((span+time.Second-1)/time.Second), 1)
	acc, rej := 0, 0
	for s := range min(secs, len(origin.accepted)) {
		acc += origin.accepted[s]
		rej += origin.rejected[s]
	}
	res.goodput = float64(acc) / float64(secs)
	res.share = float64(rej) / float64(max(acc+rej, 1))
	return res
}

// stats summarises runs over seeds.
type stats struct{ runs []fleetResult }

func (s stats) col(f func(fleetResult) float64) (mean, lo, hi float64) {
	lo, hi = 1e18, -1e18
	for _, r := range s.runs {
		v := f(r)
		mean += v
		lo, hi = min(lo, v), max(hi, v)
	}
	return mean / float64(len(s.runs)), lo, hi
}

func (s stats) fmt(f func(fleetResult) float64, format string) string {
	m, lo, hi := s.col(f)
	return fmt.Sprintf(format+" ("+format+"-"+format+")", m, lo, hi)
}

func okOf(r fleetResult) float64        { return float64(r.ok) }
func p50Of(r fleetResult) float64       { return r.pct(0.50) }
func p95Of(r fleetResult) float64       { return r.pct(0.95) }
func wallOf(r fleetResult) float64      { return r.wall.Seconds() }
func rejOf(r fleetResult) float64       { return 100 * r.rejectedShare() }
func goodputOf(r fleetResult) float64   { return r.goodput }
func windowRejOf(r fleetResult) float64 { return 100 * r.share }

// seeds runs f for each seed, each in its own bubble.
func seeds(t *testing.T, n int, f func(seed uint64) fleetResult) stats {
	t.Helper()
	var s stats
	for seed := range uint64(n) {
		synctest.Test(t, func(t *testing.T) { s.runs = append(s.runs, f(seed+1)) })
	}
	return s
}

// table collects rows of figures and logs them aligned.
type table struct {
	head []string
	rows [][]string
}

func (tb *table) add(cells ...string) { tb.rows = append(tb.rows, cells) }

func (tb *table) log(t *testing.T) {
	t.Helper()
	w := make([]int, len(tb.head))
	for _, r := range append([][]string{tb.head}, tb.rows...) {
		for i, c := range r {
			w[i] = max(w[i], len(c))
		}
	}
	var sb strings.Builder
	line := func(r []string) {
		sb.WriteString("\n| ")
		for i, c := range r {
			fmt.Fprintf(&sb, "%-*s | ", w[i], c)
		}
	}
	line(tb.head)
	sep := make([]string, len(w))
	for i := range sep {
		sep[i] = strings.Repeat("-", w[i])
	}
	line(sep)
	for _, r := range tb.rows {
		line(r)
	}
	t.Log(sb.String())
}
