package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway/anthropic"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EGatewayManyAnthropicStreams opens 1,000 Anthropic Messages streams at once through one
// gateway process and checks every one completes (message_stop) with the simulator's answer; it
// reports the gateway's resident memory per open stream. Not under the race detector: it caps a
// process at 8128 live goroutines, and its memory figures are not a gateway's.
//
//	go test -count=1 -run TestE2EGatewayManyAnthropicStreams -v ./cmd/codexpool/
func TestE2EGatewayManyAnthropicStreams(t *testing.T) {
	manyStreams(t, "Anthropic streams", func(ctx context.Context, hc *http.Client, base, prompt string, opened func()) error {
		return messageStreamer{hc: hc, url: base + "/v1/messages"}.stream(ctx, prompt, opened)
	})
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
