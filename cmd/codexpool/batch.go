package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/batch"
	"github.com/codexpool/codexpool/queue/client"
)

const batchTrailer = `Submits every line of IN.jsonl as a durable job (JetStream) and writes each result to
OUT.jsonl as it finishes, with a progress bar (done, failed, rate, time left). A line is a request
body ({"input": ...}) or an OpenAI Batch API line ({"custom_id": ..., "body": {...}}), answered
in the matching output format. Jobs run one-shot ("stream" is ignored).

Resumable: a rerun of the same IN.jsonl skips the lines OUT.jsonl has a success for, submits
again the lines that failed (--keep-failed keeps those failures instead), takes results the pool
already stored (kept for CODEXPOOL_RESULTS_TTL), and submits only the rest. Job ids derive from the
line's content: its custom_id and body, and which copy it is among identical lines (plus --name,
if given) - not from IN's path or the line's number, so the file may be moved or edited, and the
same lines resubmitted within the duplicate window never run a job twice. A line the pool cannot
take (larger than the NATS server's max_payload, refused by the jobs stream) gets that error as
its result line; the run goes on.

Exit status: 0 when every job succeeded; 1 when any failed (in this run, or kept from an earlier
one with --keep-failed), or the run ended (--timeout) before every job had a result; 2 for a
fault of IN or of the flags.

Reads the CODEXPOOL_NATS_* and CODEXPOOL_JOBS_SUBJECT / CODEXPOOL_RESULTS_BUCKET settings.

Examples:
  codexpool batch prompts.jsonl -o answers.jsonl
  codexpool batch --nats nats://nats-1:4222 requests.jsonl   # writes requests.out.jsonl
`

func runBatch(ctx context.Context, e env, args []string) error {
	cfg, err := batchFlags(e, args)
	if err != nil {
		return err
	}
	b, err := batch.Load(cfg.Config)
	if ie := (*batch.InputError)(nil); errors.As(err, &ie) {
		return exitError{code: 2, msg: ie.Error()}
	}
	if err != nil {
		return err
	}
	pool, err := loadPoolConfig(e, cfg.fs)
	if err != nil {
		return err
	}
	nc, err := pool.dial(e.getenv, "codexpool batch", cfg.natsURL)
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	defer nc.Close()
	sum, err := b.Run(ctx, nc, client.Options{JobsSubject: pool.JobsSubject, ResultsBucket: pool.ResultsBucket})
	if ie := (*batch.IncompleteError)(nil); errors.As(err, &ie) {
		return exitError{code: 1, msg: ie.Error()}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stderr, sum)
	if !sum.AllOK() {
		return exitError{code: 1, msg: fmt.Sprintf("batch: %d jobs failed (see %s)", sum.Failed+sum.AlreadyFailed, sum.Out)}
	}
	return nil
}

// batchConfig is the batch flags: the engine's configuration plus where NATS is.
type batchConfig struct {
	batch.Config
	natsURL string
	fs      *flags // for --config
}

// batchFlags parses the batch flags; flags may come after IN (codexpool batch IN -o OUT).
func batchFlags(e env, args []string) (batchConfig, error) {
	fs := newFlags(e, "batch", "batch [flags] IN.jsonl [-o OUT.jsonl]", batchTrailer)
	c := batchConfig{Config: batch.Config{Stdout: e.stdout, Stderr: e.stderr}, fs: fs}
	fs.StringVar(&c.Out, "o", "", "output file (default IN with .out.jsonl; - for standard output)")
	fs.StringVar(&c.natsURL, "nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	fs.StringVar(&c.Name, "name", "", "a namespace for the job ids: the same line under another name is another job (default: none, ids come from the lines)")
	fs.BoolVar(&c.KeepFailed, "keep-failed", false, "on a rerun, keep the failures OUT has instead of submitting those lines again")
	fs.DurationVar(&c.Timeout, "timeout", 24*time.Hour, "give up waiting for results after this long")
	fs.DurationVar(&c.JobTimeout, "job-timeout", 0, "bound each generation (Codex-Timeout); 0 = the workers' limit")
	fs.DurationVar(&c.Poll, "poll", 10*time.Second, "how often to look up stored results of jobs whose live reply has not come")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress bar")
	if err := fs.parse(e, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		c.In = fs.Arg(0)
		if err := fs.parse(e, fs.Args()[1:]); err != nil {
			return c, err
		}
		if fs.NArg() > 0 {
			fs.printUsage(e.stderr)
			return c, exitError{code: 2, msg: fmt.Sprintf("batch: one input file, got extra %q", fs.Args())}
		}
	}
	if c.In == "" {
		fs.printUsage(e.stderr)
		return c, exitError{code: 2, msg: "batch: IN.jsonl is required"}
	}
	if c.Timeout <= 0 || c.Poll <= 0 || c.JobTimeout < 0 {
		return c, exitError{code: 2, msg: "batch: --timeout and --poll must be positive, --job-timeout >= 0"}
	}
	return c, nil
}
