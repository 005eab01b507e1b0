package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/codexpool/codexpool/worker/codextest"
)

// wsConn is a client of the gateway's WebSocket route.
type wsConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialGatewayWS(t *testing.T, base string) *wsConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/responses"
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + gatewayKey}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", url, err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return &wsConn{t: t, ws: ws}
}

// turn sends body as a response.create and returns the response object of its
// response.completed.
func (c *wsConn) turn(body []byte) json.RawMessage {
	c.t.Helper()
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	m["type"] = "response.create"
	frame, _ := json.Marshal(m)
	_ = c.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
		c.t.Fatal(err)
	}
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		var ev struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		_ = json.Unmarshal(data, &ev)
		switch ev.Type {
		case "response.completed":
			return ev.Response
		case "response.failed", "response.incomplete", "error":
			c.t.Fatalf("turn ended with %s", data)
		}
	}
}

// TestE2ESessionOverGatewayWebSocket is the target 1: over the gateway's WebSocket, a
// 10-turn conversation with previous_response_id and only the new items completes on one
// upstream socket, and the bytes sent upstream per turn grow with the new items only.
func TestE2ESessionOverGatewayWebSocket(t *testing.T) {
	c := newCluster(t, codextest.Options{Words: 8})
	for i := 1; i <= 2; i++ {
		c.startWorker(fmt.Sprintf("ws-w%d", i))
	}
	_, base := c.startGateway()
	ws := dialGatewayWS(t, base)
	var cv convo
	prev := ""
	for i := 1; i <= 10; i++ {
		prev = cv.answered(t, ws.turn(cv.turn(fmt.Sprintf("turn %02d: go on", i), prev)))
	}
	turns := c.sim.Turns()
	if len(turns) != 10 {
		t.Fatalf("simulator got %d frames, want 10", len(turns))
	}
	for i, tr := range turns {
		if tr.Socket != turns[0].Socket || tr.Continued != (i > 0) || tr.InputItems != 2*i+1 {
			t.Errorf("turn %d: %+v, want it continued on socket %d with %d items", i+1, tr, turns[0].Socket, 2*i+1)
		}
	}
	// The same conversation resent in full, on a socket of its own.
	dialGatewayWS(t, base).turn(cv.full())
	all := c.sim.Turns()
	fullBytes, lastBytes := all[len(all)-1].Bytes, turns[9].Bytes
	t.Logf("upstream bytes per turn: %v; the same conversation resent in full: %d (%.1fx turn 10)",
		frameBytes(turns), fullBytes, float64(fullBytes)/float64(lastBytes))
	if lastBytes > turns[1].Bytes+16 || lastBytes*3 > fullBytes {
		t.Errorf("turn 10 sent %d bytes (turn 2: %d, full resend %d): want about turn 2's, far below the full resend", lastBytes, turns[1].Bytes, fullBytes)
	}
}

func frameBytes(turns []codextest.Turn) []int {
	out := make([]int, len(turns))
	for i, tr := range turns {
		out[i] = tr.Bytes
	}
	return out
}
