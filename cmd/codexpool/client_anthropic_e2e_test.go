package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway/anthropic"
	"github.com/codexpool/codexpool/internal/bench"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EGatewayManyAnthropicStreams opens 1,000 Anthropic Messages streams at once through one
// gateway process and checks every one completes (message_stop) with the simulator's answer; it
// reports the gateway's resident memory per open stream. Not under the race detector: it caps a
// process at 8128 live goroutines, and its memory figures are not a gateway's.
//
//	go test -count=1 -run TestE2EGatewayManyAnthropicStreams -v ./cmd/codexpool/
func TestE2EGatewayManyAnthropicStreams(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector caps live goroutines at 8128; run without -race")
	}
	const n = 1000
	c := newCluster(t, codextest.Options{Words: 8, Latency: 6 * time.Second})
	c.startWorker("w1", "CODEXPOOL_MAX_INFLIGHT=1100", "CODEXPOOL_LOG_LEVEL=warn")
	gw, base := c.startGateway("CODEXPOOL_LOG_LEVEL=info")
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	ms := messageStreamer{hc: &http.Client{Transport: tr}, url: base + "/v1/messages"}

	ctx := ctxT(t, 2*time.Minute)
	if err := ms.stream(ctx, "warm-up", func() {}); err != nil {
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
			errs <- ms.stream(ctx, fmt.Sprintf("stream %d", i), func() {
				if open.Add(1) == n {
					once.Do(func() { close(plateau) })
				}
			})
			done.Add(1)
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
		t.Fatalf("%d of %d streams failed", failed, n)
	}
	t.Logf("%d concurrent Anthropic streams through one gateway: all open after %s, all complete after %s", n, opened.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("gateway RSS: %.1f MiB idle, %.1f MiB with %d streams open: %.1f KiB per open stream",
		float64(idle)/(1<<20), float64(peak)/(1<<20), n, float64(peak-idle)/n/1024)
}

// messageStreamer streams POST /v1/messages with "stream": true and checks the answer.
type messageStreamer struct {
	hc  *http.Client
	url string
}

// stream sends prompt, calls opened at the first frame, and checks the text deltas add up to
// the simulator's answer and the stream ends with message_stop.
func (ms messageStreamer) stream(ctx context.Context, prompt string, opened func()) error {
	body := fmt.Sprintf(`{"model":"claude-sonnet-5-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)
	want, err := anthropicAnswer([]byte(body), 8)
	if err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ms.url, strings.NewReader(body))
	req.Header.Set("X-Api-Key", gatewayKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := ms.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	first, stopped := true, false
	for sc.Scan() {
		data, isData := strings.CutPrefix(sc.Text(), "data: ")
		if !isData {
			continue
		}
		if first {
			first = false
			opened()
		}
		var f struct {
			Type  string
			Delta struct{ Type, Text string }
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			return err
		}
		switch {
		case f.Type == "content_block_delta" && f.Delta.Type == "text_delta":
			text.WriteString(f.Delta.Text)
		case f.Type == "message_stop":
			stopped = true
		case f.Type == "error":
			return fmt.Errorf("error frame %s", data)
		}
	}
	if !stopped || text.String() != want {
		return fmt.Errorf("got %q (message_stop %v), want %q", text.String(), stopped, want)
	}
	return sc.Err()
}

// anthropicAnswer is the simulator's answer to a /v1/messages body, as the gateway translates it.
func anthropicAnswer(body []byte, words int) (string, error) {
	tr, err := anthropic.Translate(body, anthropic.Options{})
	if err != nil {
		return "", fmt.Errorf("translate: %w", err)
	}
	return codextest.Answer(codextest.PromptOf(tr.Body), words), nil
}
