// Package usage keeps the pool's usage accounting and the shared state of per-key limits in
// JetStream, so every gateway adds to the same totals and enforces the same limits, and both
// survive restarts.
//
// Call [Open] with a JetStream context; it finds or creates the stream CODEXPOOL_USAGE (one
// small JSON [Record] per finished request, file storage, kept Config.MaxAge) and the KV bucket
// CODEXPOOL_LIMITS (per-key admission state). Then:
//
//   - [Store.Record] for every finished request: an asynchronous publish, so it costs the request
//     microseconds; [Store.Close] waits for the outstanding acknowledgements.
//   - [Store.Query] sums records per key or per account and hour ([Report]).
//   - [Store.Admit] before a request of a key with [Limits]: requests per minute (a sliding window
//     of admission times, updated by compare-and-set), concurrent requests (leases that expire
//     when their gateway stops renewing them), and tokens over 5 h / a day / a week (summed from
//     the records, which every Store tails).
//
// A Store is safe for concurrent use.
package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// Defaults of Config.
const (
	DefaultStream  = store.UsageStream
	DefaultSubject = "codexpool.usage"
	DefaultBucket  = store.LimitsBucket
	DefaultMaxAge  = 35 * 24 * time.Hour
	// DefaultLeaseTTL is how long a concurrency lease outlives its gateway's last renewal.
	DefaultLeaseTTL = 15 * time.Second
)

// Config configures a Store. The zero value of every field is its documented default.
type Config struct {
	Stream   string        // the records' stream; default CODEXPOOL_USAGE
	Subject  string        // where records are published; default codexpool.usage
	Bucket   string        // the KV bucket of limit state; default CODEXPOOL_LIMITS
	MaxAge   time.Duration // how long records are kept; default 35 days
	Replicas int           // of the stream and the bucket; default 1
	LeaseTTL time.Duration // default 15 s; leases are renewed every third of it
	// Owner names this process's concurrency leases (e.g. the gateway's id); default a random id.
	Owner string
}

func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	return c
}

// Record is one finished request: who made it, which account served it, what it used. Records
// are small on purpose: one per request goes into the stream.
type Record struct {
	Time      time.Time `json:"t"`
	Key       string    `json:"key,omitempty"`     // the client key's name
	Account   string    `json:"account,omitempty"` // the worker's account that served it
	Model     string    `json:"model,omitempty"`
	Input     int64     `json:"in,omitempty"`
	Output    int64     `json:"out,omitempty"`
	Cached    int64     `json:"cached,omitempty"`    // of Input
	Reasoning int64     `json:"reasoning,omitempty"` // of Output
	// Error is the error code of a request that failed; "" for a success.
	Error string `json:"error,omitempty"`
}

// SetTokens fills r's token counts from a response's "usage" object (raw JSON: input_tokens,
// output_tokens and their details); a missing or unreadable one leaves them as they are.
func (r *Record) SetTokens(usageJSON []byte) {
	var u struct {
		Input  int64 `json:"input_tokens"`
		Output int64 `json:"output_tokens"`
		In     struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		Out struct {
			Reasoning int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
	if len(usageJSON) == 0 || json.Unmarshal(usageJSON, &u) != nil {
		return
	}
	r.Input, r.Output, r.Cached, r.Reasoning = u.Input, u.Output, u.In.Cached, u.Out.Reasoning
}

// Tokens is what counts against a token limit: input plus output.
func (r Record) Tokens() int64 { return r.Input + r.Output }

// Store is the usage stream and the limit state. Make one with Open; Close it.
type Store struct {
	js     jetstream.JetStream
	cfg    Config
	stream jetstream.Stream
	kv     jetstream.KeyValue
	leases *leases
	tail   *tail
}

// streamConfig is the usage stream's configuration: Open and OpenRecorder keep it the same.
func streamConfig(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "codexpool usage: one record per finished request",
		Subjects:    []string{cfg.Subject},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      cfg.MaxAge,
		Replicas:    cfg.Replicas,
		// RecordOnce's records carry a Nats-Msg-Id: within this window the stream keeps the first.
		Duplicates: OnceWindow,
	}
}

// Open finds or creates the stream and the bucket (queue/store: an existing one keeps its settings), and starts tailing the last week's records
// (for token limits) and renewing this Store's leases. ctx bounds the setup only.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	stream, err := store.Stream(ctx, js, streamConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", cfg.Stream, err)
	}
	kv, err := store.Bucket(ctx, js, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "codexpool per-key limit state: admissions and leases",
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		History:     1,
		TTL:         time.Hour, // a key unused for an hour has nothing left to remember
	})
	if err != nil {
		return nil, fmt.Errorf("usage: bucket %s: %w", cfg.Bucket, err)
	}
	s := &Store{js: js, cfg: cfg, stream: stream, kv: kv}
	s.leases = newLeases(kv, cfg)
	if s.tail, err = startTail(ctx, stream, time.Now()); err != nil {
		s.leases.stop()
		return nil, err
	}
	return s, nil
}

// Record publishes r without waiting for its acknowledgement; Close waits for those.
func (s *Store) Record(r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	b, _ := json.Marshal(r)
	_, _ = s.js.PublishAsync(s.cfg.Subject, b)
}

// OnceWindow is how long the usage stream remembers the ids of RecordOnce: as long as the pool
// keeps a job's result (24 h), so a result read again is never counted twice.
const OnceWindow = 24 * time.Hour

// RecordOnce publishes r, as Record does, as the one record of id: the stream drops any later
// record of the same id within OnceWindow, from any gateway.
func (s *Store) RecordOnce(id string, r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	b, _ := json.Marshal(r)
	m := nats.NewMsg(s.cfg.Subject)
	m.Data = b
	m.Header.Set(jetstream.MsgIDHeader, id)
	_, _ = s.js.PublishMsgAsync(m)
}

// Close waits (within ctx) for the records not yet acknowledged, gives up this Store's leases
// and stops its goroutines.
func (s *Store) Close(ctx context.Context) error {
	var err error
	select {
	case <-s.js.PublishAsyncComplete():
	case <-ctx.Done():
		err = fmt.Errorf("usage: %d records not acknowledged: %w", s.js.PublishAsyncPending(), ctx.Err())
	}
	s.leases.stop()
	s.tail.stop()
	return err
}

// ErrNoUsage is returned by Query when the usage stream does not exist (nothing recorded).
var ErrNoUsage = errors.New("usage: no usage recorded yet (the stream does not exist)")
