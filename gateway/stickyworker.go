package gateway

import (
	"errors"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// maxWorkerHints bounds how many sessions the gateway remembers the worker of.
const maxWorkerHints = 10000

// workerHints remembers, per sticky session key (the session headers, else the body's
// prompt_cache_key), the worker that served the session's last request, so its next requests go
// to that worker's own subject while it is alive and has room (a full worker hands them back to
// the queue group; a gone one answers "no responders" and the request goes to the group). The
// session's account binding lives in JetStream, where every worker sees it; this is only a
// preference, so it lives in the gateway's memory.
type workerHints struct {
	mu sync.Mutex
	m  map[string]string // session key -> worker id
}

func (h *workerHints) get(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

func (h *workerHints) put(key, worker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]string{}
	}
	if _, known := h.m[key]; !known && len(h.m) >= maxWorkerHints {
		for k := range h.m { // forget an arbitrary half: a hint is only a preference
			if len(h.m) < maxWorkerHints/2 {
				break
			}
			delete(h.m, k)
		}
	}
	h.m[key] = worker
}

func (h *workerHints) forget(key, worker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[key] == worker {
		delete(h.m, key)
	}
}

// stickyKey is the session key of a pool request: its session headers, else its body's
// prompt_cache_key; "" for none.
func stickyKey(pb poolBody, hdr nats.Header) string {
	if k := schemas.SessionKey(hdr.Get); k != "" {
		return k
	}
	if pb.cacheKey != "" {
		return "cache\x00" + pb.cacheKey
	}
	return ""
}

// onStickyWorker runs call on the worker the session of body and hdr used last, when there is
// one, and again on the queue group when that worker is gone or refused it before anything
// reached the client (started reports whether something did); it remembers the worker that
// answered. call gets the client to use.
func (g *Gateway) onStickyWorker(pb poolBody, hdr nats.Header, started func() bool,
	call func(*client.Client) (*client.Reply, error)) (*client.Reply, error) {
	key := stickyKey(pb, hdr)
	if key == "" {
		return call(g.cl)
	}
	if w := g.hints.get(key); w != "" {
		reply, err := call(g.cl.OnWorker(w))
		if err == nil || started() || !workerUnavailable(err) {
			g.learnWorker(key, reply, err)
			return reply, err
		}
		g.hints.forget(key, w)
	}
	reply, err := call(g.cl)
	g.learnWorker(key, reply, err)
	return reply, err
}

func (g *Gateway) learnWorker(key string, reply *client.Reply, err error) {
	if err == nil && reply != nil && reply.Worker != "" {
		g.hints.put(key, reply.Worker)
	}
}

// workerUnavailable reports whether err says the worker did not take the request: nobody serves
// its subject any more, or it is full or shutting down.
func workerUnavailable(err error) bool {
	if errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	e, ok := schemas.AsError(err)
	return ok && (e.Code == schemas.CodeWorkerBusy || e.Code == schemas.CodeUnavailable)
}
