package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
	"github.com/codexpool/codexpool/schemas"
)

// JobsConfig configures durable jobs (JetStream). The zero value of every field is its
// documented default.
type JobsConfig struct {
	Subject     string        // subject prefix: the stream captures Subject+".>", jobs go to Subject+".submit"; default "codex.jobs"
	Stream      string        // default "CODEXPOOL_JOBS"
	Bucket      string        // results KV bucket; default "CODEXPOOL_RESULTS"
	Replicas    int           // stream and bucket replicas; default 1 (3 on a cluster)
	Dedup       time.Duration // the stream's duplicate window for Nats-Msg-Id; default 2m
	AckWait     time.Duration // redelivery of a job whose worker went silent; default 60s
	MaxAttempts int           // deliveries of a job that fails with a retryable error or whose result cannot be stored; default 5
	ResultsTTL  time.Duration // how long a result stays in the bucket; default 24h
	// MaxAckPending bounds the jobs in flight across the whole pool (the consumer's setting);
	// default 10000. It must be at least the sum of every worker's MaxInflight, or workers idle.
	MaxAckPending int
	// FetchWait is how long one pull request waits for a job before the worker asks again; it
	// also bounds how long Shutdown waits for the pull loop. Default 2s.
	FetchWait time.Duration
	// ReadPause is how long the pull loop stops pulling after the results bucket could not be
	// read (every job would fail the same way); it doubles with each failed read up to
	// MaxJobsReadPause and starts again from ReadPause after a read that works. Default 1s.
	ReadPause time.Duration
	// KeyBucket is the KV bucket whose metadata holds the pool's key for the ids of jobs
	// submitted without Nats-Msg-Id (see jobIDs); the first worker creates it. Default
	// "CODEXPOOL_JOBS_KEY". Clients must not be able to read it.
	KeyBucket string
}

// Defaults of JobsConfig.
const (
	DefaultJobsDedup         = 2 * time.Minute
	DefaultJobsAckWait       = 60 * time.Second
	DefaultJobsMaxAttempts   = 5
	DefaultResultsTTL        = 24 * time.Hour
	DefaultJobsMaxAckPending = 10000
	DefaultJobsFetchWait     = 2 * time.Second
	DefaultJobsReadPause     = time.Second
	MaxJobsReadPause         = 30 * time.Second
	DefaultJobsKeyBucket     = store.JobsKeyBucket
)

func (c JobsConfig) withDefaults() JobsConfig {
	if c.Subject == "" {
		c.Subject = schemas.DefaultJobsSubject
	}
	if c.Stream == "" {
		c.Stream = schemas.DefaultJobsStream
	}
	if c.Bucket == "" {
		c.Bucket = schemas.DefaultResultsBucket
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Dedup <= 0 {
		c.Dedup = DefaultJobsDedup
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultJobsAckWait
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultJobsMaxAttempts
	}
	if c.ResultsTTL <= 0 {
		c.ResultsTTL = DefaultResultsTTL
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultJobsMaxAckPending
	}
	if c.KeyBucket == "" {
		c.KeyBucket = DefaultJobsKeyBucket
	}
	if c.FetchWait <= 0 {
		c.FetchWait = DefaultJobsFetchWait
	}
	if c.ReadPause <= 0 {
		c.ReadPause = DefaultJobsReadPause
	}
	return c
}

// JetStreamAvailable reports whether the server nc is connected to has JetStream for this
// account. An error means the question could not be asked (a timeout, a permission).
func JetStreamAvailable(ctx context.Context, nc *nats.Conn) (bool, error) {
	if on, _ := nc.ConnectedServerJetStream(); !on {
		return false, nil // the server says so in its INFO: no API call (and no permission needed)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return false, fmt.Errorf("queue: %w", err)
	}
	_, err = js.AccountInfo(ctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false, nil
	default:
		return false, fmt.Errorf("queue: ask the server for JetStream: %w", err)
	}
}

// Jobs is the JetStream side of durable jobs: the shared consumer, the results bucket and the key
// of pool-made job ids. Make it with OpenJobs and pass it to NewService in Config.Jobs.
type Jobs struct {
	cfg      JobsConfig
	consumer jetstream.Consumer
	results  jetstream.KeyValue
	ids      jobIDs
	ackWait  *consumerAckWait // the consumer's AckWait, which keep-alives follow
}

// Setup waits for a JetStream that is not ready: a cluster still electing the leaders of new
// replicated assets, or too busy to answer, times out or says it is temporarily unavailable. Each
// attempt gets setupAttempt, all of them setupPatience; every other error ends the setup at once.
const (
	setupAttempt  = 10 * time.Second
	setupPatience = time.Minute
	setupPause    = 500 * time.Millisecond
)

// OpenJobs finds or creates the jobs stream, the durable consumer, the results bucket and the
// job-id key bucket. What exists is used as it is, never deleted or reconfigured: a setting that
// differs from what this worker would create is logged as a warning, and one that makes jobs
// impossible (the stream does not capture the submit subject, the consumer does not ack
// explicitly) is an error. While JetStream is not ready (see setupPatience) it tries again, up
// to a minute; it returns ctx.Err() when ctx is done first.
func OpenJobs(ctx context.Context, nc *nats.Conn, cfg JobsConfig, log *slog.Logger) (*Jobs, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	deadline := time.Now().Add(setupPatience)
	for {
		actx, cancel := context.WithTimeout(ctx, min(setupAttempt, time.Until(deadline)))
		j, err := setupJobs(actx, nc, cfg, log)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil || !notReady(err) || time.Until(deadline) < setupPause {
			return j, err
		}
		log.Warn("jobs: JetStream is not ready; trying again", "error", err, "gives_up_in", time.Until(deadline).Round(time.Second))
		t := time.NewTimer(setupPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// notReady reports whether err says that JetStream may answer later: a timeout, or "temporarily
// unavailable" (503), but not "JetStream is not enabled".
func notReady(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503 && apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabled
}

// setupJobs is one attempt of OpenJobs.
func setupJobs(ctx context.Context, nc *nats.Conn, cfg JobsConfig, log *slog.Logger) (*Jobs, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("queue: jobs: %w", err)
	}
	stream, err := setupStream(ctx, js, cfg, log)
	if err != nil {
		return nil, err
	}
	consumer, err := setupConsumer(ctx, stream, cfg, log)
	if err != nil {
		return nil, err
	}
	kv, err := setupResults(ctx, js, cfg, log)
	if err != nil {
		return nil, err
	}
	key, err := setupIDKey(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	ids := jobIDs{key: key, stream: cfg.Stream, created: stream.CachedInfo().Created.UnixNano()}
	return &Jobs{cfg: cfg, consumer: consumer, results: kv, ids: ids, ackWait: newConsumerAckWait(consumer, cfg.AckWait)}, nil
}

// setupStream finds or creates the jobs stream and checks that it captures the submit subject.
func setupStream(ctx context.Context, js jetstream.JetStream, cfg JobsConfig, log *slog.Logger) (jetstream.Stream, error) {
	want := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "codexpool durable generation jobs",
		Subjects:    []string{cfg.Subject + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.Dedup,
	}
	stream, err := store.Stream(ctx, js, want)
	if err != nil {
		return nil, fmt.Errorf("queue: jobs stream %s: %w", cfg.Stream, err)
	}
	have := stream.CachedInfo().Config
	if !capturesSubject(have.Subjects, schemas.SubmitSubject(cfg.Subject)) {
		return nil, fmt.Errorf("queue: jobs stream %s exists but does not capture %s (its subjects: %v)",
			cfg.Stream, schemas.SubmitSubject(cfg.Subject), have.Subjects)
	}
	differs(log, "stream "+cfg.Stream, map[string][2]any{
		"retention": {have.Retention, want.Retention},
		"storage":   {have.Storage, want.Storage},
		"replicas":  {have.Replicas, want.Replicas},
		"dedup":     {have.Duplicates, want.Duplicates},
	})
	return stream, nil
}

// setupConsumer finds or creates the durable consumer every worker shares.
func setupConsumer(ctx context.Context, stream jetstream.Stream, cfg JobsConfig, log *slog.Logger) (jetstream.Consumer, error) {
	want := jetstream.ConsumerConfig{
		Durable:       schemas.JobsConsumer,
		Description:   "codexpool workers: one job per free slot",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1, // workers count attempts themselves (see jobConsumer.settled)
		MaxAckPending: cfg.MaxAckPending,
	}
	consumer, err := store.Consumer(ctx, stream, want)
	if err != nil {
		return nil, fmt.Errorf("queue: jobs consumer %s: %w", schemas.JobsConsumer, err)
	}
	have := consumer.CachedInfo().Config
	if have.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("queue: jobs consumer %s acks %s; codexpool needs explicit acks", schemas.JobsConsumer, have.AckPolicy)
	}
	differs(log, "consumer "+schemas.JobsConsumer, map[string][2]any{
		"ack_wait":        {have.AckWait, want.AckWait},
		"max_deliver":     {have.MaxDeliver, want.MaxDeliver},
		"max_ack_pending": {have.MaxAckPending, want.MaxAckPending},
	})
	return consumer, nil
}

// setupResults finds or creates the results bucket.
func setupResults(ctx context.Context, js jetstream.JetStream, cfg JobsConfig, log *slog.Logger) (jetstream.KeyValue, error) {
	want := jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "codexpool job results: job id -> the reply body",
		TTL:         cfg.ResultsTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		History:     1,
	}
	kv, err := store.Bucket(ctx, js, want)
	if err != nil {
		return nil, fmt.Errorf("queue: results bucket %s: %w", cfg.Bucket, err)
	}
	if st, err := kv.Status(ctx); err == nil {
		differs(log, "bucket "+cfg.Bucket, map[string][2]any{
			"ttl": {st.TTL(), want.TTL},
		})
	}
	return kv, nil
}

// capturesSubject reports whether one of the stream subjects (possibly with wildcards) matches s.
func capturesSubject(subjects []string, s string) bool {
	return slices.ContainsFunc(subjects, func(pattern string) bool { return subjectMatch(pattern, s) })
}

// subjectMatch matches a NATS subject against a pattern with * and > wildcards.
func subjectMatch(pattern, subject string) bool {
	pt, st := splitTokens(pattern), splitTokens(subject)
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

func splitTokens(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// differs logs a warning for every setting of an existing object that is not what this worker
// would have created (have, want).
func differs(log *slog.Logger, what string, settings map[string][2]any) {
	for name, hw := range settings {
		if fmt.Sprint(hw[0]) != fmt.Sprint(hw[1]) {
			log.Warn("jobs: an existing JetStream setting differs from codexpool's; keeping it",
				"object", what, "setting", name, "have", fmt.Sprint(hw[0]), "codexpool_default", fmt.Sprint(hw[1]))
		}
	}
}
