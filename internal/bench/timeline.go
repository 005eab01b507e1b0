package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// LimitChange changes the origin's upgrade limit at an offset from the start of the load.
type LimitChange struct {
	At    time.Duration
	Rate  float64
	Burst int
}

// ParseSchedule parses "20s:50/50,40s:5/5" (offset:rate/burst, burst optional).
func ParseSchedule(s string) ([]LimitChange, error) {
	var out []LimitChange
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		at, lim, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("%q: want OFFSET:RATE[/BURST], e.g. 20s:50/50", part)
		}
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q: bad offset %q", part, at)
		}
		rs, bs, _ := strings.Cut(lim, "/")
		r, err := strconv.ParseFloat(rs, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("%q: bad rate %q", part, rs)
		}
		b := 0
		if bs != "" {
			if b, err = strconv.Atoi(bs); err != nil || b < 0 {
				return nil, fmt.Errorf("%q: bad burst %q", part, bs)
			}
		}
		out = append(out, LimitChange{At: d, Rate: r, Burst: b})
	}
	slices.SortFunc(out, func(a, b LimitChange) int { return int(a.At - b.At) })
	return out, nil
}

// Tick is one second of the origin's view: upgrades accepted and rejected, responses completed.
type Tick struct {
	T         int   `json:"t_s"`
	Accepted  int64 `json:"upgrades_accepted"`
	Rejected  int64 `json:"upgrades_rejected"`
	Completed int64 `json:"completed"`
}

// timeline samples the simulator every second and applies the limit schedule.
type timeline struct {
	stopc chan struct{}
	done  chan struct{}
	ticks []Tick
}

func startTimeline(srv *codextest.Server, schedule []LimitChange) *timeline {
	tl := &timeline{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		start := time.Now()
		last := srv.Stats()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		next := 0
		sec := 1
		for {
			select {
			case <-tl.stopc:
				return
			case <-t.C:
			}
			el := time.Since(start)
			for next < len(schedule) && el >= schedule[next].At {
				srv.Limits.SetUpgradeRate("", schedule[next].Rate, schedule[next].Burst)
				next++
			}
			if el >= time.Duration(sec)*time.Second {
				st := srv.Stats()
				tl.ticks = append(tl.ticks, Tick{T: sec, Accepted: st.UpgradesAccepted - last.UpgradesAccepted,
					Rejected: st.UpgradesRejected - last.UpgradesRejected, Completed: st.Completed - last.Completed})
				last = st
				sec++
			}
		}
	}()
	return tl
}

func (tl *timeline) stop() []Tick {
	close(tl.stopc)
	<-tl.done
	return tl.ticks
}
