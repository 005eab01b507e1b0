package gate

import (
	"testing"
	"time"
)

// TestPaceSteps drives the pace through rejections, reactions, refinements and relaxation steps
// at explicit times and checks the proposals it makes.
func TestPaceSteps(t *testing.T) {
	ms := time.Millisecond
	type step struct {
		at   time.Duration // since t0
		op   string        // "reject" (arg: the attempt's start), "backoff" (n: measured), "refine" (n: measured), "relax" (n successes)
		arg  time.Duration
		n    int
		ok   bool          // rejected's news, refined's or relaxStep's ok (backoff: always)
		want time.Duration // the proposal returned (when ok)
	}
	tests := []struct {
		name   string
		cfg    Config
		from   time.Duration // spacing and proposal at first
		shared bool
		steps  []step
		epoch  uint64
	}{
		{"the first reaction measures the rate", Config{}, 0, false, []step{
			{0, "reject", -ms, 0, true, 0}, {0, "backoff", 0, 4, true, 250 * ms},
		}, 1},
		{"nothing accepted means one per RateWindow", Config{}, 0, false, []step{
			{0, "reject", -ms, 0, true, 0}, {0, "backoff", 0, 0, true, time.Second},
		}, 1},
		{"a stale rejection is no news", Config{}, 0, false, []step{
			{0, "reject", -ms, 0, true, 0}, {0, "backoff", 0, 4, true, 250 * ms},
			{10 * ms, "reject", -ms, 0, false, 0}, {10 * ms, "reject", 5 * ms, 0, true, 0},
		}, 2},
		{"backoff never below the measured rate", Config{}, 100 * ms, false, []step{
			{0, "backoff", 0, 2, true, 500 * ms},
		}, 0},
		{"backoff by 1.25 above it", Config{}, 800 * ms, false, []step{
			{0, "backoff", 0, 2, true, time.Second},
		}, 0},
		{"backoff capped at Max", Config{}, 7 * time.Second, false, []step{
			{0, "backoff", 0, 0, true, 8 * time.Second},
		}, 0},
		{"a Floor above Max wins", Config{Floor: 10 * time.Second}, 10 * time.Second, false, []step{
			{0, "backoff", 0, 0, true, 10 * time.Second},
		}, 0},
		{"late news refines down, never up", Config{}, 0, false, []step{
			{0, "backoff", 0, 1, true, time.Second}, {50 * ms, "refine", 0, 4, true, 250 * ms},
			{60 * ms, "refine", 0, 4, false, 0}, {70 * ms, "refine", 0, 2, false, 0},
		}, 0},
		{"relax every RelaxRun successes, growing cuts", Config{}, 1600 * ms, false, []step{
			{0, "relax", 0, 7, false, 0}, {0, "relax", 0, 1, true, 1500 * ms},
		}, 0},
		{"shared: no step sooner than RelaxRun half-spacings", Config{}, 1600 * ms, true, []step{
			{0, "relax", 0, 8, true, 1500 * ms}, {5999 * ms, "relax", 0, 8, false, 0}, {6000 * ms, "relax", 0, 1, true, 1312500 * time.Microsecond},
		}, 0},
		{"below 1ms goes to Floor", Config{}, 1100 * time.Microsecond, false, []step{
			{0, "relax", 0, 8, true, 1031250 * time.Nanosecond}, {0, "relax", 0, 8, true, 0},
		}, 0},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg.withDefaults()
			p := newPace(c.Floor)
			p.spacing, p.proposal = tt.from, tt.from
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				var got time.Duration
				ok := true
				switch s.op {
				case "reject":
					ok = p.rejected(t0.Add(s.arg))
				case "backoff":
					got = p.backoff(now, s.n, &c)
				case "refine":
					got, ok = p.refined(s.n, &c)
				case "relax":
					got, ok = p.relaxStep(now, s.n, tt.shared, &c)
				}
				if ok != s.ok || ok && got != s.want {
					t.Errorf("step %d (%s at %v): got %v %v, want %v %v", i, s.op, s.at, got, ok, s.want, s.ok)
				}
				if ok && s.op != "reject" {
					p.spacing, p.proposal = got, got // what the owner does without peers
				}
			}
			if p.epoch != tt.epoch {
				t.Errorf("epoch %d, want %d", p.epoch, tt.epoch)
			}
		})
	}
}

// TestPaceRefiningWindow checks that late news refines a reaction only within its window and
// before the first relaxation step.
func TestPaceRefiningWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := Config{}.withDefaults()
	p := newPace(0)
	p.backoff(t0, 1, &c)
	const window = 200 * time.Millisecond
	tests := []struct {
		name  string
		at    time.Duration
		steps int
		want  bool
	}{
		{"at once", 0, 0, true},
		{"within the window", window - 1, 0, true},
		{"at its end", window, 0, false},
		{"after a relaxation step", 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.steps = tt.steps
			if got := p.refining(t0.Add(tt.at), window); got != tt.want {
				t.Errorf("refining = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPhaseSlot checks the slots a freshly paced fleet spreads its next starts over: rank+1
// spacings after the reaction, never beyond the gate's own spacing.
func TestPhaseSlot(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	tests := []struct {
		name         string
		rank         int
		spacing, own time.Duration
		want         time.Duration
	}{
		{"the first gate one spacing after", 0, 200 * ms, 800 * ms, 200 * ms},
		{"the third three spacings after", 2, 200 * ms, 800 * ms, 600 * ms},
		{"at most its own spacing", 5, 200 * ms, 800 * ms, 800 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := phaseSlot{on: true, rank: tt.rank, at: t0}
			if got := s.due(tt.spacing, tt.own).Sub(t0); got != tt.want {
				t.Errorf("due %v after the reaction, want %v", got, tt.want)
			}
		})
	}
}
