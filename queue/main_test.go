package queue

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// genFunc is a Generator the tests script.
type genFunc func(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error)

func (f genFunc) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	return f(ctx, r, emit)
}

// instant answers at once: a one-shot payload naming the request id, or two events when streaming.
var instant = genFunc(func(_ context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	if emit != nil {
		if err := emit([]byte(`{"type":"response.created"}`)); err != nil {
			return nil, err
		}
		return nil, emit([]byte(`{"type":"response.completed","response":{"id":"resp_1","output_text":"hi"}}`))
	}
	return []byte(`{"id":"resp_1","output_text":"hi ` + r.ID + `"}`), nil
})

const goodRequest = `{"input":"Say hello"}`

// waitTimeout bounds every wait in these tests; nothing should come close to it.
const waitTimeout = 10 * time.Second

func startServer(t testing.TB) *server.Server {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return ns
}

func connect(t testing.TB, ns *server.Server) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	nc, err := Connect(ctx, ns.ClientURL(), t.Name(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newService starts a service on its own connection; cleanup shuts it down (cutting off
// whatever still runs) before the connection closes.
func newService(t testing.TB, ns *server.Server, cfg Config, gen Generator) *Service {
	t.Helper()
	nc := connect(t, ns)
	s, err := NewService(nc, cfg, gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// request sends a raw request and returns the one reply.
func request(t testing.TB, nc *nats.Conn, subject, payload string, hdr nats.Header) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if hdr == nil {
		hdr = nats.Header{}
	}
	m, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Data: []byte(payload), Header: hdr})
	if err != nil {
		t.Fatalf("request on %s: %v", subject, err)
	}
	return m
}

// errorOf decodes an error reply and checks its headers agree with its body.
func errorOf(t testing.TB, m *nats.Msg) *schemas.Error {
	t.Helper()
	code := m.Header.Get(schemas.HeaderServiceErrorCode)
	if code == "" {
		t.Fatalf("reply %q has no %s header", m.Data, schemas.HeaderServiceErrorCode)
	}
	e, err := schemas.ParseErrorBody(m.Data)
	if err != nil {
		t.Fatalf("error body %q: %v", m.Data, err)
	}
	if want := itoa(e.Status); code != want {
		t.Errorf("%s = %q, body status %d", schemas.HeaderServiceErrorCode, code, e.Status)
	}
	if m.Header.Get(schemas.HeaderServiceError) != e.Message {
		t.Errorf("%s = %q, body message %q", schemas.HeaderServiceError, m.Header.Get(schemas.HeaderServiceError), e.Message)
	}
	return e
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, waitTimeout, what, cond)
}

// counted wraps a Generator and counts calls.
type counted struct {
	Generator
	calls atomic.Int64
}

func (c *counted) Generate(ctx context.Context, r *schemas.Request, emit func([]byte) error) ([]byte, error) {
	c.calls.Add(1)
	return c.Generator.Generate(ctx, r, emit)
}
