package worker

import (
	"math"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codex"
)

var t0 = time.Date(2026, 8, 14, 10, 0, 0, 0, time.UTC)

// report is a codex.Limits with one 5-hour window.
func report(used float64, resetAt time.Time) codex.Limits {
	return codex.Limits{Windows: []codex.LimitWindow{{Limit: "codex", Minutes: 300, UsedPercent: used, ResetAt: resetAt}}}
}

// TestCooldownNotShortened is target 4: a cooldown learned from a refusal is not shortened by a
// later report of low usage, nor by a later refusal with a shorter retry time; only its end
// passing ends it.
func TestCooldownNotShortened(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(3 * time.Hour)
	s.refuse("usage_limit_reached", "limit", time.Hour, t0, time.Minute)
	until := t0.Add(time.Hour)

	s.observe(report(2, reset), t0.Add(time.Second), time.Minute)
	s.refuse("rate_limit_exceeded", "slow down", 2*time.Second, t0.Add(2*time.Second), time.Minute)
	s.observe(codex.Limits{Windows: []codex.LimitWindow{{Limit: "codex", Minutes: 10080, UsedPercent: 0}}}, t0.Add(3*time.Second), time.Minute)

	for _, at := range []time.Time{t0.Add(4 * time.Second), until.Add(-time.Nanosecond)} {
		if av := s.available(at); !av.cooling || !av.until.Equal(until) {
			t.Fatalf("at %s: got %+v, want cooling until %s", at.Sub(t0), av, until.Sub(t0))
		}
	}
	if av := s.available(until); av.cooling {
		t.Fatalf("at the cooldown's end: got %+v, want usable", av)
	}
	if s.coolCode != "usage_limit_reached" {
		t.Errorf("cooldown code %q, want the refusal that set it (usage_limit_reached)", s.coolCode)
	}
}

func TestCooldownFromReports(t *testing.T) {
	tests := []struct {
		name    string
		ceiling float64
		used    float64
		reset   time.Duration // 0 = the report gives no reset
		cooling bool
		until   time.Duration
	}{
		{"below the ceiling", 100, 99, time.Hour, false, 0},
		{"exhausted", 100, 100, time.Hour, true, time.Hour},
		{"over", 100, 120, 2 * time.Hour, true, 2 * time.Hour},
		{"at max_used_percent", 80, 80, time.Hour, true, time.Hour},
		{"under max_used_percent", 80, 79.5, time.Hour, false, 0},
		{"no reset time: the fallback", 100, 100, 0, true, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLimitState(tt.ceiling)
			var reset time.Time
			if tt.reset > 0 {
				reset = t0.Add(tt.reset)
			}
			s.observe(report(tt.used, reset), t0, time.Minute)
			av := s.available(t0.Add(time.Second))
			if av.cooling != tt.cooling || (tt.cooling && !av.until.Equal(t0.Add(tt.until))) {
				t.Errorf("got %+v, want cooling %v until +%s", av, tt.cooling, tt.until)
			}
		})
	}
}

func TestReportOfAnEndedPeriodIgnored(t *testing.T) {
	s := newLimitState(100)
	s.observe(report(100, t0.Add(-time.Second)), t0, time.Minute)
	if av := s.available(t0); av.cooling || av.headroom != 1 {
		t.Errorf("got %+v, want usable with full headroom: the report's period had ended", av)
	}
}

func TestWindowForgottenAtReset(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Minute)
	s.observe(report(60, reset), t0, time.Minute)
	if av := s.available(t0); math.Abs(av.headroom-0.4) > 1e-9 {
		t.Fatalf("headroom %v, want 0.4", av.headroom)
	}
	if av := s.available(reset); av.headroom != 1 || len(s.usage(reset)) != 0 {
		t.Errorf("after the reset: headroom %v, windows %v; want 1 and none", av.headroom, s.usage(reset))
	}
}

// TestLastCall follows an account with a budget of 3 generations per window: the reports say 0,
// 33.3 and 66.7%; after the third completion the projection reaches 100% and the account takes
// one generation at a time (the one that finds it exhausted).
func TestLastCall(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Hour)
	run := func(reported float64) {
		t.Helper()
		if av := s.available(t0); av.cooling {
			t.Fatalf("cooling before a generation at %v%%", reported)
		}
		s.started()
		s.observe(report(reported, reset), t0, time.Minute)
		s.finished(true)
	}
	run(0)
	run(100.0 / 3)
	if av := s.available(t0); av.lastCall {
		t.Fatalf("last call after 2 of 3: %+v", av)
	}
	run(200.0 / 3)
	av := s.available(t0)
	if !av.lastCall || av.headroom > 1e-6 {
		t.Fatalf("after 3 of 3: got %+v, want the last call with no headroom", av)
	}
	if got := s.usage(t0)[0].Projected; math.Abs(got-100) > 1e-6 {
		t.Errorf("projected %v%%, want 100%%", got)
	}
}

// TestLastCallCountsInflight: generations running now count towards the projection, so a burst
// on an account near its ceiling is cut to one at a time before it crosses it.
func TestLastCallCountsInflight(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Hour)
	s.observe(report(80, reset), t0, time.Minute)
	s.started()
	s.finished(true)
	s.observe(report(90, reset), t0, time.Minute) // one completion added 10%
	if av := s.available(t0); av.lastCall {
		t.Fatalf("90%% with 10%% a generation and none running: got %+v, want not yet the last call", av)
	}
	s.started()
	if av := s.available(t0); !av.lastCall {
		t.Fatalf("90%% with one running: got %+v, want the last call", av)
	}
}

// TestFinalStretch: an account whose projection leaves two generations (25% each, 50% used)
// takes them one starting at a time, so that two starts never go out together on one report
// that another worker's completions have made old; with room for three it takes two at once.
func TestFinalStretch(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Hour)
	s.observe(report(0, reset), t0, time.Minute)
	s.started()
	s.finished(true)
	s.observe(report(25, reset), t0, time.Minute) // one completion added 25%: three left
	if s.oneStarting(t0) {
		t.Fatalf("25%% used, 25%% a generation, none running: one starting at a time, want more")
	}
	s.started()
	if av := s.available(t0); av.final || av.lastCall {
		t.Fatalf("25%% used, one running: got %+v, want neither the final stretch nor the last call", av)
	}
	s.started()
	if av := s.available(t0); !av.final || av.lastCall {
		t.Fatalf("25%% used, two running: got %+v, want the final stretch, not yet the last call", av)
	}
	if !s.oneStarting(t0) {
		t.Fatalf("on the final stretch: want one starting at a time")
	}
	s.finished(true)
	s.finished(true)
	s.observe(report(75, reset), t0, time.Minute)
	if av := s.available(t0); !av.final {
		t.Fatalf("75%% used, none running: got %+v, want the final stretch", av)
	}
	s.started()
	if av := s.available(t0); !av.final || !av.lastCall {
		t.Fatalf("75%% used, one running: got %+v, want the last call and the final stretch", av)
	}
}

func TestHeadroomIsTheTightestWindow(t *testing.T) {
	s := newLimitState(50)
	s.observe(codex.Limits{Windows: []codex.LimitWindow{
		{Limit: "codex", Minutes: 300, UsedPercent: 10, ResetAt: t0.Add(time.Hour)},
		{Limit: "codex", Minutes: 10080, UsedPercent: 40, ResetAt: t0.Add(48 * time.Hour)},
	}}, t0, time.Minute)
	if av := s.available(t0); math.Abs(av.headroom-0.2) > 1e-9 {
		t.Errorf("headroom %v, want 0.2 ((50-40)/50, the weekly window)", av.headroom)
	}
	// The same length under another slot is the same window.
	s.observe(codex.Limits{Windows: []codex.LimitWindow{{Limit: "codex", Minutes: 10080, UsedPercent: 45, ResetAt: t0.Add(48 * time.Hour)}}}, t0, time.Minute)
	if got := len(s.usage(t0)); got != 2 {
		t.Errorf("%d windows, want 2", got)
	}
}

// TestLastCallWhileTheStepIsUnknown: generations running or completed that no report covers
// yet, with no step to project them by, put the account on its last call until the next report
// (other workers may have spent a small budget already); a report that shows the step ends it.
func TestLastCallWhileTheStepIsUnknown(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Hour)
	s.observe(report(0, reset), t0, time.Minute)
	if av := s.available(t0); av.lastCall {
		t.Fatalf("nothing running: got %+v, want not the last call", av)
	}
	for range 4 { // a burst met the account before any report said what a generation uses
		s.started()
	}
	if av := s.available(t0); !av.lastCall {
		t.Fatalf("generations running and no step known: got %+v, want the last call", av)
	}
	s.finished(true)
	if av := s.available(t0); !av.lastCall {
		t.Fatalf("a completion and no step known: got %+v, want the last call", av)
	}
	s.observe(report(10, reset), t0, time.Minute) // one completion added 10%
	if av := s.available(t0); av.lastCall {
		t.Fatalf("10%% used, 10%% a generation, 3 running: got %+v, want not the last call", av)
	}
}

// TestRecordOnly: the one-account shortcut's limit state (record-only) keeps the reports and
// their projection, but neither a report at the ceiling, nor a refusal, nor a projection at the
// ceiling keeps a generation away; the same steps on an enforcing state do.
func TestRecordOnly(t *testing.T) {
	tests := []struct {
		name     string
		steps    func(s *limitState)
		used     float64 // the window's used percent the state keeps
		headroom float64 // what routing sees of it
	}{
		{"exhausted report", func(s *limitState) { s.observe(report(100, t0.Add(time.Hour)), t0, time.Minute) }, 100, 0},
		{"refusal", func(s *limitState) {
			s.observe(report(10, t0.Add(time.Hour)), t0, time.Minute)
			s.refuse("usage_limit_reached", "limit", time.Hour, t0, time.Minute)
		}, 10, 0.9},
		{"last call", func(s *limitState) {
			s.observe(report(40, t0.Add(time.Hour)), t0, time.Minute)
			s.started()
			s.finished(true)
			s.observe(report(90, t0.Add(time.Hour)), t0, time.Minute) // a step of 50: the next reaches 100
		}, 90, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, enf := newLimitState(100), newLimitState(100)
			rec.recordOnly = true
			tt.steps(rec)
			tt.steps(enf)
			if av := rec.available(t0.Add(time.Second)); av.cooling || av.lastCall || math.Abs(av.headroom-tt.headroom) > epsilon {
				t.Errorf("record-only: got %+v, want usable, not on its last call, headroom %v", av, tt.headroom)
			}
			if u := rec.usage(t0.Add(time.Second)); len(u) != 1 || u[0].UsedPercent != tt.used {
				t.Errorf("record-only usage: got %+v, want one window at %v%%", u, tt.used)
			}
			if av := enf.available(t0.Add(time.Second)); !av.cooling && !av.lastCall {
				t.Errorf("enforcing: got %+v, want cooling or on its last call", av)
			}
		})
	}
}

// TestStepBoundedByResolution: a report that did not move over two completions bounds the step
// by the report's resolution (1 percent) over them: the account is no longer on its last call
// for want of a step, and nears it only within that bound of the ceiling.
func TestStepBoundedByResolution(t *testing.T) {
	s := newLimitState(100)
	reset := t0.Add(time.Hour)
	s.observe(report(40, reset), t0, time.Minute)
	s.started()
	s.finished(true)
	s.started()
	s.finished(true)
	s.observe(report(40, reset), t0, time.Minute)
	if got := s.steps[windowKey{"codex", 300}]; math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("step %v, want 0.5 (1 percent over 2 completions)", got)
	}
	for range 8 {
		s.started()
	}
	if av := s.available(t0); av.lastCall {
		t.Errorf("40%% used, 8 running at 0.5%% each: got %+v, want not the last call", av)
	}
}
