package codextest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestFullEventSequence(t *testing.T) {
	s := newServer(t, Options{Words: 3})
	c := mustDial(t, s)
	send(t, c, createFrame("Say hello", nil))
	evs := readResponse(t, c)

	want := []string{
		"response.created", "response.in_progress", "response.output_item.added",
		"response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.delta", "response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed",
	}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("event types\n got %v\nwant %v", got, want)
	}
	for i, e := range evs {
		if got := e.m["sequence_number"].(float64); got != float64(i) {
			t.Errorf("event %d (%s) sequence_number %v, want %d", i, e.typ(), got, i)
		}
	}
	answer := Answer("Say hello", 3)
	if got := textOf(evs); got != answer {
		t.Errorf("deltas concatenate to %q, want Answer %q", got, answer)
	}
	words := strings.Fields(strings.TrimPrefix(answer, AnswerPrefix))
	for i, e := range evs[4:7] {
		want := AnswerPrefix + words[i]
		if i > 0 {
			want = " " + words[i]
		}
		if got := e.get("delta"); got != want {
			t.Errorf("delta %d = %q, want %q", i, got, want)
		}
	}

	created := evs[0]
	respID, _ := created.get("response.id").(string)
	if !strings.HasPrefix(respID, "resp_") {
		t.Errorf("response.id %q, want resp_ prefix", respID)
	}
	checks := []struct {
		ev   int
		path string
		want any
	}{
		{0, "response.object", "response"},
		{0, "response.status", "in_progress"},
		{0, "response.model", "gpt-5.1-codex"},
		{1, "response.status", "in_progress"},
		{2, "output_index", 0.0},
		{2, "item.type", "message"},
		{2, "item.role", "assistant"},
		{2, "item.status", "in_progress"},
		{3, "part.type", "output_text"},
		{3, "content_index", 0.0},
		{4, "output_index", 0.0},
		{4, "content_index", 0.0},
		{7, "text", answer},
		{8, "part.text", answer},
		{9, "item.status", "completed"},
		{9, "item.content.0.type", "output_text"},
		{9, "item.content.0.text", answer},
		{10, "response.id", respID},
		{10, "response.status", "completed"},
		{10, "response.output.0.content.0.text", answer},
		{10, "response.usage.input_tokens", 2.0},
		{10, "response.usage.output_tokens", 3.0},
		{10, "response.usage.total_tokens", 5.0},
	}
	for _, ck := range checks {
		if got := evs[ck.ev].get(ck.path); got != ck.want {
			t.Errorf("%s: %s = %#v, want %#v", evs[ck.ev].typ(), ck.path, got, ck.want)
		}
	}
	if out, ok := created.get("response.output").([]any); !ok || len(out) != 0 {
		t.Errorf("response.created output = %#v, want []", created.get("response.output"))
	}
	itemID := evs[2].get("item.id")
	for _, i := range []int{3, 4, 5, 6, 7, 8} {
		if got := evs[i].get("item_id"); got != itemID {
			t.Errorf("%s item_id %v, want %v", evs[i].typ(), got, itemID)
		}
	}
	if _, ok := evs[10].m["response"].(map[string]any)["output_text"]; ok {
		t.Error("response.completed carries output_text; the origin never sends it")
	}

	st := s.Stats()
	if st.Responses != 1 || st.Completed != 1 || st.UpgradesAccepted != 1 || st.OpenSockets != 1 {
		t.Errorf("stats %+v, want 1 response, 1 completed, 1 upgrade, 1 open socket", st)
	}
}

func TestStringInputAndV1Path(t *testing.T) {
	s := newServer(t, Options{})
	url := strings.Replace(s.URL, OriginPath, "/v1/responses", 1)
	c, _, err := dial(t, url, nil)
	if err != nil {
		t.Fatalf("dial /v1/responses: %v", err)
	}
	send(t, c, []byte(`{"type":"response.create","input":"plain string"}`))
	evs := readResponse(t, c)
	if got, want := textOf(evs), Answer("plain string", DefaultWords); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if got := evs[len(evs)-1].get("response.model"); got != "gpt-5.1-codex" {
		t.Errorf("default model %v, want gpt-5.1-codex", got)
	}
}

func TestUnknownFramesIgnored(t *testing.T) {
	s := newServer(t, Options{Words: 2})
	c := mustDial(t, s)
	send(t, c, []byte(`{"type":"response.processed","response_id":"resp_x"}`))
	c.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3})
	send(t, c, createFrame("after noise", nil))
	e := readEvent(t, c)
	if e.typ() != "response.created" {
		t.Fatalf("first event after unknown frames: %s, want response.created", e.raw)
	}
	evs := append([]event{e}, readResponse(t, c)...)
	if got := textOf(evs); got != Answer("after noise", 2) {
		t.Errorf("answer %q, want %q", got, Answer("after noise", 2))
	}
}

func TestBadClientFrameGetsErrorEvent(t *testing.T) {
	s := newServer(t, Options{})
	c := mustDial(t, s)
	send(t, c, []byte(`not json`))
	e := readEvent(t, c)
	if e.typ() != "error" || e.get("status") != 400.0 {
		t.Fatalf("got %s, want an error event with status 400", e.raw)
	}
	send(t, c, createFrame("x", map[string]string{"sim_words": "zero"}))
	e = readEvent(t, c)
	if e.typ() != "error" || !strings.Contains(e.get("error.message").(string), "sim_words") {
		t.Fatalf("got %s, want an error naming sim_words", e.raw)
	}
	if st := s.Stats(); st.Responses != 0 {
		t.Errorf("Responses %d, want 0: refused frames start nothing", st.Responses)
	}
}

func TestWarmupGenerateFalse(t *testing.T) {
	s := newServer(t, Options{})
	c := mustDial(t, s)
	send(t, c, []byte(`{"type":"response.create","input":"x","generate":false}`))
	evs := readResponse(t, c)
	want := []string{"response.created", "response.in_progress", "response.completed"}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("warm-up events %v, want %v", got, want)
	}
	if out := evs[2].get("response.output").([]any); len(out) != 0 {
		t.Errorf("warm-up output %v, want empty", out)
	}
}

func TestConcurrentCreateGetsBusyError(t *testing.T) {
	s := newServer(t, Options{Words: 4, Latency: 300 * time.Millisecond})
	c := mustDial(t, s)
	send(t, c, createFrame("first", nil))
	if e := readEvent(t, c); e.typ() != "response.created" {
		t.Fatalf("got %s, want response.created", e.raw)
	}
	send(t, c, createFrame("second", nil))

	var evs []event
	busy := 0
	for {
		e := readEvent(t, c)
		if e.typ() == "error" {
			if got := e.get("error.code"); got != "conversation_already_has_active_response" {
				t.Fatalf("error event %s, want code conversation_already_has_active_response", e.raw)
			}
			if e.get("status") != 400.0 {
				t.Errorf("busy error status %v, want 400", e.get("status"))
			}
			busy++
			continue
		}
		evs = append(evs, e)
		if e.typ() == "response.completed" {
			break
		}
	}
	if busy != 1 {
		t.Errorf("got %d busy errors, want 1", busy)
	}
	if got, want := textOf(evs), Answer("first", 4); got != want {
		t.Errorf("first response text %q, want %q (undisturbed)", got, want)
	}
	st := s.Stats()
	if st.Responses != 1 || st.Completed != 1 || st.BusyRejected != 1 {
		t.Errorf("stats %+v, want 1 response, 1 completed, 1 busy", st)
	}
	// The socket is usable again afterwards.
	send(t, c, createFrame("third", nil))
	if got, want := textOf(readResponse(t, c)), Answer("third", 4); got != want {
		t.Errorf("next response %q, want %q", got, want)
	}
}

func TestReusedResponses(t *testing.T) {
	s := newServer(t, Options{Words: 2})
	a := mustDial(t, s)
	for i := range 3 {
		send(t, a, createFrame(fmt.Sprint("q", i), nil))
		if evs := readResponse(t, a); evs[len(evs)-1].typ() != "response.completed" {
			t.Fatalf("response %d ended with %s", i, evs[len(evs)-1].raw)
		}
	}
	b := mustDial(t, s)
	send(t, b, createFrame("other socket", nil))
	readResponse(t, b)

	st := s.Stats()
	if st.Responses != 4 || st.ReusedResponses != 2 || st.UpgradesAccepted != 2 {
		t.Errorf("stats %+v, want 4 responses, 2 reused, 2 upgrades", st)
	}
	if st.PeakOpenSockets != 2 {
		t.Errorf("PeakOpenSockets %d, want 2", st.PeakOpenSockets)
	}
}

func TestLatencyAndTTFT(t *testing.T) {
	tests := []struct {
		name           string
		opts           Options
		md             map[string]string
		firstDelta     time.Duration
		completedAfter time.Duration
	}{
		{"options", Options{Words: 4, Latency: 400 * time.Millisecond, TTFT: 150 * time.Millisecond}, nil, 150 * time.Millisecond, 400 * time.Millisecond},
		{"even spacing", Options{Words: 3, Latency: 400 * time.Millisecond}, nil, 100 * time.Millisecond, 400 * time.Millisecond},
		{"metadata", Options{}, map[string]string{"sim_latency_ms": "300", "sim_ttft_ms": "200", "sim_words": "5"}, 200 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.opts)
			c := mustDial(t, s)
			start := time.Now()
			send(t, c, createFrame("timing", tt.md))
			var first, completed time.Duration
			for completed == 0 {
				e := readEvent(t, c)
				switch e.typ() {
				case "response.output_text.delta":
					if first == 0 {
						first = time.Since(start)
					}
				case "response.completed":
					completed = time.Since(start)
				}
			}
			// Lower bounds only: a slow machine may be late, never early.
			if first < tt.firstDelta {
				t.Errorf("first delta after %v, want >= %v", first, tt.firstDelta)
			}
			if completed < tt.completedAfter {
				t.Errorf("completed after %v, want >= %v", completed, tt.completedAfter)
			}
		})
	}
}

func TestDeltaSchedule(t *testing.T) {
	tests := []struct {
		name string
		p    plan
		want []time.Duration // deltas, then completion
	}{
		{"instant", plan{words: 3}, []time.Duration{0, 0, 0, 0}},
		{"even", plan{latency: 400, words: 3}, []time.Duration{100, 200, 300, 400}},
		{"ttft", plan{latency: 1000, ttft: 400, words: 3}, []time.Duration{400, 600, 800, 1000}},
		{"ttft equals latency", plan{latency: 500, ttft: 500, words: 2}, []time.Duration{500, 500, 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for i := range tt.p.words {
				got = append(got, tt.p.deltaAt(i))
			}
			steps := buildSteps(tt.p, &genRequest{}, &turn{prompt: "p"}, "1", time.Unix(0, 0))
			got = append(got, steps[len(steps)-1].at)
			if !slices.Equal(got, tt.want) {
				t.Errorf("schedule %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPingAnswered(t *testing.T) {
	s := newServer(t, Options{Words: 1})
	c := mustDial(t, s)
	pong := make(chan string, 1)
	c.SetPongHandler(func(data string) error { pong <- data; return nil })
	if err := c.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	send(t, c, createFrame("p", nil))
	readResponse(t, c) // pongs are handled while reading
	select {
	case got := <-pong:
		if got != "are you there" {
			t.Errorf("pong %q, want the ping's payload", got)
		}
	default:
		t.Error("no pong before the response completed")
	}
}

func TestListen(t *testing.T) {
	s, err := Listen(":0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL, "ws://127.0.0.1:") || !strings.HasSuffix(s.URL, OriginPath) {
		t.Errorf("URL %q, want ws://127.0.0.1:PORT%s", s.URL, OriginPath)
	}
	mustDial(t, s)
	addr := strings.TrimPrefix(strings.TrimSuffix(s.URL, OriginPath), "ws://")
	if _, err := Listen(addr, Options{}); err == nil || !strings.HasPrefix(err.Error(), "codextest: ") {
		t.Errorf("Listen on a used address: %v, want a codextest: error", err)
	}
}
