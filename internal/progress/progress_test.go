package progress

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func benchLine(s Status) string {
	return fmt.Sprintf("bench: %d/%d done (%.0fs)", s.Done, s.Total, s.Elapsed.Seconds())
}

// TestLines: on a non-terminal writer a line comes at most every Interval, plus one for the
// last item with FinalLine, and nothing at all when quiet.
func TestLines(t *testing.T) {
	tests := []struct {
		name  string
		quiet bool
		final bool
		want  []string
	}{
		{name: "every 3s", want: []string{"bench: 2/4 done (4s)"}},
		{name: "final line", final: true, want: []string{"bench: 2/4 done (4s)", "bench: 4/4 done (5s)"}},
		{name: "quiet", quiet: true, final: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var out bytes.Buffer
				m := New(&out, tt.quiet, Config{Total: 4, Line: benchLine, FinalLine: tt.final})
				for _, wait := range []time.Duration{time.Second, 3 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond} {
					time.Sleep(wait)
					m.Add(false)
				}
				m.Finish()
				got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				if out.Len() == 0 {
					got = nil
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("got lines %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// TestStatus: the rate leaves out the items done before the run; the time left is rounded to
// the second and unknown before the first item.
func TestStatus(t *testing.T) {
	tests := []struct {
		name     string
		s        Status
		wantRate float64
		wantLeft string
	}{
		{name: "nothing yet", s: Status{Done: 5, Initial: 5, Total: 10, Elapsed: time.Second}, wantRate: 0, wantLeft: "?"},
		{name: "half", s: Status{Done: 4, Total: 8, Elapsed: 2 * time.Second}, wantRate: 2, wantLeft: "2s"},
		{name: "resumed", s: Status{Done: 7, Initial: 5, Total: 10, Elapsed: 4 * time.Second}, wantRate: 0.5, wantLeft: "6s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Rate(); got != tt.wantRate {
				t.Errorf("Rate() = %v, want %v", got, tt.wantRate)
			}
			if got := tt.s.Left(); got != tt.wantLeft {
				t.Errorf("Left() = %q, want %q", got, tt.wantLeft)
			}
		})
	}
}

// TestBar: on a terminal the bar shows the label (asked again as failures come), the count
// and the unit; a kept bar ends with a newline, a cleared one does not stay.
func TestBar(t *testing.T) {
	var out bytes.Buffer
	label := func(s Status) string { return fmt.Sprintf("batch: %d failed", s.Failed) }
	m := newMeter(&out, true, Config{Total: 3, Initial: 1, Unit: "jobs", Label: label, FullWidth: true, Keep: true})
	m.Add(false)
	m.Add(true)
	m.Finish()
	got := out.String()
	for _, want := range []string{"batch: 0 failed", "batch: 1 failed", "(3/3, ", "jobs/s", "100%"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar output %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, "\n") {
		t.Errorf("kept bar output %q does not end with a newline", got)
	}
}
