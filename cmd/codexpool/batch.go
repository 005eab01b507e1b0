package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

const batchTrailer = `Submits every line of IN.jsonl as a durable job (JetStream) and writes each result to
OUT.jsonl as it finishes, with a progress bar (done, failed, rate, time left). A line is a request
body ({"input": ...}) or an OpenAI Batch API line ({"custom_id": ..., "body": {...}}), answered
in the matching output format. Jobs run one-shot ("stream" is ignored).

Resumable: a rerun of the same IN.jsonl skips the lines OUT.jsonl already has, takes results
the pool already stored (kept for CODEXPOOL_RESULTS_TTL), and submits only the rest. Job ids are
derived from --name (default: IN's absolute path), the line's custom_id (or its position) and its
body, so the same file resubmitted within the duplicate window never runs a job twice.

Reads the CODEXPOOL_NATS_* and CODEXPOOL_JOBS_SUBJECT / CODEXPOOL_RESULTS_BUCKET settings.

Examples:
  codexpool batch prompts.jsonl -o answers.jsonl
  codexpool batch --nats nats://nats-1:4222 requests.jsonl   # writes requests.out.jsonl
`

// batchLine is one input line.
type batchLine struct {
	n        int    // 1-based line number in IN
	customID string // Batch API format; "" for a plain request line
	batchAPI bool
	body     []byte // the request body sent as the job
	id       string // job id
}

func runBatch(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "batch", "batch [flags] IN.jsonl [-o OUT.jsonl]", batchTrailer)
	out := fs.String("o", "", "output file (default IN with .out.jsonl; - for standard output)")
	natsURL := fs.String("nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	name := fs.String("name", "", "the batch's name, part of every job id (default: IN's absolute path)")
	timeout := fs.Duration("timeout", 24*time.Hour, "give up waiting for results after this long")
	jobTimeout := fs.Duration("job-timeout", 0, "bound each generation (Codex-Timeout); 0 = the workers' limit")
	poll := fs.Duration("poll", 10*time.Second, "how often to look up stored results of jobs whose live reply has not come")
	quiet := fs.Bool("quiet", false, "no progress bar")
	in, rest := "", args
	// Flags may come after IN (codexpool batch IN -o OUT): parse in two rounds.
	if err := fs.parse(e, rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		in = fs.Arg(0)
		if err := fs.parse(e, fs.Args()[1:]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			fs.printUsage(e.stderr)
			return exitError{code: 2, msg: fmt.Sprintf("batch: one input file, got extra %q", fs.Args())}
		}
	}
	if in == "" {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: "batch: IN.jsonl is required"}
	}
	if *timeout <= 0 || *poll <= 0 || *jobTimeout < 0 {
		return exitError{code: 2, msg: "batch: --timeout and --poll must be positive, --job-timeout >= 0"}
	}
	if *out == "" {
		*out = strings.TrimSuffix(in, ".jsonl") + ".out.jsonl"
	}
	if *name == "" {
		abs, err := filepath.Abs(in)
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		*name = abs
	}
	lines, err := readBatch(in, *name)
	if err != nil {
		return exitError{code: 2, msg: "batch: " + err.Error()}
	}
	done, err := doneIDs(*out)
	if err != nil {
		return fmt.Errorf("batch: read %s: %w", *out, err)
	}

	pool, err := loadPoolConfig(e, fs)
	if err != nil {
		return err
	}
	nc, err := pool.dial("codexpool batch", *natsURL)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	defer nc.Close()
	cl := client.New(nc, client.Options{JobsSubject: pool.JobsSubject, ResultsBucket: pool.ResultsBucket})

	var w io.Writer = e.stdout
	if *out != "-" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		defer f.Close()
		w = f
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	b := &batchRun{cl: cl, w: w, byID: map[string]*batchLine{}, start: time.Now()}
	for i := range lines {
		l := &lines[i]
		if _, dup := b.byID[l.id]; dup {
			continue // the same line twice: one job, one result line
		}
		b.byID[l.id] = l
		if done[l.id] {
			b.already++
		} else {
			b.pending = append(b.pending, l)
		}
	}
	b.total = len(b.byID)
	b.prog = newBatchProgress(e.stderr, *quiet, b.total, b.already)
	return b.run(ctx, nc, *jobTimeout, *poll, e, *out)
}

// batchRun is one batch in progress.
type batchRun struct {
	cl      *client.Client
	w       io.Writer
	byID    map[string]*batchLine
	pending []*batchLine
	total   int
	already int // results already in OUT
	start   time.Time
	prog    *batchProgress

	mu      sync.Mutex
	written map[string]bool
	ok      int
	failed  int
}

func (b *batchRun) run(ctx context.Context, nc *nats.Conn, jobTimeout, poll time.Duration, e env, out string) error {
	b.written = map[string]bool{}
	inbox := nc.NewRespInbox()
	got := make(chan struct{}, 1)
	sub, err := nc.Subscribe(inbox, func(m *nats.Msg) {
		l := b.byID[m.Header.Get(schemas.HeaderJobID)]
		if l == nil {
			return
		}
		if e, ok := schemas.ResultError(m.Data); ok {
			b.record(l, nil, e)
		} else {
			b.record(l, &client.Reply{Response: m.Data, RequestID: m.Header.Get(schemas.HeaderRequestID)}, nil)
		}
		select {
		case got <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("batch: subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return fmt.Errorf("batch: %w", err)
	}

	// Results the pool already has are written without a new submission.
	var toSubmit []*batchLine
	for _, l := range b.pending {
		r, err := b.cl.Result(ctx, l.id)
		switch {
		case err == nil:
			b.record(l, r, nil)
		case errors.Is(err, client.ErrNoResult):
			toSubmit = append(toSubmit, l)
		case isJobError(err):
			b.record(l, nil, err)
		default:
			return fmt.Errorf("batch: %w", err)
		}
	}

	submitErr := make(chan error, 1)
	go func() {
		submitErr <- b.submit(ctx, toSubmit, inbox, jobTimeout)
	}()

	tick := time.NewTicker(poll)
	defer tick.Stop()
	submitted := false
	for b.remaining() > 0 {
		select {
		case <-got:
		case err := <-submitErr:
			if err != nil {
				b.prog.finish()
				return fmt.Errorf("batch: %w", err)
			}
			submitted = true
		case <-tick.C:
			if submitted {
				b.pollStored(ctx)
			}
		case <-ctx.Done():
			b.prog.finish()
			return exitError{code: 1, msg: fmt.Sprintf("batch: %d of %d jobs have no result yet (%v); rerun to resume", b.remaining(), b.total, ctx.Err())}
		}
	}
	b.prog.finish()
	fmt.Fprintf(e.stderr, "batch: %d jobs: %d ok, %d failed (%d from an earlier run) in %s -> %s\n",
		b.total, b.ok, b.failed, b.already, time.Since(b.start).Round(time.Millisecond), out)
	return nil
}

// submit publishes every line as a job, a few at a time.
func (b *batchRun) submit(ctx context.Context, lines []*batchLine, inbox string, jobTimeout time.Duration) error {
	const workers = 8
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(lines) || ctx.Err() != nil {
					return
				}
				l := lines[i]
				_, err := b.cl.Submit(ctx, l.body, client.SubmitOptions{ID: l.id, ReplyTo: inbox, Timeout: jobTimeout})
				if err != nil {
					errs <- fmt.Errorf("line %d: %w", l.n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// pollStored looks up the stored results of jobs whose live reply has not come (it is best
// effort: a job deduplicated against an earlier submission answers that submission's inbox).
func (b *batchRun) pollStored(ctx context.Context) {
	const perPoll = 500
	n := 0
	for id, l := range b.byID {
		if n >= perPoll || ctx.Err() != nil {
			return
		}
		if b.isWritten(id) {
			continue
		}
		n++
		r, err := b.cl.Result(ctx, id)
		switch {
		case err == nil:
			b.record(l, r, nil)
		case isJobError(err):
			b.record(l, nil, err)
		}
	}
}

func isJobError(err error) bool {
	_, ok := schemas.AsError(err)
	return ok
}

func (b *batchRun) isWritten(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written[id]
}

func (b *batchRun) remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.already - len(b.written)
}

// record writes one result line (once per job).
func (b *batchRun) record(l *batchLine, r *client.Reply, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.written[l.id] {
		return
	}
	b.written[l.id] = true
	line := outputLine(l, r, err)
	if err != nil {
		b.failed++
	} else {
		b.ok++
	}
	_, _ = b.w.Write(append(line, '\n'))
	b.prog.add(err != nil)
}

// outputLine is the result line of l: the Batch API output format for Batch API input, else
// {"id","line","status","response"|"error"}.
func outputLine(l *batchLine, r *client.Reply, err error) []byte {
	se, _ := schemas.AsError(err)
	if l.batchAPI {
		out := map[string]any{"id": l.id, "custom_id": l.customID, "error": nil}
		if se != nil {
			out["response"] = map[string]any{"status_code": se.Status, "request_id": l.id, "body": json.RawMessage(se.Body())}
			out["error"] = map[string]any{"code": se.Code, "message": se.Message}
		} else {
			out["response"] = map[string]any{"status_code": 200, "request_id": l.id, "body": json.RawMessage(r.Response)}
		}
		b, _ := json.Marshal(out)
		return b
	}
	out := map[string]any{"id": l.id, "line": l.n}
	if se != nil {
		out["status"] = se.Status
		out["error"] = json.RawMessage(mustDetail(se))
	} else {
		out["status"] = 200
		out["response"] = json.RawMessage(r.Response)
	}
	b, _ := json.Marshal(out)
	return b
}

// mustDetail is the object inside an error body.
func mustDetail(e *schemas.Error) []byte {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(e.Body(), &body)
	return body.Error
}

// readBatch reads IN: one JSON object per non-empty line. Errors name the line.
func readBatch(path, name string) ([]batchLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []batchLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		l, err := parseBatchLine(raw, n, name)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no requests", path)
	}
	return out, nil
}

func parseBatchLine(raw []byte, n int, name string) (batchLine, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return batchLine{}, errors.New("not a JSON object")
	}
	l := batchLine{n: n}
	key := fmt.Sprintf("line %d", n)
	if body, ok := fields["body"]; ok && fields["custom_id"] != nil {
		if err := json.Unmarshal(fields["custom_id"], &l.customID); err != nil || l.customID == "" {
			return l, errors.New(`"custom_id" must be a non-empty string`)
		}
		if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
			return l, errors.New(`"body" must be a JSON object`)
		}
		l.batchAPI = true
		key = "custom_id " + l.customID
	}
	delete(fields, "stream") // batch results are one-shot bodies
	l.body, _ = json.Marshal(fields)
	sum := sha256.Sum256([]byte(name + "\n" + key + "\n" + string(l.body)))
	l.id = "b" + hex.EncodeToString(sum[:20])
	return l, nil
}

// doneIDs returns the job ids OUT already has a line for (none when it does not exist).
func doneIDs(path string) (map[string]bool, error) {
	done := map[string]bool{}
	if path == "-" {
		return done, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		var l struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			done[l.ID] = true
		}
	}
	return done, sc.Err()
}

// batchProgress shows done/failed/rate/ETA: a bar on a terminal, a line every few seconds
// elsewhere.
type batchProgress struct {
	bar     *progressbar.ProgressBar
	w       io.Writer
	total   int
	done    int
	failed  int
	start   time.Time
	last    time.Time
	initial int
}

func newBatchProgress(w io.Writer, quiet bool, total, already int) *batchProgress {
	p := &batchProgress{w: w, total: total, done: already, initial: already, start: time.Now(), last: time.Now()}
	if quiet {
		p.w = nil
		return p
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(p.describe()),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("jobs"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionFullWidth(),
		)
		_ = p.bar.Set(already)
	}
	return p
}

func (p *batchProgress) describe() string {
	return fmt.Sprintf("batch: %d failed", p.failed)
}

// add counts one finished job; the caller holds the batch's lock.
func (p *batchProgress) add(failed bool) {
	p.done++
	if failed {
		p.failed++
	}
	switch {
	case p.bar != nil:
		p.bar.Describe(p.describe())
		_ = p.bar.Add(1)
	case p.w != nil && (time.Since(p.last) > 3*time.Second || p.done == p.total):
		p.last = time.Now()
		el := time.Since(p.start)
		rate := float64(p.done-p.initial) / el.Seconds()
		eta := "?"
		if rate > 0 {
			eta = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
		}
		fmt.Fprintf(p.w, "batch: %d/%d done, %d failed, %.1f jobs/s, %s left\n", p.done, p.total, p.failed, rate, eta)
	}
}

func (p *batchProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
