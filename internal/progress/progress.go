// Package progress shows how far a run of a known number of items has come: a bar on a
// terminal, a line every few seconds on anything else (CI logs), nothing when quiet.
//
// Call [New] with the writer (usually standard error) and a [Config], [Meter.Add] once per
// finished item, and [Meter.Finish] when the run ends. A Meter is safe for concurrent use.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Config says what a Meter counts and how it looks. Zero values are the defaults given per field.
type Config struct {
	Total   int // items in all; required
	Initial int // items done before this run: shown as done, left out of the rate
	// Unit names the items in the bar's rate ("req", "jobs"); default "it".
	Unit string
	// Label is the bar's description, asked again after every item (so it may count the
	// failures); nil = none.
	Label func(Status) string
	// Line is the line written to a non-terminal writer at most every Interval; nil = none.
	Line     func(Status) string
	Interval time.Duration // default 3s
	// FinalLine also writes Line when the last item finishes.
	FinalLine bool
	// FullWidth makes the bar as wide as the terminal (default: 40 columns).
	FullWidth bool
	// Keep leaves the finished bar on the screen, followed by a newline (default: cleared).
	Keep bool
	// DrawAtStart draws the bar (at Initial) in New, before any item finishes; default: at
	// the first Add.
	DrawAtStart bool
}

// Status is where a run stands, as Label and Line see it.
type Status struct {
	Done    int // items finished, Initial included
	Failed  int // of them, failed in this run
	Total   int
	Initial int
	Elapsed time.Duration // since New
}

// Rate is the items finished per second in this run.
func (s Status) Rate() float64 {
	return float64(s.Done-s.Initial) / s.Elapsed.Seconds()
}

// Left is the time the rest will take at Rate, to the second ("?" before anything finished).
func (s Status) Left() string {
	rate := s.Rate()
	if rate <= 0 {
		return "?"
	}
	return (time.Duration(float64(s.Total-s.Done)/rate) * time.Second).Round(time.Second).String()
}

// Meter is one run's progress display.
type Meter struct {
	cfg   Config
	w     io.Writer // nil when quiet
	bar   *progressbar.ProgressBar
	start time.Time

	mu     sync.Mutex
	done   int
	failed int
	label  string
	last   time.Time // the last line written (non-terminal)
}

// New starts a Meter writing to w: a bar when w is a terminal, lines otherwise, nothing when
// quiet.
func New(w io.Writer, quiet bool, cfg Config) *Meter {
	if quiet {
		w = nil
	}
	f, ok := w.(*os.File)
	return newMeter(w, ok && term.IsTerminal(int(f.Fd())), cfg)
}

func newMeter(w io.Writer, terminal bool, cfg Config) *Meter {
	if cfg.Interval == 0 {
		cfg.Interval = 3 * time.Second
	}
	now := time.Now()
	m := &Meter{cfg: cfg, w: w, start: now, last: now, done: cfg.Initial}
	if w != nil && terminal {
		m.label = m.describe()
		m.bar = newBar(w, cfg, m.label)
	}
	return m
}

func newBar(w io.Writer, cfg Config, label string) *progressbar.ProgressBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
	}
	if cfg.Unit != "" {
		opts = append(opts, progressbar.OptionSetItsString(cfg.Unit))
	}
	if cfg.FullWidth {
		opts = append(opts, progressbar.OptionFullWidth())
	}
	if !cfg.Keep {
		opts = append(opts, progressbar.OptionClearOnFinish())
	}
	bar := progressbar.NewOptions(cfg.Total, opts...)
	if cfg.DrawAtStart || cfg.Initial > 0 {
		_ = bar.Set(cfg.Initial) // draws the bar
	}
	return bar
}

// Add counts one finished item.
func (m *Meter) Add(failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done++
	if failed {
		m.failed++
	}
	switch {
	case m.bar != nil:
		if l := m.describe(); l != m.label {
			m.label = l
			m.bar.Describe(l)
		}
		_ = m.bar.Add(1)
	case m.w != nil && m.cfg.Line != nil:
		now := time.Now()
		if now.Sub(m.last) > m.cfg.Interval || (m.cfg.FinalLine && m.done == m.cfg.Total) {
			m.last = now
			fmt.Fprintln(m.w, m.cfg.Line(m.status(now)))
		}
	}
}

// describe is the bar's label now; the caller holds m.mu or owns m alone.
func (m *Meter) describe() string {
	if m.cfg.Label == nil {
		return ""
	}
	return m.cfg.Label(m.status(time.Now()))
}

func (m *Meter) status(now time.Time) Status {
	return Status{Done: m.done, Failed: m.failed, Total: m.cfg.Total, Initial: m.cfg.Initial, Elapsed: now.Sub(m.start)}
}

// Finish ends the display: a cleared bar is removed, a kept one ends its line.
func (m *Meter) Finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bar == nil {
		return
	}
	_ = m.bar.Finish()
	if m.cfg.Keep {
		fmt.Fprintln(m.w)
	}
}
