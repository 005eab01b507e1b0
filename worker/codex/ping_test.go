package codex

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestIdlePooledSocketAnswersPings: the simulator sends no pings, so a minimal origin here
// completes one response, then pings the socket while it sits idle in the pool. The socket's
// reader answers, and the socket stays pooled (a ping is not an unexpected frame).
func TestIdlePooledSocketAnswersPings(t *testing.T) {
	pong := make(chan struct{})
	serverDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(serverDone)
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		done := `{"type":"response.completed","response":{"id":"r1","status":"completed","output":[]}}`
		if ws.WriteMessage(websocket.TextMessage, []byte(done)) != nil {
			return
		}
		ws.SetPongHandler(func(data string) error {
			if data == "are you there" {
				close(pong)
			}
			return nil
		})
		if ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)) != nil {
			return
		}
		for { // read until the client closes, so the pong handler runs
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	c, err := New(Config{URL: srv.URL, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(context.Background(), []byte(`{"type":"response.create"}`), nil); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	select {
	case <-pong:
	case <-time.After(5 * time.Second):
		t.Fatal("no pong from the idle pooled socket")
	}
	if st := c.Stats(); st.Idle != 1 || st.Discarded != 0 {
		t.Errorf("idle %d discarded %d after a ping, want 1 0", st.Idle, st.Discarded)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-serverDone
}
