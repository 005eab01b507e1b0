package codex

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codexpool/codexpool/internal/origintext"
	"github.com/gorilla/websocket"
)

// Socket states. A socket is leased while a generation (or its dial) owns it, idle while it waits
// in the pool, and dead once it is closed or condemned.
const (
	stateLeased int32 = iota
	stateIdle
	stateDead
)

// frameBuffer is how many received frames wait for the generation that reads them.
const frameBuffer = 32

// closeWait bounds the polite close frame on a socket we end ourselves.
const closeWait = 250 * time.Millisecond

// errSocketClosed is the reader's error when we closed the socket ourselves.
var errSocketClosed = errors.New("codex: socket closed")

type message struct {
	typ  int
	data []byte
}

// conn is one upstream socket. Its reader goroutine runs for the socket's whole life, so pings are
// answered and an idle socket that the origin closes or writes to is noticed at once. gorilla
// allows one concurrent writer: only the generation that leases the socket writes data frames;
// control frames (pongs, close) are safe concurrently.
type conn struct {
	c      *Client
	ws     *websocket.Conn
	id     string
	born   time.Time
	redact origintext.Redactor // the credentials the socket was opened with: what the origin could echo
	pin    *Pin                // the session the socket is reserved for; nil = pooled (set by its generation)

	state     atomic.Int32
	ended     atomic.Bool // the reader has stopped reading (set before it looks at state)
	idleSince time.Time   // guarded by Client.mu

	frames  chan message  // closed by the reader when it ends
	readErr error         // why the reader ended; written before frames is closed
	closing chan struct{} // closed by close: the reader stops delivering
	once    sync.Once
}

func (c *Client) newConn(ws *websocket.Conn, id string, red origintext.Redactor) *conn {
	cn := &conn{c: c, ws: ws, id: id, born: time.Now(), redact: red,
		frames: make(chan message, frameBuffer), closing: make(chan struct{})}
	c.open.Add(1)
	c.wg.Add(1) // legal: the generation dialling this socket holds a count
	go cn.read()
	return cn
}

func (cn *conn) read() {
	defer cn.c.wg.Done()
	defer close(cn.frames)
	for {
		typ, data, err := cn.ws.ReadMessage()
		if err != nil {
			cn.readErr = err
			// release checks ended after making the socket idle: one of the two cleans up.
			cn.ended.Store(true)
			if cn.state.CompareAndSwap(stateIdle, stateDead) {
				cn.c.log.Debug("codex: idle socket ended", "socket", cn.id, "err", err)
				cn.c.forget(cn)
				cn.close(false)
			} else if cn.state.CompareAndSwap(statePinned, stateDead) {
				cn.c.log.Debug("codex: pinned socket ended", "socket", cn.id, "err", err)
				cn.c.unpin(cn)
				cn.close(false)
			}
			return
		}
		if cn.state.Load() == stateIdle {
			if typ == websocket.TextMessage && isRateLimitsFrame(data) {
				continue
			}
			if cn.state.CompareAndSwap(stateIdle, stateDead) {
				cn.c.log.Debug("codex: unexpected frame on an idle socket", "socket", cn.id)
				cn.c.forget(cn)
				cn.close(false)
				continue // the next read fails on the closed socket
			}
		}
		select {
		case cn.frames <- message{typ, data}:
		case <-cn.closing:
			cn.readErr = errSocketClosed
			return
		}
	}
}

// close ends the socket once. polite sends a normal Close frame first.
func (cn *conn) close(polite bool) {
	cn.once.Do(func() {
		cn.state.Store(stateDead)
		close(cn.closing)
		if polite {
			_ = cn.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(closeWait))
		}
		_ = cn.ws.Close()
		cn.c.open.Add(-1)
		cn.c.log.Debug("codex: socket closed", "socket", cn.id, "age", time.Since(cn.born))
	})
}

// drainHealthy consumes frames that arrived while the socket was not in use and reports whether
// the socket may carry a new response: stale rate-limit events are fine, anything else is not.
func (cn *conn) drainHealthy() bool {
	for {
		select {
		case f, ok := <-cn.frames:
			if !ok || f.typ != websocket.TextMessage || !isRateLimitsFrame(f.data) {
				return false
			}
		default:
			return true
		}
	}
}
