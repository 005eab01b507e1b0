package gateway_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
)

// servedBy counts, per worker id, the requests each of a pool's workers generated.
type servedBy struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *servedBy) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[id]++
}

func (s *servedBy) get(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[id]
}

// addWorker starts a worker on p's simulator as the service id, counting what it serves.
func addWorker(t *testing.T, p *pool, id string, count *servedBy) *queue.Service {
	t.Helper()
	ctx := ctxT(t, waitTimeout)
	nc, err := queue.Connect(ctx, p.ns.ClientURL(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := worker.New(worker.Config{ID: id, URL: p.sim.URL, Token: simToken}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	gen := genFunc(func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
		count.add(id)
		return w.Generate(ctx, r, emit)
	})
	svc, err := queue.NewService(nc, queue.Config{WorkerID: id}, gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = svc.Shutdown(sctx)
	})
	return svc
}

// TestStickySessionsKeepTheirWorker: the requests of one session (its Claude Code session header)
// go to the worker that served its first, not wherever the queue group sends them, one-shot and
// streamed alike; when that worker is gone, the next request is served by another at once.
func TestStickySessionsKeepTheirWorker(t *testing.T) {
	p := newPool(t, poolOptions{noWorker: true})
	count := &servedBy{n: map[string]int{}}
	svcs := map[string]*queue.Service{"w1": addWorker(t, p, "w1", count), "w2": addWorker(t, p, "w2", count)}
	send := func(i int) {
		body := `{"input":"turn","stream":false}`
		if i%2 == 1 {
			body = `{"input":"turn","stream":true}`
		}
		resp := post(t, p, "/v1/responses", body, map[string]string{"X-Claude-Code-Session-Id": "conv-1"})
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	const turns = 12
	for i := range turns {
		send(i)
	}
	first, other := "w1", "w2"
	if count.get("w2") > count.get("w1") {
		first, other = other, first
	}
	// The queue group alone would put all 12 on one of two workers once in 2^11 runs.
	if count.get(first) != turns {
		t.Fatalf("served w1 %d, w2 %d: want all %d turns of the session on one worker", count.get("w1"), count.get("w2"), turns)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := svcs[first].Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	send(0)
	if count.get(other) != 1 {
		t.Errorf("after %s stopped: %s served %d, want the next turn there", first, other, count.get(other))
	}
	t.Logf("the turn after the session's worker stopped took %s", time.Since(began).Round(time.Millisecond))
}
