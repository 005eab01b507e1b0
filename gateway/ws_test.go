package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/worker/codextest"
)

// dialWS opens the gateway's WebSocket with hdr (the key added unless hdr sets Authorization).
func dialWS(t *testing.T, p *pool, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	if hdr == nil {
		hdr = http.Header{}
	}
	if _, ok := hdr["Authorization"]; !ok {
		hdr.Set("Authorization", "Bearer "+key)
	}
	url := "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/v1/responses"
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, hdr)
	if ws != nil {
		t.Cleanup(func() { ws.Close() })
	}
	return ws, resp, err
}

// wsTurn sends a response.create and returns the events up to the terminal one.
func wsTurn(t *testing.T, ws *websocket.Conn, frame map[string]any) []map[string]any {
	t.Helper()
	frame["type"] = "response.create"
	b, _ := json.Marshal(frame)
	_ = ws.SetWriteDeadline(time.Now().Add(waitTimeout))
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
	var evs []map[string]any
	for {
		_ = ws.SetReadDeadline(time.Now().Add(waitTimeout))
		_, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read after %d events: %v", len(evs), err)
		}
		var ev map[string]any
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		evs = append(evs, ev)
		switch ev["type"] {
		case "response.completed", "response.failed", "response.incomplete", "error":
			return evs
		}
	}
}

func userInput(text string) []any {
	return []any{map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": text}}}}
}

// completedID returns the response id of a turn that completed.
func completedID(t *testing.T, evs []map[string]any) string {
	t.Helper()
	last := evs[len(evs)-1]
	if last["type"] != "response.completed" {
		t.Fatalf("turn ended with %v, want response.completed", last)
	}
	id, _ := last["response"].(map[string]any)["id"].(string)
	return id
}

func TestWSConversationContinuesOnOneSocket(t *testing.T) {
	p := newPool(t, poolOptions{})
	ws, _, err := dialWS(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for i := range 10 {
		frame := map[string]any{"model": "gpt-5.1-codex", "input": userInput(fmt.Sprintf("turn %d", i)), "store": false}
		if prev != "" {
			frame["previous_response_id"] = prev
		}
		prev = completedID(t, wsTurn(t, ws, frame))
	}
	turns := p.sim.Turns()
	if len(turns) != 10 {
		t.Fatalf("simulator got %d frames, want 10", len(turns))
	}
	for i, tr := range turns {
		if tr.Socket != turns[0].Socket || tr.Continued != (i > 0) || tr.InputItems != 2*i+1 {
			t.Errorf("turn %d: %+v, want continued on socket %d with %d items", i+1, tr, turns[0].Socket, 2*i+1)
		}
	}
}

func TestWSErrorsKeepTheSocket(t *testing.T) {
	p := newPool(t, poolOptions{})
	ws, _, err := dialWS(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		frame  map[string]any
		status float64
		code   string
	}{
		{"unknown previous_response_id", map[string]any{"input": userInput("x"), "previous_response_id": "resp_nope"}, 400, "previous_response_not_found"},
		{"bad request", map[string]any{"input": 5}, 400, "invalid_request"},
		{"background", map[string]any{"input": "x", "background": true}, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := wsTurn(t, ws, tt.frame)
			last := evs[len(evs)-1]
			e, _ := last["error"].(map[string]any)
			if last["type"] != "error" || last["status"] != tt.status || e["code"] != tt.code {
				t.Errorf("got %v, want an error event %v %s", last, tt.status, tt.code)
			}
		})
	}
	completedID(t, wsTurn(t, ws, map[string]any{"input": userInput("full")}))
}

func TestWSUpgradeRefusals(t *testing.T) {
	p := newPool(t, poolOptions{})
	tests := []struct {
		name   string
		hdr    http.Header
		status int
	}{
		{"no key", http.Header{"Authorization": {""}}, http.StatusUnauthorized},
		{"wrong key", http.Header{"Authorization": {"Bearer sk-wrong"}}, http.StatusUnauthorized},
		{"cross-site origin", http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, resp, err := dialWS(t, p, tt.hdr)
			if err == nil || resp == nil || resp.StatusCode != tt.status {
				code := 0
				if resp != nil {
					code = resp.StatusCode
				}
				t.Errorf("got %d, %v; want a refused upgrade with %d", code, err, tt.status)
			}
		})
	}
}

func TestWSWithoutKeysRefusesForeignOrigin(t *testing.T) {
	p := newPool(t, poolOptions{noKeys: true})
	_, resp, err := dialWS(t, p, http.Header{"Authorization": {""}, "Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign origin without keys: %v, %v; want 403", resp, err)
	}
	ws, _, err := dialWS(t, p, http.Header{"Authorization": {""}, "Origin": {"http://localhost:3000"}})
	if err != nil {
		t.Fatalf("loopback origin without keys: %v", err)
	}
	completedID(t, wsTurn(t, ws, map[string]any{"input": userInput("hi")}))
}

func TestWSClientGoneCancelsTheTurn(t *testing.T) {
	p := newPool(t, poolOptions{sim: codextest.Options{Latency: time.Minute, TTFT: 10 * time.Millisecond}})
	ws, _, err := dialWS(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"type": "response.create", "input": userInput("long")})
	if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, _, err := ws.ReadMessage(); err != nil { // the response has begun upstream
		t.Fatal(err)
	}
	ws.Close()
	// The pool request is cancelled: the upstream response is abandoned long before its minute.
	if err := p.sim.WaitAborts(ctxT(t, waitTimeout), 1); err != nil {
		t.Fatalf("the upstream response was not abandoned after the client left: %v", err)
	}
}

// TestWSPings: the gateway pings an idle socket every KeepAlive, and closes one whose client
// answers no ping for three intervals (a client gone without a close); a client that answers
// keeps its socket and its session.
func TestWSPings(t *testing.T) {
	p := newPool(t, poolOptions{gw: gateway.Config{KeepAlive: 20 * time.Millisecond}})

	// A client that answers (gorilla's default ping handler sends the pong).
	ws, _, err := dialWS(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	pings := make(chan struct{}, 100)
	ws.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	readErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				readErr <- err
				return
			}
		}
	}()
	for i := range 10 { // 10 pings: over three intervals, so a pong-less socket would be gone
		select {
		case <-pings:
		case err := <-readErr:
			t.Fatalf("socket ended after %d pings although the client answered them: %v", i, err)
		case <-time.After(waitTimeout):
			t.Fatalf("ping %d did not come", i+1)
		}
	}

	// A client that reads but never answers: the gateway closes its socket.
	mute, _, err := dialWS(t, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	mute.SetPingHandler(func(string) error { return nil })
	_ = mute.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		_, _, err := mute.ReadMessage()
		if err == nil {
			continue
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the gateway kept a socket whose client answered no ping for %s", waitTimeout)
		}
		break // closed by the gateway
	}
	// The answering client's socket is still open.
	select {
	case err := <-readErr:
		t.Fatalf("the answering client's socket ended: %v", err)
	default:
	}
}
