package gateway

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/codexpool/codexpool/schemas"
)

// model is one entry of GET /v1/models, in the OpenAI shape.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func modelList(names []string) []byte {
	data := make([]model, len(names))
	for i, n := range names {
		data[i] = model{ID: n, Object: "model", OwnedBy: "codexpool"}
	}
	b, _ := json.Marshal(struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", data})
	return b
}

func (g *Gateway) getModel(w http.ResponseWriter, name string) outcome {
	for _, m := range g.cfg.Models {
		if m == name {
			b, _ := json.Marshal(model{ID: m, Object: "model", OwnedBy: "codexpool"})
			writeJSON(w, http.StatusOK, b)
			return ok(http.StatusOK)
		}
	}
	a := newAPIError(http.StatusNotFound, CodeNotFound, "model", fmt.Sprintf("gateway: the model %q is not in this gateway's list", name))
	a.write(w)
	return failed(a)
}

// healthz is the liveness probe: the process serves HTTP.
func (g *Gateway) healthz(w http.ResponseWriter, _ *http.Request) outcome {
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	return ok(http.StatusOK)
}

// readiness caches the /readyz verdict. The mutex is held during a check, so probes that arrive
// meanwhile wait for its verdict instead of each pinging NATS.
type readiness struct {
	mu      sync.Mutex
	checked time.Time
	ready   bool
	reason  string
}

// readyz answers 200 only while the NATS connection is up and at least one worker answers the
// micro ping of the codexpool service.
func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) outcome {
	ready, reason := g.checkReady(time.Now())
	if ready {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`))
		return ok(http.StatusOK)
	}
	b, _ := json.Marshal(map[string]string{"status": "unavailable", "reason": reason})
	writeJSON(w, http.StatusServiceUnavailable, b)
	return outcome{status: http.StatusServiceUnavailable, code: schemas.CodeUnavailable, err: reason}
}

func (g *Gateway) checkReady(now time.Time) (bool, string) {
	rd := &g.ready
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if !rd.checked.IsZero() && now.Sub(rd.checked) < g.cfg.ReadyTTL {
		return rd.ready, rd.reason
	}
	rd.ready, rd.reason = g.ping()
	rd.checked = time.Now()
	return rd.ready, rd.reason
}

// ping asks the pool's workers for a micro PING and takes the first answer.
func (g *Gateway) ping() (bool, string) {
	if !g.nc.IsConnected() {
		return false, "not connected to NATS (" + strings.ToLower(g.nc.Status().String()) + ")"
	}
	subject, err := micro.ControlSubject(micro.PingVerb, schemas.ServiceName, "")
	if err != nil {
		return false, err.Error()
	}
	if _, err := g.nc.Request(subject, nil, g.cfg.ReadyTimeout); err != nil {
		return false, "no codexpool worker answered a ping: " + err.Error()
	}
	return true, ""
}

// CheckAddr returns an error wrapping ErrOpenWithoutKeys when addr (host:port) is not a loopback
// address and keys is empty: an open gateway spends the pool's accounts for anyone who reaches it.
// Loopback is "localhost" or a loopback IP; an empty host means every interface.
func CheckAddr(addr string, keys []string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gateway: address %q: %w", addr, err)
	}
	if len(keys) > 0 || Loopback(host) {
		return nil
	}
	return fmt.Errorf("%w, and %q is not loopback", ErrOpenWithoutKeys, addr)
}

// Loopback reports whether host is "localhost" or a loopback IP address.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// NewServer returns an *http.Server for h with the gateway's timeouts: headers must arrive
// within 10s and idle keep-alive connections close after 2m. It sets no ReadTimeout and no
// WriteTimeout, which would cut long streams (Config.BodyTimeout bounds body reads instead).
// Stop it with Shutdown (streams in progress finish) and then Close.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
