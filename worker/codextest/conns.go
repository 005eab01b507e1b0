package codextest

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// A connTable is what a Server must close or wait for: its goroutines, its HTTP connections, its
// upgraded sockets (and hung upgrades) and its HTTP streams in flight, with the count of open
// sockets. Every exchange takes an epoch when it starts; closeClients moves the epoch on, so an
// exchange can tell a drop by the server from a client that went away.
type connTable struct {
	wg sync.WaitGroup // Serve, live HTTP connections, origin handlers and their sessions

	mu      sync.Mutex
	closed  bool
	http    map[net.Conn]struct{} // accepted, not yet hijacked or closed
	sockets map[net.Conn]struct{} // hijacked: upgraded sockets and hung upgrades
	streams map[*stream]struct{}  // HTTP streams in flight
	open    int64                 // sockets upgraded or being upgraded, not yet closed
	peak    int64
	drops   uint64    // closeClients calls, to catch sockets mid-upgrade
	closing broadcast // whenever a socket is unregistered
}

func newConnTable() *connTable {
	return &connTable{
		http:    make(map[net.Conn]struct{}),
		sockets: make(map[net.Conn]struct{}),
		streams: make(map[*stream]struct{}),
	}
}

// connState accounts for the HTTP server's connection goroutines so Close can wait for them,
// as httptest does.
func (t *connTable) connState(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateNew:
		if t.closed {
			c.Close()
			return
		}
		t.http[c] = struct{}{}
		t.wg.Add(1)
	case http.StateHijacked, http.StateClosed:
		if _, ok := t.http[c]; ok {
			delete(t.http, c)
			t.wg.Done()
		}
	}
}

// shut marks the table closed; false if it already was.
func (t *connTable) shut() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.closed = true
	return true
}

// closeClients drops every socket, hung upgrade and HTTP stream: a TCP close, no Close frame.
func (t *connTable) closeClients() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drops++ // sockets between their 101 and register see this and close themselves
	for c := range t.sockets {
		c.Close()
	}
	for st := range t.streams {
		close(st.drop)
		delete(t.streams, st)
	}
}

// enter starts an exchange (an upgrade or an HTTP stream), held in wg until leave; false once
// the server is closed. The HTTP connection's own count is held, so this never races Close's
// Wait.
func (t *connTable) enter() (epoch uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, false
	}
	t.wg.Add(1)
	return t.drops, true
}

func (t *connTable) leave() { t.wg.Done() }

// ended reports whether the server ended exchanges begun at epoch: Close, or closeClients since.
func (t *connTable) ended(epoch uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.endedLocked(epoch)
}

func (t *connTable) endedLocked(epoch uint64) bool { return t.closed || t.drops != epoch }

// openRefusal is why openSocket refused, if it did.
type openRefusal uint8

const (
	openOK      openRefusal = iota
	openFull                // maxConns sockets are open
	openLimited             // allow said no
)

// openSocket counts a socket about to be upgraded as open, unless maxConns (0 = no cap) are
// open already or allow, asked only when there is room, refuses. The socket counts as open
// before the 101 goes out, so a client that has seen its upgrade succeed finds it in Stats.
func (t *connTable) openSocket(maxConns int, allow func() bool) openRefusal {
	t.mu.Lock()
	defer t.mu.Unlock()
	if maxConns > 0 && t.open >= int64(maxConns) {
		return openFull
	}
	if !allow() {
		return openLimited
	}
	t.open++
	t.peak = max(t.peak, t.open)
	return openOK
}

// register records an upgraded socket (already counted open) so it can be dropped; false if the
// server closed, or closeClients ran, since the upgrade began at epoch.
func (t *connTable) register(nc net.Conn, epoch uint64) bool { return addLive(t, t.sockets, nc, epoch) }

// addLive adds k to set, one of t's, unless the server has ended exchanges begun at epoch.
func addLive[K comparable](t *connTable, set map[K]struct{}, k K, epoch uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.endedLocked(epoch) {
		return false
	}
	set[k] = struct{}{}
	return true
}

// unregister forgets a socket (nc nil: one that never registered) and counts it closed.
func (t *connTable) unregister(nc net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if nc != nil {
		delete(t.sockets, nc)
	}
	t.open--
	t.closing.notify()
}

// forget drops a hung upgrade's connection from the table; it was never counted open.
func (t *connTable) forget(nc net.Conn) {
	t.mu.Lock()
	delete(t.sockets, nc)
	t.mu.Unlock()
}

// addStream records an HTTP stream begun at epoch; false if the server has ended it already.
func (t *connTable) addStream(st *stream, epoch uint64) bool { return addLive(t, t.streams, st, epoch) }

func (t *connTable) removeStream(st *stream) {
	t.mu.Lock()
	delete(t.streams, st)
	t.mu.Unlock()
}

// counts returns the open and peak socket counts.
func (t *connTable) counts() (open, peak int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open, t.peak
}

// resetPeak restarts the peak from the sockets open now.
func (t *connTable) resetPeak() {
	t.mu.Lock()
	t.peak = t.open
	t.mu.Unlock()
}

// waitOpen waits until at most n sockets are open, or ctx ends.
func (t *connTable) waitOpen(ctx context.Context, n int64) error {
	return waitUntil(ctx, &t.mu, &t.closing, func() bool { return t.open <= n })
}
