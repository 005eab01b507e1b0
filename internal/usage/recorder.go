package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/store"
)

// A Recorder publishes usage records to the usage stream and nothing else: what a worker needs
// to record the requests no gateway records (sent straight over NATS), per account. Make one
// with OpenRecorder; Close it.
type Recorder struct {
	js  jetstream.JetStream
	cfg Config
}

// OpenRecorder finds or creates the usage stream (as Open does). ctx bounds the setup only.
func OpenRecorder(ctx context.Context, js jetstream.JetStream, cfg Config) (*Recorder, error) {
	cfg = cfg.withDefaults()
	if _, err := store.Stream(ctx, js, streamConfig(cfg)); err != nil {
		return nil, fmt.Errorf("usage: stream %s: %w", cfg.Stream, err)
	}
	return &Recorder{js: js, cfg: cfg}, nil
}

// Record publishes r without waiting for its acknowledgement; Close waits for those.
func (rc *Recorder) Record(r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	b, _ := json.Marshal(r)
	_, _ = rc.js.PublishAsync(rc.cfg.Subject, b)
}

// Close waits (within ctx) for the records not yet acknowledged.
func (rc *Recorder) Close(ctx context.Context) error {
	select {
	case <-rc.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("usage: %d records not acknowledged: %w", rc.js.PublishAsyncPending(), ctx.Err())
	}
}
