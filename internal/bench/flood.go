package bench

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
)

// flood publishes bogus gate-state messages at a rate: garbage bytes, truncated signals and
// valid-looking signals from random gate ids with extreme values, a third each.
type flood struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	sent  atomic.Int64
}

func startFlood(nc *nats.Conn, subject string, perSecond int) *flood {
	f := &flood{stopc: make(chan struct{})}
	f.wg.Go(func() {
		rnd := rand.New(rand.NewPCG(rand.Uint64(), 7))
		const tick = 10 * time.Millisecond
		per := max(perSecond*int(tick)/int(time.Second), 1)
		t := time.NewTicker(tick)
		defer t.Stop()
		for i := 0; ; {
			select {
			case <-f.stopc:
				return
			case <-t.C:
			}
			for range per {
				_ = nc.Publish(subject, bogusSignal(rnd, i))
				i++
			}
			f.sent.Add(int64(per))
		}
	})
	return f
}

func bogusSignal(rnd *rand.Rand, i int) []byte {
	switch i % 3 {
	case 0:
		b := make([]byte, rnd.IntN(100))
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		return b
	default:
		s := gate.Signal{
			Gate: rnd.Uint64() | 1, Seq: rnd.Uint64N(1 << 40), Epoch: rnd.Uint64N(1 << 40),
			Accepted: rnd.Uint64N(1 << 40), Rejected: rnd.Uint64N(1 << 40), Recent: rnd.IntN(1 << 20),
			Demand: rnd.IntN(1 << 20), Spacing: time.Duration(rnd.Int64N(int64(time.Hour))),
			RetryAfter: time.Duration(rnd.Int64N(int64(time.Hour))), Wait: time.Hour, Closed: rnd.IntN(2) == 0,
		}
		b, err := s.MarshalBinary()
		if err != nil {
			return []byte("x")
		}
		if i%3 == 1 {
			return b[:rnd.IntN(len(b))]
		}
		return b
	}
}

func (f *flood) stop() int64 {
	close(f.stopc)
	f.wg.Wait()
	return f.sent.Load()
}
