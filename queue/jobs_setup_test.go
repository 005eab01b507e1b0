package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNotReady: setup waits for JetStream on a timeout or a temporarily unavailable cluster, and
// fails at once on anything else (no JetStream at all, a bad request, a stream that does not fit).
func TestNotReady(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("queue: results bucket X: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{fmt.Errorf("queue: jobs stream X: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}), true},
		{jetstream.ErrJetStreamNotEnabled, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use with a different configuration"}, false},
		{errors.New("queue: jobs stream X exists but does not capture codex.jobs.submit"), false},
	}
	for _, tt := range tests {
		if got := notReady(tt.err); got != tt.want {
			t.Errorf("notReady(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestOpenJobsCancelled: OpenJobs returns ctx's error, unwrapped, when ctx is done.
func TestOpenJobsCancelled(t *testing.T) {
	ns := startJetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenJobs(ctx, connect(t, ns), JobsConfig{}, nil); err != context.Canceled {
		t.Errorf("OpenJobs with a cancelled context: got %v, want context.Canceled", err)
	}
}
