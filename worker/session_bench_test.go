package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/codexpool/codexpool/schemas/validate"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

// BenchmarkSessionConversation runs one 10-turn conversation per op through a worker and the
// in-process simulator (40-word answers): "continued" sends each turn's new item with
// previous_response_id in a session (one reserved socket), "full" resends the whole conversation
// every turn on pooled sockets. upstream-B/conv is what the worker sent the origin per
// conversation, turn10-B the last turn's frame.
func BenchmarkSessionConversation(b *testing.B) {
	for _, mode := range []string{"continued", "full"} {
		b.Run(mode, func(b *testing.B) {
			sim := codextest.NewServer(codextest.Options{Words: 40})
			defer sim.Close()
			w, err := worker.New(worker.Config{ID: "bench", URL: sim.URL, Token: "tok-123456789"}, worker.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				conversation(ctx, b, w, fmt.Sprintf("s%d", i), mode == "continued")
			}
			st, turns := sim.Stats(), sim.Turns()
			b.ReportMetric(float64(st.FrameBytes)/float64(b.N), "upstream-B/conv")
			b.ReportMetric(float64(turns[len(turns)-1].Bytes), "turn10-B")
		})
	}
}

// conversation runs 10 turns of session sid, continued or resent in full.
func conversation(ctx context.Context, b *testing.B, w *worker.Worker, sid string, continued bool) {
	var items []json.RawMessage
	prev := ""
	for t := range 10 {
		user, _ := json.Marshal(map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": fmt.Sprintf("turn %d: go on", t)}}})
		items = append(items, user)
		body := map[string]any{"input": items}
		if continued {
			body["input"] = []json.RawMessage{user}
			if prev != "" {
				body["previous_response_id"] = prev
			}
		}
		raw, _ := json.Marshal(body)
		r, err := validate.SessionRequest(raw)
		if err != nil {
			b.Fatal(err)
		}
		if continued {
			r.Session = sid
		}
		out, err := w.Generate(ctx, r, nil)
		if err != nil {
			b.Fatal(err)
		}
		var resp struct {
			ID     string            `json:"id"`
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			b.Fatal(err)
		}
		prev, items = resp.ID, append(items, resp.Output...)
	}
}
