package codex

import (
	"bytes"
	"context"
	"io"
	"sort"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// readEvents runs readStream over body as an HTTP generation would and returns the events
// handed to onEvent, the result and the error.
func readEvents(body io.Reader) ([]Event, *Result, error) {
	c := &Client{cfg: Config{IdleTimeout: time.Minute}}
	var evs []Event
	res := &Result{}
	err := c.readStream(context.Background(), io.NopCloser(body), origintext.NewRedactor(fuzzToken, fuzzAccount), func(ev Event) error {
		evs = append(evs, Event{Type: ev.Type, Data: append([]byte(nil), ev.Data...)})
		return nil
	}, res)
	return evs, res, err
}

// TestSSEFraming: line endings, comments, multi-line data, a BOM, unnamed events and data split
// across reads all give the same events.
func TestSSEFraming(t *testing.T) {
	created := `{"type":"response.created","response":{"id":"r"}}`
	done := `{"type":"response.completed","response":{"id":"r","output":[]}}`
	for _, tc := range []struct {
		name, body string
	}{
		{"lf", "event: response.created\ndata: " + created + "\n\nevent: response.completed\ndata: " + done + "\n\n"},
		{"crlf", "event: response.created\r\ndata: " + created + "\r\n\r\ndata: " + done + "\r\n\r\n"},
		{"cr", "data: " + created + "\r\rdata: " + done + "\r\r"},
		{"bom and comments", "\ufeff: keep-alive\n\n: hi\ndata: " + created + "\n\nretry: 5\nid: 1\ndata: " + done + "\n\n"},
		{"data over two lines", "data: {\"type\":\"response.created\",\ndata: \"response\":{\"id\":\"r\"}}\n\ndata: " + done + "\n\n"},
		{"no space after colon", "data:" + created + "\n\ndata:" + done + "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.body), iotest.OneByteReader(strings.NewReader(tc.body))} {
				evs, res, err := readEvents(r)
				if err != nil {
					t.Fatalf("got %v", err)
				}
				var types []string
				for _, e := range evs {
					types = append(types, e.Type)
				}
				if strings.Join(types, ",") != "response.created,response.completed" || res.Response == nil {
					t.Errorf("events %v, response %s", types, res.Response)
				}
			}
		})
	}
}

func TestSSEEndsEarly(t *testing.T) {
	for _, body := range []string{
		"",
		"data: {\"type\":\"response.created\"}\n\n",
		"data: {\"type\":\"response.created\"}\n\ndata: {\"type\":\"response.completed\",\"resp", // cut mid-event
	} {
		_, _, err := readEvents(strings.NewReader(body))
		e := wantError(t, err, 502, schemas.CodeUpstreamError)
		if !strings.Contains(e.Message, "before a terminal event") {
			t.Errorf("%q: message %q", body, e.Message)
		}
	}
}

// FuzzSSE feeds arbitrary bytes to the HTTP stream reader: it never panics, hands onEvent only
// JSON objects whose data came from the stream (redacted), returns success only after
// response.completed and otherwise a contract error, and gives the same events whether the body
// arrives whole or one byte per read.
func FuzzSSE(f *testing.F) {
	seed := "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n" +
		"data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi " + fuzzToken + "\"}\n\n" +
		"data: {\"type\":\"codex.rate_limits\"}\n\n" +
		"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[]}}\n\n"
	for _, s := range []string{
		seed, strings.ReplaceAll(seed, "\n", "\r\n"), strings.ReplaceAll(seed, "\n", "\r"),
		"data: {\"type\":\"error\",\"status\":429,\"error\":{\"type\":\"usage_limit_reached\",\"resets_in_seconds\":5}}\n\n",
		"data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"x\",\"message\":\"" + fuzzAccount + "\"}}}\n\n",
		"data: null\n\n", "data: [1]\n\n", "data: {\"type\":7}\n\n", ":\n\n\n", "data\n\n", "\ufeffdata: {}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, res, err := readEvents(bytes.NewReader(body))
		for _, e := range evs {
			if typ, terr := eventType(e.Data); terr != nil || typ != e.Type || typ == typeRateLimits {
				t.Fatalf("onEvent got %q (type %q): not a dispatchable event", e.Data, e.Type)
			}
			if bytes.Contains(e.Data, []byte(fuzzToken)) || bytes.Contains(e.Data, []byte(fuzzAccount)) {
				t.Fatalf("event %q carries a credential", e.Data)
			}
		}
		if err == nil {
			if len(evs) == 0 || evs[len(evs)-1].Type != typeCompleted || res.Response == nil {
				t.Fatalf("success without response.completed: %d events", len(evs))
			}
		} else {
			se, ok := schemas.AsError(err)
			if !ok {
				t.Fatalf("error %T %v is not a contract error", err, err)
			}
			checkError(t, "readStream", se)
		}
		evs2, _, err2 := readEvents(iotest.OneByteReader(bytes.NewReader(body)))
		if (err == nil) != (err2 == nil) || len(evs) != len(evs2) {
			t.Fatalf("whole: %d events, %v; one byte at a time: %d events, %v", len(evs), err, len(evs2), err2)
		}
		for i := range evs {
			if !bytes.Equal(evs[i].Data, evs2[i].Data) {
				t.Fatalf("event %d differs when read one byte at a time", i)
			}
		}
	})
}

// BenchmarkTransport runs one-shot generations against a zero-latency simulator over a pooled
// WebSocket, a new WebSocket per generation, and HTTP streaming (keep-alive), side by side, and
// reports each one's median latency.
func BenchmarkTransport(b *testing.B) {
	for _, tc := range []struct {
		name    string
		noReuse bool
		http    bool
	}{
		{"ws-pooled", false, false},
		{"ws-new-socket", true, false},
		{"http", false, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := newSim(b, codextest.Options{WSOff: tc.http})
			c := newClient(b, srv, Config{NoReuse: tc.noReuse, WSRetryAfter: time.Hour})
			frame := createFrame("benchmark prompt", nil)
			ctx := context.Background()
			if _, err := c.Generate(ctx, frame, nil); err != nil { // the 426 and the first connection
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				res, err := c.Generate(ctx, frame, nil)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if res.HTTP != tc.http {
					b.Fatalf("HTTP = %v, want %v", res.HTTP, tc.http)
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
