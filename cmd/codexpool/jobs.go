package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/schemas"
)

const jobsTrailer = `Prints the durable jobs backlog: jobs stored and not yet delivered (pending), delivered and
not yet acked (in progress), delivered more than once (redelivered), and the results stored
(finished: ok and failed). Reads the CODEXPOOL_NATS_* and CODEXPOOL_JOBS_STREAM /
CODEXPOOL_RESULTS_BUCKET settings. Counting ok and failed reads every stored result; --no-scan
skips that for very large buckets.
`

// jobsReport is what `codexpool jobs` prints (and --json encodes).
type jobsReport struct {
	Stream      string `json:"stream"`
	Stored      uint64 `json:"stored"`      // messages in the stream: pending + in progress
	Pending     uint64 `json:"pending"`     // not yet delivered to a worker
	InProgress  int    `json:"in_progress"` // delivered, not yet acked
	Redelivered int    `json:"redelivered"` // in progress and delivered more than once
	Waiting     int    `json:"workers_waiting"`
	Bucket      string `json:"bucket"`
	Finished    uint64 `json:"finished"` // results stored
	OK          int    `json:"ok"`
	Failed      int    `json:"failed"`
	Scanned     bool   `json:"scanned"`
	ResultsTTL  string `json:"results_ttl"`
}

func runJobs(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "jobs", "jobs [--nats URL] [--json] [--no-scan]", jobsTrailer)
	natsURL := fs.String("nats", "", "NATS server URL (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noScan := fs.Bool("no-scan", false, "do not read the results to count ok and failed")
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.printUsage(e.stderr)
		return exitError{code: 2, msg: fmt.Sprintf("jobs takes no arguments, got %q", fs.Args())}
	}
	pool, err := loadPoolConfig(e, fs)
	if err != nil {
		return err
	}
	nc, err := pool.dial(e.getenv, "codexpool jobs", *natsURL)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err := jobsBacklog(ctx, nc, pool, !*noScan)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "stream %s\t%d stored\n", rep.Stream, rep.Stored)
	fmt.Fprintf(tw, "  pending\t%d\tnot yet delivered to a worker\n", rep.Pending)
	fmt.Fprintf(tw, "  in progress\t%d\trunning (delivered, not acked); %d of them redelivered\n", rep.InProgress, rep.Redelivered)
	fmt.Fprintf(tw, "  workers waiting\t%d\tpull requests open (workers with a free slot)\n", rep.Waiting)
	fmt.Fprintf(tw, "results %s\t%d finished\tkept %s\n", rep.Bucket, rep.Finished, rep.ResultsTTL)
	if rep.Scanned {
		fmt.Fprintf(tw, "  ok\t%d\n", rep.OK)
		fmt.Fprintf(tw, "  failed\t%d\n", rep.Failed)
	}
	return tw.Flush()
}

// jobsBacklog reads the stream, the consumer and the results bucket.
func jobsBacklog(ctx context.Context, nc *nats.Conn, pool PoolConfig, scan bool) (jobsReport, error) {
	rep := jobsReport{Stream: pool.JobsStream, Bucket: pool.ResultsBucket}
	js, err := jetstream.New(nc)
	if err != nil {
		return rep, err
	}
	st, err := js.Stream(ctx, pool.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return rep, fmt.Errorf("no stream %s: no worker with jobs has started on this server yet", pool.JobsStream)
	}
	if err != nil {
		return rep, fmt.Errorf("stream %s: %w", pool.JobsStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("stream %s: %w", pool.JobsStream, err)
	}
	rep.Stored = info.State.Msgs
	cons, err := st.Consumer(ctx, schemas.JobsConsumer)
	if err != nil {
		return rep, fmt.Errorf("consumer %s: %w", schemas.JobsConsumer, err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("consumer %s: %w", schemas.JobsConsumer, err)
	}
	rep.Pending, rep.InProgress, rep.Redelivered, rep.Waiting = ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting

	kv, err := js.KeyValue(ctx, pool.ResultsBucket)
	if err != nil {
		return rep, fmt.Errorf("results bucket %s: %w", pool.ResultsBucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return rep, fmt.Errorf("results bucket %s: %w", pool.ResultsBucket, err)
	}
	rep.Finished, rep.ResultsTTL = status.Values(), status.TTL().String()
	if !scan || rep.Finished == 0 {
		return rep, nil
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return rep, fmt.Errorf("results bucket %s: %w", pool.ResultsBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil {
			break // the initial values are done
		}
		if _, failed := schemas.ResultError(e.Value()); failed {
			rep.Failed++
		} else {
			rep.OK++
		}
	}
	rep.Scanned = true
	return rep, ctx.Err()
}
