package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// limitChange changes the origin's upgrade limit at an offset from the start of the load.
type limitChange struct {
	at    time.Duration
	rate  float64
	burst int
}

// parseSchedule parses "20s:50/50,40s:5/5" (offset:rate/burst, burst optional).
func parseSchedule(s string) ([]limitChange, error) {
	var out []limitChange
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
		out = append(out, limitChange{at: d, rate: r, burst: b})
	}
	slices.SortFunc(out, func(a, b limitChange) int { return int(a.at - b.at) })
	return out, nil
}

// tick is one second of the origin's view: upgrades accepted and rejected, responses completed.
type tick struct {
	T         int   `json:"t_s"`
	Accepted  int64 `json:"upgrades_accepted"`
	Rejected  int64 `json:"upgrades_rejected"`
	Completed int64 `json:"completed"`
}

// timeline samples the simulator every second and applies the limit schedule.
type timeline struct {
	stopc chan struct{}
	done  chan struct{}
	ticks []tick
}

func startTimeline(srv *codextest.Server, schedule []limitChange) *timeline {
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
			for next < len(schedule) && el >= schedule[next].at {
				srv.SetUpgradeLimit(schedule[next].rate, schedule[next].burst)
				next++
			}
			if el >= time.Duration(sec)*time.Second {
				st := srv.Stats()
				tl.ticks = append(tl.ticks, tick{T: sec, Accepted: st.UpgradesAccepted - last.UpgradesAccepted,
					Rejected: st.UpgradesRejected - last.UpgradesRejected, Completed: st.Completed - last.Completed})
				last = st
				sec++
			}
		}
	}()
	return tl
}

func (tl *timeline) stop() []tick {
	close(tl.stopc)
	<-tl.done
	return tl.ticks
}
