package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/codexpool/codexpool/internal/bench"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The gateway end-to-end tests run the real binary as gateway and worker processes, with NATS and
// the simulator in the test process, and talk to the gateway with real HTTP clients.

const gatewayKey = "sk-e2e-gateway-key-42"

// startGateway starts a gateway process on a free loopback port (killed when the test ends) and
// returns it with its base URL once it listens.
func (c *cluster) startGateway(env ...string) (*proc, string) {
	c.t.Helper()
	p := c.startProcess("gateway", []string{"gateway"}, append([]string{
		"CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0",
		"CODEXPOOL_GATEWAY_KEYS=" + gatewayKey,
	}, env...)...)
	listening := regexp.MustCompile(`"msg":"gateway listening","addr":"([^"]+)"`)
	var addr string
	testutil.WaitFor(c.t, 60*time.Second, "the gateway to listen", func() bool {
		select {
		case <-p.done:
			c.t.Fatalf("gateway exited: %v\n%s", p.err, p.out.String())
		default:
		}
		if m := listening.FindStringSubmatch(p.out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return p, "http://" + addr
}

func sdkClient(t *testing.T, base, key string, opts ...option.RequestOption) openai.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(base + "/v1/"), option.WithAPIKey(key), option.WithHTTPClient(&http.Client{Transport: tr}),
	}, opts...)...)
}

func sdkParams(prompt string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-5.1-codex", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
}

// TestE2EGateway: the OpenAI Go SDK through a gateway process to a worker process, then a
// graceful shutdown that lets a stream in progress finish.
func TestE2EGateway(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 6})
	c.startWorker("w1")
	gw, base := c.startGateway()
	sdk := sdkClient(t, base, gatewayKey)
	ctx := ctxT(t, 60*time.Second)

	resp, err := sdk.Responses.New(ctx, sdkParams("Say hello"))
	if err != nil {
		t.Fatal(err)
	}
	if want := codextest.Answer("Say hello", 6); resp.OutputText() != want {
		t.Errorf("output text %q, want %q", resp.OutputText(), want)
	}
	s := sdk.Responses.NewStreaming(ctx, sdkParams("stream it"))
	var text strings.Builder
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := s.Err(); err != nil || text.String() != codextest.Answer("stream it", 6) {
		t.Errorf("stream: %q, %v; want %q", text.String(), err, codextest.Answer("stream it", 6))
	}
	bad := sdkClient(t, base, "sk-wrong")
	var apiErr *openai.Error
	if _, err := bad.Responses.New(ctx, sdkParams("x")); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("wrong key: got %v, want 401", err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		r, err := http.Get(base + path)
		if err != nil || r.StatusCode != 200 {
			t.Errorf("GET %s: %v %v, want 200", path, r, err)
		}
		if r != nil {
			r.Body.Close()
		}
	}

	// SIGTERM while a stream runs: the stream finishes, new connections are refused, exit 0.
	slow := sdkParams("slow one")
	slow.Metadata = map[string]string{"sim_latency_ms": "1500"}
	s = sdk.Responses.NewStreaming(ctx, slow)
	if !s.Next() || s.Current().Type != "response.created" {
		t.Fatalf("slow stream: no response.created (%v)", s.Err())
	}
	_ = gw.cmd.Process.Signal(syscall.SIGTERM)
	testutil.WaitFor(t, 10*time.Second, "the gateway to begin its shutdown", func() bool {
		return strings.Contains(gw.out.String(), "shutting down")
	})
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("a new connection was accepted after SIGTERM")
	}
	text.Reset()
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := s.Err(); err != nil || text.String() != codextest.Answer("slow one", 6) {
		t.Errorf("stream across SIGTERM: %q, %v; want the whole answer", text.String(), err)
	}
	gw.waitExit(t, 20*time.Second)
	if gw.err != nil {
		t.Fatalf("gateway exit: %v", gw.err)
	}

	// One line per request with the fields operators filter on, and never a key.
	out := gw.out.String()
	if strings.Contains(out, gatewayKey) || strings.Contains(out, "sk-wrong") {
		t.Error("the gateway logged a client key")
	}
	var lines int
	for _, line := range strings.Split(out, "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "request" {
			continue
		}
		lines++
		for _, k := range []string{"request_id", "status", "code", "duration", "stream"} {
			if _, ok := l[k]; !ok {
				t.Errorf("request line %s has no %s", line, k)
			}
		}
	}
	if lines < 6 {
		t.Errorf("%d request lines, want one per request (at least 6):\n%s", lines, out)
	}
}

// TestE2EGatewayManyStreams opens 1,000 streams at once through one gateway process and checks
// every one completes with the right answer; it reports the gateway's resident memory per open
// stream. Not under the race detector: it caps a process at 8128 live goroutines, and its
// memory figures are not a gateway's.
//
//	go test -count=1 -run TestE2EGatewayManyStreams -v ./cmd/codexpool/
func TestE2EGatewayManyStreams(t *testing.T) {
	manyStreams(t, "streams", func(ctx context.Context, hc *http.Client, base, prompt string, opened func()) error {
		body := fmt.Sprintf(`{"input":%q,"stream":true}`, prompt)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+gatewayKey)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		var text strings.Builder
		sc := bufio.NewScanner(resp.Body)
		first, completed := true, false
		for sc.Scan() {
			data, isData := strings.CutPrefix(sc.Text(), "data: ")
			if !isData {
				continue
			}
			if first {
				first = false
				opened()
			}
			var ev struct{ Type, Delta string }
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				return err
			}
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.Delta)
			case "response.completed":
				completed = true
			case "error":
				return fmt.Errorf("error event %s", data)
			}
		}
		if want := codextest.Answer(prompt, 8); !completed || text.String() != want {
			return fmt.Errorf("got %q (completed %v), want %q", text.String(), completed, want)
		}
		return sc.Err()
	})
}

// manyStreams runs 1,000 concurrent streams through one gateway process (one worker and the
// simulator behind it, each answer taking 6 s): stream sends one (calling opened at its first
// frame) and checks its answer. Every stream must be open before any ends, and every one must
// succeed; the times and the gateway's memory per open stream are logged. Not under -race:
// the race detector caps live goroutines at 8128.
func manyStreams(t *testing.T, what string, stream func(ctx context.Context, hc *http.Client, base, prompt string, opened func()) error) {
	if raceEnabled {
		t.Skip("the race detector caps live goroutines at 8128; .ci/run runs this without -race")
	}
	const n = 1000
	c := newCluster(t, codextest.Options{Words: 8, Latency: 6 * time.Second})
	c.startWorker("w1", "CODEXPOOL_MAX_INFLIGHT=1100", "CODEXPOOL_LOG_LEVEL=warn")
	gw, base := c.startGateway("CODEXPOOL_LOG_LEVEL=info")
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx := ctxT(t, 2*time.Minute)
	// Warm up (the HTTP server, NATS, a pooled socket), then take the baseline.
	if err := stream(ctx, hc, base, "warm-up", func() {}); err != nil {
		t.Fatal(err)
	}
	idle := bench.RSS(gw.cmd.Process.Pid)

	var open, done atomic.Int64
	plateau := make(chan struct{})
	var once sync.Once
	errs := make(chan error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := stream(ctx, hc, base, fmt.Sprintf("stream %d", i), func() {
				if open.Add(1) == n {
					once.Do(func() { close(plateau) })
				}
			})
			done.Add(1)
			errs <- err
		})
	}
	var peak int64
	select {
	case <-plateau:
		peak = bench.RSS(gw.cmd.Process.Pid)
		if d := done.Load(); d > 0 {
			t.Errorf("%d streams had ended before all %d were open: they did not all run at once", d, n)
		}
	case <-ctx.Done():
		t.Fatalf("only %d of %d streams opened", open.Load(), n)
	}
	opened := time.Since(start)
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if failed < 5 {
				t.Errorf("stream: %v", err)
			}
			failed++
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d %s failed", failed, n, what)
	}
	t.Logf("%d concurrent %s through one gateway: all open after %s, all complete after %s", n, what, opened.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("gateway RSS: %.1f MiB idle, %.1f MiB with %d streams open: %.1f KiB per open stream",
		float64(idle)/(1<<20), float64(peak)/(1<<20), n, float64(peak-idle)/n/1024)
}

// TestE2EGatewayBackground: "background": true through the OpenAI Go SDK becomes a durable job;
// GET /v1/responses/{id} (the SDK's Responses.Get) returns it queued, then completed.
func TestE2EGatewayBackground(t *testing.T) {
	c, _, _ := newJobsCluster(t, codextest.Options{Words: 6, Latency: 300 * time.Millisecond})
	c.startWorker("w-bg", "CODEXPOOL_JOBS=on")
	_, base := c.startGateway()
	sdk := sdkClient(t, base, gatewayKey)
	ctx := ctxT(t, 60*time.Second)
	params := sdkParams("in the background")
	params.Background = openai.Bool(true)
	resp, err := sdk.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "queued" || resp.ID == "" {
		t.Fatalf("background create: status %q id %q, want queued with an id", resp.Status, resp.ID)
	}
	var got *responses.Response
	testutil.WaitFor(t, 30*time.Second, "the background response to complete", func() bool {
		r, err := sdk.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("get %s: %v", resp.ID, err)
		}
		got = r
		return r.Status == "completed"
	})
	if want := codextest.Answer("in the background", 6); got.OutputText() != want || got.ID != resp.ID {
		t.Errorf("completed background response %q (id %q), want %q (id %q)", got.OutputText(), got.ID, want, resp.ID)
	}
	if _, err := sdk.Responses.Get(ctx, "no-such-job", responses.ResponseGetParams{}); err == nil {
		t.Error("an unknown id answered without an error")
	}
}
