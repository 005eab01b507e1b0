package codextest

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestManySockets runs 1000 concurrent sockets (250 under the race detector, which makes each
// one far more expensive on a shared 2-core machine), each with a 1 s generation, and checks
// that every answer is right and that the server needs a bounded number of goroutines per socket
// (timers, not a goroutine per word or per response).
func TestManySockets(t *testing.T) {
	if testing.Short() {
		t.Skip("many sockets")
	}
	n := 1000
	if raceEnabled {
		n = 250
	}
	s := newServer(t, Options{Latency: time.Second, Words: 8})
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	errs := make(chan error, n)
	release := make(chan struct{})
	for i := range n {
		go func() {
			defer finished.Done()
			signalled := false
			defer func() {
				if !signalled {
					started.Done()
				}
			}()
			c, _, err := websocket.DefaultDialer.DialContext(ctx, s.URL, nil)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(3 * time.Minute))
			prompt := string(rune('a'+i%26)) + string(rune('a'+i/26%26))
			if err := c.WriteMessage(websocket.TextMessage, createFrame(prompt, nil)); err != nil {
				errs <- err
				return
			}
			var text strings.Builder
			for {
				e, err := readOne(c)
				if err != nil {
					errs <- err
					return
				}
				if !signalled {
					signalled = true
					started.Done()
					<-release
				}
				text.WriteString(e.Delta)
				if e.Type == "response.completed" {
					break
				}
			}
			if got, want := text.String(), Answer(prompt, 8); got != want {
				errs <- &mismatch{got, want}
			}
		}()
	}
	started.Wait()
	// Every socket is open and mid-response (or failed): count goroutines now.
	perSocket := float64(runtime.NumGoroutine()-before) / float64(n)
	t.Logf("%.2f goroutines per socket in flight", perSocket)
	close(release)
	finished.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One client goroutine per socket in this test, plus the server's reader and writer.
	if perSocket > 3.5 {
		t.Errorf("%.2f goroutines per socket while in flight, want <= 3.5", perSocket)
	}
	st := s.Stats()
	if st.Completed != int64(n) || st.PeakOpenSockets != int64(n) {
		t.Errorf("stats %+v, want %d completed, peak %d", st, n, n)
	}
	waitIdle(t, s)
}

type mismatch struct{ got, want string }

func (m *mismatch) Error() string { return "answer " + m.got + ", want " + m.want }

// lightEvent is the part of an event the scale test needs; decoding whole events into maps
// would dominate its cost.
type lightEvent struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
}

// readOne reads one event without testing.T, for goroutines.
func readOne(c *websocket.Conn) (lightEvent, error) {
	var e lightEvent
	_, data, err := c.ReadMessage()
	if err != nil {
		return e, err
	}
	return e, json.Unmarshal(data, &e)
}
