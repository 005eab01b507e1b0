package usage_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/internal/usage"
	"github.com/codexpool/codexpool/queue/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newJS starts an embedded NATS server with JetStream (file store in a temp dir) and returns a
// JetStream context on a connection to it, and its URL.
func newJS(t *testing.T) (jetstream.JetStream, string) {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return connectJS(t, ns.ClientURL()), ns.ClientURL()
}

func connectJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func open(t *testing.T, js jetstream.JetStream, cfg usage.Config) *usage.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := usage.Open(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

func flush(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("records not acknowledged within 10s")
	}
}

// TestQuerySumsRecordsOfEveryStore: two stores (two gateways) record; the query sums both per
// key and per account, by hour, and skips records before since.
func TestQuerySumsRecordsOfEveryStore(t *testing.T) {
	js1, url := newJS(t)
	js2 := connectJS(t, url)
	a, b := open(t, js1, usage.Config{}), open(t, js2, usage.Config{})
	now := time.Now().UTC()
	old := now.Add(-3 * time.Hour)
	a.Record(usage.Record{Time: old, Key: "alice", Account: "acct-1", Input: 1000, Output: 1000})
	a.Record(usage.Record{Time: now, Key: "alice", Account: "acct-1", Input: 10, Output: 5, Cached: 4, Reasoning: 2})
	b.Record(usage.Record{Time: now, Key: "alice", Account: "acct-2", Input: 20, Output: 7, Error: "upstream_error"})
	b.Record(usage.Record{Time: now, Key: "bob", Account: "acct-2", Input: 1, Output: 1})
	flush(t, js1)
	flush(t, js2)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		by    string
		since time.Time
		want  map[string]usage.Totals
	}{
		{"by key", usage.ByKey, now.Add(-time.Hour), map[string]usage.Totals{
			"alice": {Requests: 2, Errors: 1, Input: 30, Output: 12, Cached: 4, Reasoning: 2},
			"bob":   {Requests: 1, Input: 1, Output: 1},
		}},
		{"by account", usage.ByAccount, now.Add(-time.Hour), map[string]usage.Totals{
			"acct-1": {Requests: 1, Input: 10, Output: 5, Cached: 4, Reasoning: 2},
			"acct-2": {Requests: 2, Errors: 1, Input: 21, Output: 8},
		}},
		{"older records too", usage.ByKey, now.Add(-4 * time.Hour), map[string]usage.Totals{
			"alice": {Requests: 3, Errors: 1, Input: 1030, Output: 1012, Cached: 4, Reasoning: 2},
			"bob":   {Requests: 1, Input: 1, Output: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := a.Query(ctx, tc.since, tc.by)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != len(tc.want) {
				t.Fatalf("got %d rows %+v, want %d", len(rep.Rows), rep.Rows, len(tc.want))
			}
			for _, r := range rep.Rows {
				if r.Totals != tc.want[r.Name] {
					t.Errorf("%s: got %+v, want %+v", r.Name, r.Totals, tc.want[r.Name])
				}
				var hours usage.Totals
				for _, h := range r.Hours {
					hours.Requests += h.Requests
				}
				if hours.Requests != r.Requests {
					t.Errorf("%s: hours sum to %d requests, want %d", r.Name, hours.Requests, r.Requests)
				}
			}
		})
	}
}

// TestQueryWithoutStream: nothing recorded yet is ErrNoUsage, not a failure.
func TestQueryWithoutStream(t *testing.T) {
	js, _ := newJS(t)
	_, err := usage.Query(context.Background(), js, "", time.Now().Add(-time.Hour), usage.ByKey)
	if !errors.Is(err, usage.ErrNoUsage) {
		t.Fatalf("got %v, want ErrNoUsage", err)
	}
}

// TestRequestsPerMinuteAcrossStores: two stores share one key's sliding minute: the limit holds
// over both, with a retry time within the minute.
func TestRequestsPerMinuteAcrossStores(t *testing.T) {
	js1, url := newJS(t)
	stores := []*usage.Store{open(t, js1, usage.Config{}), open(t, connectJS(t, url), usage.Config{})}
	lim := usage.Limits{RequestsPerMinute: 3}
	ctx := context.Background()
	for i := range 3 {
		release, err := stores[i%2].Admit(ctx, "alice", lim)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		release()
	}
	_, err := stores[1].Admit(ctx, "alice", lim)
	var le *usage.LimitError
	if !errors.As(err, &le) || le.Limit != "requests_per_minute" {
		t.Fatalf("4th request: got %v, want a requests_per_minute LimitError", err)
	}
	if le.RetryAfter <= 0 || le.RetryAfter > time.Minute {
		t.Errorf("retry after %s, want within (0, 1m]", le.RetryAfter)
	}
	if _, err := stores[0].Admit(ctx, "bob", lim); err != nil {
		t.Errorf("another key: %v", err)
	}
}

// TestRequestsPerMinuteConcurrent: 20 admissions at once over two stores admit exactly the limit.
func TestRequestsPerMinuteConcurrent(t *testing.T) {
	js1, url := newJS(t)
	stores := []*usage.Store{open(t, js1, usage.Config{}), open(t, connectJS(t, url), usage.Config{})}
	lim := usage.Limits{RequestsPerMinute: 7}
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := stores[i%2].Admit(context.Background(), "carol", lim)
			var le *usage.LimitError
			switch {
			case err == nil:
				mu.Lock()
				admitted++
				mu.Unlock()
			case !errors.As(err, &le):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if admitted != lim.RequestsPerMinute {
		t.Errorf("admitted %d, want %d", admitted, lim.RequestsPerMinute)
	}
}

// TestMaxConcurrentLeases: the slots are shared by two stores, come back on release, and those
// of a store that stopped renewing (a dead gateway) come back when its leases expire.
func TestMaxConcurrentLeases(t *testing.T) {
	js1, url := newJS(t)
	ttl := 600 * time.Millisecond
	a := open(t, js1, usage.Config{LeaseTTL: ttl})
	ctx := context.Background()
	lim := usage.Limits{MaxConcurrent: 2}
	relA, err := a.Admit(ctx, "dave", lim)
	if err != nil {
		t.Fatal(err)
	}
	// b holds the second slot and dies without releasing it.
	b, err := usage.Open(ctx, connectJS(t, url), usage.Config{LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admit(ctx, "dave", lim); err != nil {
		t.Fatal(err)
	}
	var le *usage.LimitError
	if _, err := a.Admit(ctx, "dave", lim); !errors.As(err, &le) || le.Limit != "max_concurrent" {
		t.Fatalf("3rd at once: got %v, want max_concurrent", err)
	}
	relA()
	relA2, err := a.Admit(ctx, "dave", lim)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	defer relA2()
	// Close stops b's renewals; its lease expires within the TTL, while a's is renewed.
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the dead store's slot to come back", func() bool {
		rel, err := a.Admit(ctx, "dave", lim)
		if err == nil {
			rel()
			return true
		}
		if !errors.As(err, &le) {
			t.Fatal(err)
		}
		return false
	})
	// a's own lease outlived several TTLs by renewal: the slot it holds still counts.
	rel, err := a.Admit(ctx, "dave", lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Admit(ctx, "dave", lim); !errors.As(err, &le) {
		t.Errorf("a's renewed lease was dropped: got %v, want max_concurrent", err)
	}
	rel()
}

// TestTokenLimitsFromRecords: a store sees the records of another (the tail) and refuses a key
// over its 5 h tokens, with the time until enough of them leave the window.
func TestTokenLimitsFromRecords(t *testing.T) {
	js1, url := newJS(t)
	js2 := connectJS(t, url)
	a, b := open(t, js1, usage.Config{}), open(t, js2, usage.Config{})
	lim := usage.Limits{TokensPer5h: 100}
	ctx := context.Background()
	b.Record(usage.Record{Key: "erin", Input: 60, Output: 50})
	b.Record(usage.Record{Key: "frank", Input: 10})
	flush(t, js2)
	var le *usage.LimitError
	testutil.WaitFor(t, 10*time.Second, "erin over 100 tokens refused", func() bool {
		rel, err := a.Admit(ctx, "erin", lim)
		if err == nil {
			rel()
			return false
		}
		if !errors.As(err, &le) {
			t.Fatal(err)
		}
		return true
	})
	if le.Limit != "tokens_per_5h" || le.RetryAfter < 4*time.Hour || le.RetryAfter > 5*time.Hour+time.Minute {
		t.Errorf("got %s retry after %s, want tokens_per_5h in about 5h", le.Limit, le.RetryAfter)
	}
	if _, err := a.Admit(ctx, "frank", lim); err != nil {
		t.Errorf("frank under the limit: %v", err)
	}
	// A store opened later reads the past records before it admits anything.
	c := open(t, connectJS(t, url), usage.Config{})
	if _, err := c.Admit(ctx, "erin", lim); !errors.As(err, &le) {
		t.Errorf("a new store: got %v, want tokens_per_5h", err)
	}
}
