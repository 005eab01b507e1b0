package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseCounts parses a comma list of positive whole numbers ("1,10,100"), the form of the
// --workers and --concurrency flags; the error names the bad item.
func ParseCounts(s string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", item)
		}
		out = append(out, n)
	}
	return out, nil
}

// PrintTimeline writes, per scenario, the upgrades accepted/rejected and responses completed in
// each second.
func PrintTimeline(w io.Writer, results []Result) {
	for _, r := range results {
		fmt.Fprintf(w, "timeline %s (second: accepted/rejected upgrades, completed):\n", r.Mode)
		for i, t := range r.Timeline {
			fmt.Fprintf(w, "  %3ds %3d/%-3d %3d", t.T, t.Accepted, t.Rejected, t.Completed)
			if i%5 == 4 {
				fmt.Fprintln(w)
			}
		}
		fmt.Fprintln(w)
	}
}

// Speedup is the req/s of mode Last divided by that of mode First at one concurrency.
type Speedup struct {
	First, Last string
	Concurrency int
	A, B        float64 // req/s of First and of Last
}

// Ratio is B/A (0 when A made nothing).
func (s Speedup) Ratio() float64 {
	if s.A <= 0 {
		return 0
	}
	return s.B / s.A
}

// Speedups compares the last of modes with the first at every concurrency: ratios measured in one
// run, so they hold on a busy machine where absolute times do not.
func Speedups(results []Result, modes []string, concurrency []int) []Speedup {
	if len(modes) < 2 {
		return nil
	}
	var out []Speedup
	for _, c := range concurrency {
		s := Speedup{First: modes[0], Last: modes[len(modes)-1], Concurrency: c}
		for _, r := range results {
			if r.Concurrency == c && r.Mode == s.First {
				s.A = r.ReqPerSec
			}
			if r.Concurrency == c && r.Mode == s.Last {
				s.B = r.ReqPerSec
			}
		}
		out = append(out, s)
	}
	return out
}
