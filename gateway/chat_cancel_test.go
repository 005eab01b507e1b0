package gateway_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// A chat client that goes away mid-stream (or while waiting for the one-shot answer) ends its
// pool request: the gateway logs 499 client_closed and the worker's slot is freed.
func TestChatClientDisconnect(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "stream", false: "one-shot"}[stream], func(t *testing.T) {
			p := newPool(t, poolOptions{sim: codextest.Options{Latency: 20 * time.Second}})
			body := `{"messages":[{"role":"user","content":"a long one"}],"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
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
				if stream { // read the role chunk, then go away
					line, err := bufio.NewReader(resp.Body).ReadString('\n')
					if err != nil || !strings.Contains(line, `"role":"assistant"`) {
						t.Errorf("first line %q (%v), want the role chunk", line, err)
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
					t.Fatal("the stream ended before its first chunk")
				}
			}
			cancel()
			<-done
			testutil.WaitFor(t, waitTimeout, "the gateway to log client_closed", func() bool {
				return strings.Contains(p.logs.String(), `"code":"client_closed"`)
			})
			testutil.WaitFor(t, waitTimeout, "the worker's slot to be free", func() bool { return p.svc.Stats().Inflight == 0 })
		})
	}
}

// A chat stream whose origin is slow gets ": keep-alive" comments between chunks.
func TestChatStreamKeepAlive(t *testing.T) {
	p := newPool(t, poolOptions{sim: codextest.Options{Latency: 600 * time.Millisecond, TTFT: 500 * time.Millisecond},
		gw: gateway.Config{KeepAlive: 50 * time.Millisecond}})
	body := `{"messages":[{"role":"user","content":"Say hello"}],"stream":true}`
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := p.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var keepAlives int
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == ": keep-alive":
			keepAlives++
		case line != "":
			last = line
		}
	}
	if keepAlives == 0 || last != "data: [DONE]" {
		t.Errorf("%d keep-alives, last line %q: want some, and [DONE] last", keepAlives, last)
	}
}
