package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/internal/testutil"
)

// A client that closes the connection mid-stream (or while waiting for a one-shot reply) ends the
// request's context at once: the gateway's handler returns and logs 499 client_closed within 1 s.
// The pool request ends with it (the Go client publishes codex.cancel), which frees the worker's
// slot within 1 s once the workers honour codex.cancel.
func TestClientDisconnect(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "one-shot"}[stream], func(t *testing.T) {
			disconnect(t, stream)
		})
	}
}

func TestClientDisconnectFreesWorkerSlot(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "one-shot"}[stream], func(t *testing.T) {
			p := disconnect(t, stream)
			testutil.WaitFor(t, time.Second, "the worker's slot to be free", func() bool { return p.svc.Stats().Inflight == 0 })
		})
	}
}

// disconnect starts a 20 s generation through the gateway, closes the client's connection (after
// the first event when streaming) and checks the gateway's handler ended within 1 s.
func disconnect(t *testing.T, stream bool) *pool {
	t.Helper()
	p := newPool(t, poolOptions{})
	body := `{"input":"a long one","metadata":{"sim_latency_ms":"20000"}` + map[bool]string{true: `,"stream":true}`, false: `}`}[stream]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+"/v1/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Request-Id", "disconnect-"+strings.ReplaceAll(t.Name(), "/", "-"))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()

	done, started := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return // cancelled before the headers (one-shot)
		}
		defer resp.Body.Close()
		if stream { // read the first event, then go away
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "event: response.created") {
				t.Errorf("first line %q (%v), want event: response.created", line, err)
			}
			close(started)
		}
		<-ctx.Done()
	}()
	waitInflight(t, p, 1)
	if stream {
		select {
		case <-started:
		case <-done:
			t.Fatal("the stream ended before its first event")
		}
	}
	cancel()
	closed := time.Now()
	<-done
	testutil.WaitFor(t, time.Second, "the gateway to log client_closed", func() bool {
		return strings.Contains(p.logs.String(), `"code":"client_closed"`)
	})
	t.Logf("gateway handler ended %s after the client closed", time.Since(closed).Round(time.Millisecond))
	return p
}
