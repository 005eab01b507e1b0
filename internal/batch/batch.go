package batch

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/progress"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// Config is one batch. Zero values are the defaults given per field.
type Config struct {
	In  string // the requests file (JSONL); required
	Out string // the results file, appended to; default In with .out.jsonl for .jsonl; "-" = Stdout
	// Name is a namespace of the job ids: the same line in batches of another name is another
	// job. Default none: ids derive from the lines alone (see line.jobID).
	Name string
	// KeepFailed keeps the failures OUT has: a rerun does not submit those lines again.
	KeepFailed bool
	// Timeout bounds the whole run; default 24h.
	Timeout time.Duration
	// JobTimeout bounds each generation (Codex-Timeout); 0 = the workers' limit.
	JobTimeout time.Duration
	// Poll is how often the stored results of jobs whose live reply has not come are looked
	// up; default 10s.
	Poll   time.Duration
	Quiet  bool      // no progress display
	Stdout io.Writer // the results when Out is "-"
	Stderr io.Writer // progress; nil = none
}

// Summary is what a finished batch did.
type Summary struct {
	Total   int // distinct jobs in IN
	OK      int // succeeded in this run
	Failed  int // failed in this run
	Already int // had a line in OUT before the run
	// AlreadyFailed is how many of Already are failures kept with Config.KeepFailed.
	AlreadyFailed int
	Elapsed       time.Duration
	Out           string
}

// String is the summary line `codexpool batch` prints.
func (s Summary) String() string {
	earlier := fmt.Sprintf("%d from an earlier run", s.Already)
	if s.AlreadyFailed > 0 {
		earlier += fmt.Sprintf(", %d of them failed", s.AlreadyFailed)
	}
	return fmt.Sprintf("batch: %d jobs: %d ok, %d failed (%s) in %s -> %s",
		s.Total, s.OK, s.Failed, earlier, s.Elapsed.Round(time.Millisecond), s.Out)
}

// AllOK reports whether every job of the batch has a success in OUT: none failed in this run,
// and none kept from an earlier one.
func (s Summary) AllOK() bool { return s.Failed == 0 && s.AlreadyFailed == 0 }

// IncompleteError is a batch that ended (Config.Timeout, or ctx) with jobs still unanswered;
// a rerun resumes it.
type IncompleteError struct {
	Remaining, Total int
	Err              error // ctx.Err()
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("batch: %d of %d jobs have no result yet (%v); rerun to resume", e.Remaining, e.Total, e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

// Batch is a loaded batch, ready to run once.
type Batch struct {
	cfg     Config
	byID    map[string]*line // read-only after Load
	pending []*line          // in IN and not in OUT, in IN's order
	already int
	kept    int // of already, failures kept (KeepFailed)

	mu      sync.Mutex
	w       io.Writer
	prog    *progress.Meter
	written map[string]bool
	ok      int
	failed  int
}

// Load reads IN and the results OUT already has: a line with a success in OUT is done, one whose
// last attempt failed is submitted again with the next attempt's id (unless KeepFailed). A fault
// of IN is an [*InputError].
func Load(cfg Config) (*Batch, error) {
	if cfg.Out == "" {
		cfg.Out = strings.TrimSuffix(cfg.In, ".jsonl") + ".out.jsonl"
	}
	cfg.Timeout = orDefault(cfg.Timeout, 24*time.Hour)
	cfg.Poll = orDefault(cfg.Poll, 10*time.Second)
	lines, err := readLines(cfg.In, cfg.Name)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	out, err := readOut(cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("batch: read %s: %w", cfg.Out, err)
	}
	b := &Batch{cfg: cfg, byID: map[string]*line{}, written: map[string]bool{}}
	for i := range lines {
		l := &lines[i]
		done, failed := b.resume(l, out)
		if _, dup := b.byID[l.id]; dup {
			continue // cannot happen (copies have their own ids) unless sha256 collides
		}
		b.byID[l.id] = l
		switch {
		case failed:
			b.kept++
			b.already++
		case done:
			b.already++
		default:
			b.pending = append(b.pending, l)
		}
	}
	return b, nil
}

// resume sets l's job id for this run: its first attempt OUT has no line for. It reports done
// when an attempt succeeded, or failed when one failed and KeepFailed keeps it (its id is then
// that attempt's).
func (b *Batch) resume(l *line, out map[string]bool) (done, failed bool) {
	for attempt := 0; ; attempt++ {
		l.id = l.jobID(attempt)
		ok, seen := out[l.id]
		switch {
		case !seen:
			return false, false
		case ok:
			return true, false
		case b.cfg.KeepFailed:
			return true, true
		}
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Run submits the jobs OUT has no line for to the pool's jobs subject and results bucket (of
// opts), writes each result to OUT as it comes and returns when every job has one. It ends
// early with an [*IncompleteError] at Config.Timeout.
func (b *Batch) Run(ctx context.Context, nc *nats.Conn, opts client.Options) (Summary, error) {
	cl := client.New(nc, opts)
	w, closeOut, err := b.openOut()
	if err != nil {
		return Summary{}, err
	}
	defer closeOut()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	start := time.Now()
	b.w = w
	b.prog = progress.New(b.cfg.Stderr, b.cfg.Quiet || b.cfg.Stderr == nil, b.progressConfig())
	r := &runner{b: b, cl: cl, got: make(chan struct{}, 1)}
	err = r.run(ctx, nc)
	b.prog.Finish()
	if err != nil {
		return Summary{}, err
	}
	return Summary{Total: len(b.byID), OK: b.ok, Failed: b.failed, Already: b.already, AlreadyFailed: b.kept,
		Elapsed: time.Since(start), Out: b.cfg.Out}, nil
}

// openOut opens OUT for appending (Stdout for "-").
func (b *Batch) openOut() (io.Writer, func(), error) {
	if b.cfg.Out == "-" {
		return b.cfg.Stdout, func() {}, nil
	}
	f, err := os.OpenFile(b.cfg.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("batch: %w", err)
	}
	return f, func() { _ = f.Close() }, nil
}

// progressConfig is the look of a batch's progress: done, failed, rate and time left.
func (b *Batch) progressConfig() progress.Config {
	return progress.Config{
		Total:   len(b.byID),
		Initial: b.already,
		Unit:    "jobs",
		Label:   func(s progress.Status) string { return fmt.Sprintf("batch: %d failed", s.Failed) },
		Line: func(s progress.Status) string {
			return fmt.Sprintf("batch: %d/%d done, %d failed, %.1f jobs/s, %s left", s.Done, s.Total, s.Failed, s.Rate(), s.Left())
		},
		FinalLine:   true,
		FullWidth:   true,
		Keep:        true,
		DrawAtStart: true,
	}
}

func (b *Batch) isWritten(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written[id]
}

func (b *Batch) remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byID) - b.already - len(b.written)
}

// record writes one result line (once per job).
func (b *Batch) record(l *line, r *client.Reply, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written[l.id] {
		return
	}
	b.written[l.id] = true
	out := outputLine(l, r, err)
	if err != nil {
		b.failed++
	} else {
		b.ok++
	}
	_, _ = b.w.Write(append(out, '\n'))
	b.prog.Add(err != nil)
}

func isJobError(err error) bool {
	_, ok := schemas.AsError(err)
	return ok
}
