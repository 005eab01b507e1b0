package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/validate"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codex/login"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// observed records what the worker reports per generation.
type observed struct {
	mu   sync.Mutex
	gens []worker.Generation
}

func (o *observed) ObserveGeneration(g worker.Generation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gens = append(o.gens, g)
}

func newWorker(t *testing.T, sim *codextest.Server, obs worker.Observer) *worker.Worker {
	t.Helper()
	w, err := worker.New(worker.Config{ID: "w1", URL: sim.URL, Token: "tok-123456789"}, worker.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func parse(t *testing.T, payload string) *schemas.Request {
	t.Helper()
	r, err := validate.Request([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	r.ID = "req-1"
	return r
}

func TestGenerateOneShotAndStream(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Token: "tok-123456789", Words: 4})
	t.Cleanup(sim.Close)
	var obs observed
	w := newWorker(t, sim, &obs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	out, err := w.Generate(ctx, parse(t, `{"input":"Say hello"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var reply schemas.Response
	if err := json.Unmarshal(out, &reply); err != nil {
		t.Fatal(err)
	}
	if want := codextest.Answer("Say hello", 4); reply.OutputText != want || reply.Status != "completed" {
		t.Errorf("one-shot reply output_text %q status %q, want %q completed", reply.OutputText, reply.Status, want)
	}

	var types []string
	out, err = w.Generate(ctx, parse(t, `{"input":"Say hello","stream":true}`), func(ev []byte) error {
		var e schemas.Event
		if err := json.Unmarshal(ev, &e); err != nil {
			return err
		}
		types = append(types, e.Type)
		return nil
	})
	if err != nil || out != nil {
		t.Fatalf("stream: payload %q, err %v; want nil, nil", out, err)
	}
	if len(types) < 3 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("stream events %v, want response.created first and response.completed last", types)
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.gens) != 2 || !obs.gens[0].OK || !obs.gens[0].Dialed || obs.gens[1].Dialed || obs.gens[0].FirstEvent <= 0 {
		t.Errorf("observed %+v, want two OK generations, the first on a new socket, the second on the pooled one", obs.gens)
	}
}

func TestGenerateMapsOriginErrors(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Token: "tok-123456789"})
	t.Cleanup(sim.Close)
	w := newWorker(t, sim, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.Generate(ctx, parse(t, `{"input":"x","metadata":{"sim_fault":"failed"}}`), nil)
	if e, ok := schemas.AsError(err); !ok || e.Code != schemas.CodeUpstreamError || e.UpstreamCode != "server_error" {
		t.Errorf("response.failed: got %v, want 502 upstream_error (server_error)", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := worker.New(worker.Config{AuthFile: t.TempDir() + "/missing.json"}, worker.Options{}); !errors.Is(err, login.ErrNoCredentials) {
		t.Errorf("no credentials: got %v, want login.ErrNoCredentials", err)
	}
	if _, err := worker.New(worker.Config{Token: "t", Gate: gate.Config{Mode: "turbo"}}, worker.Options{}); err == nil {
		t.Error("unknown gate mode accepted")
	}
}
