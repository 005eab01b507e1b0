package queue

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// TestReplySubjectAllowList: a request whose reply subject starts with none of ReplyPrefixes is
// neither generated nor answered, and counted; one inside the list is answered. A reply on
// $KV.CODEXPOOL_RESULTS.x would otherwise be a result write by the worker's hand.
func TestReplySubjectAllowList(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []string
		reply    string
		answered bool
	}{
		{"a results key is refused", nil, "$KV.CODEXPOOL_RESULTS.x", false},
		{"the JetStream API is refused", nil, "$JS.API.STREAM.PURGE.CODEXPOOL_JOBS", false},
		{"a pool subject is refused", nil, "codex.cancel", false},
		{"an inbox is answered", nil, "_INBOX.t1", true},
		{"a custom prefix is answered", []string{"replies.", "_INBOX."}, "replies.one", true},
		{"an inbox outside a custom list is refused", []string{"replies."}, "_INBOX.t2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := startJetStream(t)
			gen := &counted{Generator: instant}
			svc := newService(t, ns, Config{ReplyPrefixes: tt.prefixes, Jobs: openJobs(t, ns, fastJobs())}, gen)
			nc := connect(t, ns)
			sub, err := nc.SubscribeSync(tt.reply)
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.PublishMsg(&nats.Msg{Subject: DefaultSubject, Reply: tt.reply, Data: []byte(goodRequest)}); err != nil {
				t.Fatal(err)
			}
			if tt.answered {
				if _, err := sub.NextMsg(waitTimeout); err != nil {
					t.Fatalf("reply on %s: %v, want an answer", tt.reply, err)
				}
				if st := svc.Stats(); st.RefusedReply != 0 || gen.calls.Load() != 1 {
					t.Errorf("refused=%d generations=%d, want 0 and 1", st.RefusedReply, gen.calls.Load())
				}
				return
			}
			// The handler takes messages in order: once a later request is answered, the
			// refused one has been handled.
			syncRequest(t, nc, append(tt.prefixes, DefaultReplyPrefix)[0]+"sync")
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if n, _, _ := sub.Pending(); n != 0 {
				t.Errorf("%d messages published on %s, want none", n, tt.reply)
			}
			if st := svc.Stats(); st.RefusedReply != 1 || gen.calls.Load() != 1 {
				t.Errorf("refused=%d generations=%d, want 1 and 1 (the sync request's)", st.RefusedReply, gen.calls.Load())
			}
			assertNoResult(t, nc, "x")
		})
	}
}

// syncRequest sends a request answered on reply and waits for the answer.
func syncRequest(t *testing.T, nc *nats.Conn, reply string) {
	t.Helper()
	sub, err := nc.SubscribeSync(reply)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: DefaultSubject, Reply: reply, Data: []byte(goodRequest)}); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(waitTimeout); err != nil || m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
		t.Fatalf("sync request on %s: %v, want an answer", reply, err)
	}
}

// assertNoResult fails when the results bucket holds key.
func assertNoResult(t *testing.T, nc *nats.Conn, key string) {
	t.Helper()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, schemas.DefaultResultsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("results bucket key %s: %v (err %v), want none", key, e, err)
	}
}

// TestJobReplyToOutsideAllowList: a job whose Codex-Reply-To starts with none of ReplyPrefixes
// ends with 400 invalid_request as its result, without a generation, and nothing is published on
// that subject.
func TestJobReplyToOutsideAllowList(t *testing.T) {
	ns := startJetStream(t)
	gen := &counted{Generator: instant}
	svc := newService(t, ns, Config{Jobs: openJobs(t, ns, fastJobs())}, gen)
	nc := connect(t, ns)
	const target = "$KV.CODEXPOOL_RESULTS.y"
	sub, err := nc.SubscribeSync(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c := jobClient(t, ns)
	submit(t, c, goodRequest, client.SubmitOptions{ID: "trust-1", ReplyTo: target})
	_, err = waitResult(t, c, "trust-1")
	if e, ok := schemas.AsError(err); !ok || e.Status != 400 || e.Code != schemas.CodeInvalidRequest {
		t.Fatalf("result of a job with Codex-Reply-To %s: %v, want 400 invalid_request", target, err)
	}
	waitFor(t, "the ack", func() bool { return svc.Stats().Jobs.Acked == 1 })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := sub.Pending(); n != 0 {
		t.Errorf("%d messages published on %s, want none", n, target)
	}
	if st := svc.Stats(); st.RefusedReply != 1 || gen.calls.Load() != 0 {
		t.Errorf("refused=%d generations=%d, want 1 and 0", st.RefusedReply, gen.calls.Load())
	}
	assertNoResult(t, nc, "y")
}

// TestJobIDsThePoolMakes: jobs without Nats-Msg-Id get ids that are not their stream sequence,
// fit the job id pattern, and differ; a redelivered job keeps its id.
func TestJobIDsThePoolMakes(t *testing.T) {
	ns := startJetStream(t)
	ids := make(chan string, 8)
	var calls atomic.Int64
	gen := genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		ids <- r.ID // the request id defaults to the job id
		if calls.Add(1) == 1 {
			return nil, schemas.Errorf(schemas.CodeUpstreamError, "first delivery fails") // retried
		}
		return instant(ctx, r, emit)
	})
	newService(t, ns, Config{MaxInflight: 1, Jobs: openJobs(t, ns, fastJobs())}, gen)
	c := jobClient(t, ns)
	first := submit(t, c, goodRequest, client.SubmitOptions{})
	a, b := <-ids, <-ids // the first job, then its redelivery (MaxInflight 1: one at a time)
	if a != b {
		t.Errorf("a redelivered job changed its id: %q, then %q", a, b)
	}
	second := submit(t, c, goodRequest, client.SubmitOptions{})
	d := <-ids
	pattern := regexp.MustCompile(`^[A-Za-z0-9_=-]{16,128}$`)
	for _, tc := range []struct {
		id  string
		seq uint64
	}{{a, first.Sequence}, {d, second.Sequence}} {
		if !pattern.MatchString(tc.id) || tc.id == strconv.FormatUint(tc.seq, 10) {
			t.Errorf("job at sequence %d got id %q, want an unguessable id of the job id pattern", tc.seq, tc.id)
		}
	}
	if a == d {
		t.Errorf("two jobs got the same id %q", a)
	}
	for _, id := range []string{a, d} {
		if _, err := waitResult(t, c, id); err != nil {
			t.Errorf("result of job %s: %v", id, err)
		}
	}
}
