package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/schemas/jsonobj"
)

// GET /v1/responses with a WebSocket upgrade: the Responses-over-WebSocket protocol of the Codex
// backend. The client sends response.create frames (a Responses create body plus "type"), one
// at a time, and gets each response's events as text frames, the same JSON as the SSE data
// lines. One socket is one session (the contract's "Sessions"): the gateway gives it a
// Codex-Session-Id, so its first turn makes a worker the owner and later turns reach that
// worker, where previous_response_id (with only the new items in input) continues on the
// upstream socket that made the previous response. Errors come as an "error" event in the
// origin's shape ({"type":"error","status":N,"error":{"type","code","message"}}), among them
// previous_response_not_found when the owner is gone; the socket stays open for the next turn.
// Keys and the loopback rules are those of the HTTP routes; a browser's cross-site upgrade
// (an Origin that is not the gateway's own host) is refused.

// wsFrameQueue is how many client frames wait while a response runs.
const wsFrameQueue = 8

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// serveWS upgrades r and serves the socket until the client closes it.
func (g *Gateway) serveWS(w http.ResponseWriter, r *http.Request, c call) outcome {
	up := websocket.Upgrader{
		CheckOrigin:       func(r *http.Request) bool { return !g.keys.now().keyed || sameOrigin(r) },
		EnableCompression: true,
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil { // the upgrader has answered with the reason
		return outcome{status: http.StatusBadRequest, code: schemas.CodeInvalidRequest, err: err.Error()}
	}
	ws.SetReadLimit(g.cfg.MaxBodyBytes)
	s := &wsSession{g: g, ws: ws, sess: g.cl.Session(""), owner: c.owner}
	turns := s.serve(r.Context())
	g.log.LogAttrs(context.Background(), slog.LevelDebug, "websocket closed", slog.String("request_id", c.id),
		slog.String("session", s.sess.ID()), slog.Int("turns", turns))
	o := ok(http.StatusSwitchingProtocols)
	o.stream = true
	return o
}

// sameOrigin reports whether r has no Origin (not a browser) or one naming r's own host.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// A wsSession is one downstream socket: its reader goroutine hands text frames to serve, which
// runs the turns one after another and owns every data write.
type wsSession struct {
	g     *Gateway
	ws    *websocket.Conn
	sess  *client.Session
	owner owner
}

// wsSilentPings is how many ping intervals (Config.KeepAlive) a client may leave unanswered:
// a socket that sent nothing, not even a pong, for that long is closed.
const wsSilentPings = 3

// serve runs the socket's turns until the client goes and returns how many ran.
func (s *wsSession) serve(parent context.Context) int {
	ctx, cancel := context.WithCancel(parent)
	frames := make(chan []byte, wsFrameQueue)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer cancel()
		s.read(ctx, frames)
	}()
	go func() {
		defer wg.Done()
		s.ping(ctx)
	}()
	defer func() {
		cancel()
		_ = s.ws.Close() // ends the reader
		wg.Wait()
	}()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case f := <-frames:
			if s.revoked() {
				return n
			}
			ran, alive := s.frame(ctx, f)
			if ran {
				n++
			}
			if !alive {
				return n
			}
		}
	}
}

// revoked reports whether the key that opened the socket is no longer accepted (revoked in the
// keys bucket, or the gateway now asks for keys); then it tells the client with a close frame
// (1008, policy violation), and the session ends before the next turn.
func (s *wsSession) revoked() bool {
	ks := s.g.keys.now()
	if !ks.keyed || ks.ring.match(s.owner) != nil {
		return false
	}
	msg := websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "gateway: the key was revoked")
	_ = s.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(s.g.cfg.WriteTimeout))
	return true
}

// ping sends a ping every Config.KeepAlive until ctx is done, so that proxies keep an idle
// socket open and a client that went away without a close is found (see read).
func (s *wsSession) ping(ctx context.Context) {
	t := time.NewTicker(s.g.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// WriteControl may run beside the turn's data writes (gorilla/websocket allows it).
			if s.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.g.cfg.WriteTimeout)) != nil {
				return
			}
		}
	}
}

// read passes the client's text frames to frames until the socket ends or ctx is done. Each
// read and each pong gives the client wsSilentPings ping intervals; after that much silence the
// read fails and the session ends (a client that went away without a close). The time the
// reader waits on a full frames queue does not count.
func (s *wsSession) read(ctx context.Context, frames chan<- []byte) {
	alive := func() { _ = s.ws.SetReadDeadline(time.Now().Add(wsSilentPings * s.g.cfg.KeepAlive)) }
	s.ws.SetPongHandler(func(string) error { alive(); return nil })
	for {
		alive()
		typ, data, err := s.ws.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.TextMessage {
			continue
		}
		select {
		case frames <- data:
		case <-ctx.Done():
			return
		}
	}
}

// frame handles one client frame: a response.create runs as a turn of the session (ran), anything
// else is ignored (response.processed and the like). alive is false once the client is gone.
func (s *wsSession) frame(ctx context.Context, data []byte) (ran, alive bool) {
	ms, isObj := jsonobj.Members(data)
	if !isObj || !json.Valid(data) {
		a := newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "", "gateway: a frame must be one JSON object")
		return false, s.writeError(a) == nil
	}
	var typ string
	if v, ok := jsonobj.Field(data, ms, "type"); ok {
		_ = json.Unmarshal(v, &typ)
	}
	if typ != "response.create" {
		return false, true
	}
	body := jsonobj.Without(data, ms, func(k, _ []byte) bool { return jsonobj.KeyIs(k, "type") })
	req, a := normalize(body)
	if a != nil {
		return false, s.writeError(a) == nil
	}
	if req.background {
		a := newAPIError(http.StatusBadRequest, schemas.CodeInvalidRequest, "background",
			`gateway: "background" is not supported over the WebSocket; use POST /v1/responses`)
		return false, s.writeError(a) == nil
	}
	return true, s.turn(ctx, req)
}

// turn runs one response of the session and relays its events; false when the client is gone.
func (s *wsSession) turn(ctx context.Context, req request) bool {
	ctx, cancel := context.WithTimeout(ctx, s.g.cfg.RequestTimeout)
	defer cancel()
	ctx, stop := s.g.whileConnected(ctx)
	defer stop()
	id, start := newRequestID(s.owner), time.Now()
	ctx, span := tracing.Start(ctx, "websocket turn", trace.WithAttributes(attribute.String("codexpool.request_id", id)))
	spanModel(ctx, req.model)
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderRequestID, id)
	var werr error
	_, err := s.sess.Stream(ctx, req.body, hdr, func(ev []byte) error {
		werr = s.write(ev)
		return werr
	})
	s.logTurn(span, id, start, err)
	if werr != nil {
		return false
	}
	if err == nil {
		return true
	}
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return false // the client went away
	}
	return s.writeError(s.g.poolError(ctx, err)) == nil
}

// logTurn writes the one line of a turn: a WebSocket turn is a request of its own.
func (s *wsSession) logTurn(span trace.Span, id string, start time.Time, err error) {
	code := "ok"
	if e, ok := schemas.AsError(err); ok {
		code = string(e.Code)
	} else if err != nil {
		code = "error"
	}
	span.SetAttributes(attribute.String("codexpool.code", code))
	span.End()
	s.g.log.LogAttrs(trace.ContextWithSpanContext(context.Background(), span.SpanContext()), slog.LevelInfo, "websocket turn", slog.String("request_id", id),
		slog.String("session", s.sess.ID()), slog.String("worker", s.sess.Worker()), slog.String("code", code),
		slog.Duration("duration", time.Since(start)))
}

// write sends one event frame, within Config.WriteTimeout.
func (s *wsSession) write(ev []byte) error {
	_ = s.ws.SetWriteDeadline(time.Now().Add(s.g.cfg.WriteTimeout))
	return s.ws.WriteMessage(websocket.TextMessage, ev)
}

// wsErrorEvent is an error as the origin sends it on a socket.
type wsErrorEvent struct {
	Type   string      `json:"type"`
	Status int         `json:"status"`
	Error  wsErrorBody `json:"error"`
}

type wsErrorBody struct {
	Type       string       `json:"type"`
	Code       schemas.Code `json:"code"`
	Message    string       `json:"message"`
	Param      string       `json:"param,omitempty"`
	RetryAfter int64        `json:"resets_in_seconds,omitempty"`
}

func (s *wsSession) writeError(a *apiError) error {
	ev := wsErrorEvent{Type: "error", Status: a.Status,
		Error: wsErrorBody{Type: a.Type, Code: a.Code, Message: a.Message, Param: a.Param}}
	if a.RetryAfter > 0 {
		ev.Error.RetryAfter = max(int64(a.RetryAfter/time.Second), 1)
	}
	b, _ := json.Marshal(ev)
	return s.write(b)
}
