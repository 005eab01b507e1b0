package gate

import (
	"testing"
	"time"
)

func TestEchoSteps(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		op      string // "sent" or "heard"
		seq     uint64
		at      time.Duration
		latency time.Duration // after the step
		low     time.Duration // after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"an echo sets both", []step{{"sent", 1, 0, 0, 0}, {"heard", 1, 50 * ms, 50 * ms, 50 * ms}}},
		// The latency follows a rise at once and a fall by an eighth; low the other way round.
		{"a rise, then a fall", []step{
			{"sent", 1, 0, 0, 0}, {"heard", 1, 10 * ms, 10 * ms, 10 * ms},
			{"sent", 2, 100 * ms, 10 * ms, 10 * ms}, {"heard", 2, 190 * ms, 90 * ms, 20 * ms},
			{"sent", 3, 200 * ms, 90 * ms, 20 * ms}, {"heard", 3, 210 * ms, 80 * ms, 10 * ms}}},
		{"only the first echo counts", []step{{"sent", 1, 0, 0, 0}, {"heard", 1, 5 * ms, 5 * ms, 5 * ms}, {"heard", 1, 90 * ms, 5 * ms, 5 * ms}}},
		{"echoes of signals still in flight count", []step{{"sent", 1, 0, 0, 0}, {"sent", 2, 25 * ms, 0, 0}, {"heard", 1, 50 * ms, 50 * ms, 50 * ms}}},
		{"a forged future seq does not count", []step{{"sent", 1, 0, 0, 0}, {"heard", 2, 50 * ms, 0, 0}}},
		{"never over an interval", []step{{"sent", 1, 0, 0, 0}, {"heard", 1, 5 * time.Second, interval, interval}}},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e echo
			for i, st := range tt.steps {
				if st.op == "sent" {
					e.sent(st.seq, t0.Add(st.at))
				} else {
					e.heard(st.seq, t0.Add(st.at), interval)
				}
				if e.latency != st.latency || e.low != st.low {
					t.Errorf("step %d (%s %d at %v): latency %v and low %v, want %v and %v", i, st.op, st.seq, st.at, e.latency, e.low, st.latency, st.low)
				}
			}
		})
	}
}

func TestLeftOutUntilByRank(t *testing.T) {
	a := newAdaptive(Config{}.withDefaults())
	t0 := time.Unix(1000, 0)
	a.busyAt = t0
	ms := time.Millisecond
	tests := []struct {
		name   string
		window int
		rank   int
		echo   time.Duration // 0: no fleet state yet
		want   time.Duration
	}{
		{"within the first window's worth", 2, 2, 0, peerLive * interval},
		// Spread by rank, not by whole windows' worths: the gates of one window's worth all
		// waited one wait and started together (9 refused at once, 32 gates 25 ms away).
		{"the first window's worth, one later", 2, 3, 0, peerLive * interval * 3 / 2},
		{"a window of 4, the next rank", 4, 5, 0, peerLive * interval * 5 / 4},
		{"the next window's worth", 2, 4, 0, 2 * peerLive * interval},
		{"far down a fleet of 32", 2, 30, 0, 15 * peerLive * interval},
		{"capped at the widest spacing", 1, 200, 0, a.cfg.widest()},
		// Hosts 25 ms from NATS: the news of slow start's second round is heard first.
		{"echo of 50ms", 2, 2, 50 * ms, peerLive*interval + 150*ms},
		{"echo of 50ms, the next window's worth", 2, 4, 50 * ms, 2 * (peerLive*interval + 150*ms)},
		{"a delayed echo holds by at most three intervals more", 2, 2, interval, (peerLive + 3) * interval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.f = nil
			if tt.echo > 0 {
				a.fleet().echo.latency = tt.echo
			}
			a.window.size = tt.window
			if got := a.leftOutUntil(tt.rank).Sub(t0); got != tt.want {
				t.Errorf("rank %d, window %d, echo %v: left out until +%v, want +%v", tt.rank, tt.window, tt.echo, got, tt.want)
			}
		})
	}
}
