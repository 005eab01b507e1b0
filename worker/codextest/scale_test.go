package codextest

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestManySockets runs 1000 concurrent sockets, each with a 1 s generation, and checks that every
// answer is right and that the server needs a bounded number of goroutines per socket (timers,
// not a goroutine per word or per response).
func TestManySockets(t *testing.T) {
	if testing.Short() {
		t.Skip("1000 sockets")
	}
	const n = 1000
	s := newServer(t, Options{Latency: time.Second, Words: 8})
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			prompt := string(rune('a'+i%26)) + string(rune('a'+i/26%26))
			if err := c.WriteMessage(websocket.TextMessage, createFrame(prompt, nil)); err != nil {
				errs <- err
				return
			}
			var evs []event
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
				evs = append(evs, e)
				if e.typ() == "response.completed" {
					break
				}
			}
			if got, want := textOf(evs), Answer(prompt, 8); got != want {
				errs <- &mismatch{got, want}
			}
		}()
	}
	started.Wait()
	// Every socket is open and mid-response (or failed): count goroutines now.
	perSocket := float64(runtime.NumGoroutine()-before) / n
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
	if st.Completed != n || st.PeakOpenSockets != n {
		t.Errorf("stats %+v, want %d completed, peak %d", st, n, n)
	}
	waitIdle(t, s)
}

type mismatch struct{ got, want string }

func (m *mismatch) Error() string { return "answer " + m.got + ", want " + m.want }

// readOne is readEvent without testing.T, for goroutines.
func readOne(c *websocket.Conn) (event, error) {
	_, data, err := c.ReadMessage()
	if err != nil {
		return event{}, err
	}
	var e event
	e.raw = data
	return e, jsonUnmarshal(data, &e.m)
}
