package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	simToken = "gw-test-origin-token"
	key      = "sk-gateway-test-key-1"
	words    = 6
)

// waitTimeout bounds every wait in these tests; nothing should come close to it.
const waitTimeout = 20 * time.Second

// pool is a real pool in this process: embedded NATS, the origin simulator, one worker behind the
// micro service, and a gateway on a loopback HTTP server.
type pool struct {
	ns   *server.Server
	nc   *nats.Conn
	sim  *codextest.Server
	svc  *queue.Service
	gw   *gateway.Gateway
	srv  *httptest.Server
	url  string // the gateway's base URL for the SDKs, ".../v1/"
	hits atomic.Int64
	logs *testutil.SyncBuffer
}

// poolOptions shape a test pool. Zero values: a healthy instant origin, one worker with the
// queue's default cap, a gateway with the one key above.
type poolOptions struct {
	sim         codextest.Options
	gw          gateway.Config
	noKeys      bool
	maxInflight int
	client      client.Options
	noWorker    bool
	// gen replaces the worker (and the simulator behind it) when set.
	gen queue.Generator
	// workerTracer makes the worker's spans (the gateway's are o.gw.TracerProvider's).
	workerTracer trace.TracerProvider
}

func newPool(t testing.TB, o poolOptions) *pool {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	p := &pool{ns: ns, logs: &testutil.SyncBuffer{}}
	if o.sim.Words == 0 {
		o.sim.Words = words
	}
	o.sim.Token = simToken
	p.sim = codextest.NewServer(o.sim)
	t.Cleanup(p.sim.Close)

	if !o.noWorker {
		wnc, err := queue.Connect(ctx, ns.ClientURL(), "worker", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wnc.Close)
		gen := o.gen
		if gen == nil {
			w, err := worker.New(worker.Config{ID: "w1", URL: p.sim.URL, Token: simToken}, worker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = w.Close() })
			gen = w
		}
		p.svc, err = queue.NewService(wnc, queue.Config{WorkerID: "w1", MaxInflight: o.maxInflight, TracerProvider: o.workerTracer}, gen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = p.svc.Shutdown(sctx)
		})
	}

	p.nc, err = queue.Connect(ctx, ns.ClientURL(), "gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.nc.Close)
	if !o.noKeys && o.gw.Keys == nil {
		o.gw.Keys = []string{key}
	}
	if o.gw.Logger == nil {
		o.gw.Logger = slog.New(slog.NewJSONHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p.gw = gateway.New(client.New(p.nc, o.client), p.nc, o.gw)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.gw.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	p.url = p.srv.URL + "/v1/"
	return p
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
