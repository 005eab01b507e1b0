package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/gateway/dashboard"
)

// TestDashboardAccess: GET /dashboard takes the API's keys, as a Bearer token or as a Basic
// password (what a browser prompts for); a refused browser is asked for one. Without keys it
// is open to loopback callers only, under the same Host and Origin rules as /v1/*. The page
// never carries a key.
func TestDashboardAccess(t *testing.T) {
	withKeys := newPool(t, poolOptions{noWorker: true})
	keyless := newPool(t, poolOptions{noWorker: true, noKeys: true})
	for _, p := range []*pool{withKeys, keyless} {
		d := dashboard.New(p.nc, dashboard.Config{})
		d.Sample(context.Background())
		p.gw = gateway.New(nil, p.nc, gateway.Config{Keys: keysOf(p == withKeys), Dashboard: d, Logger: slog.New(slog.NewJSONHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}
	tests := []struct {
		name   string
		p      *pool
		path   string
		auth   func(*http.Request)
		host   string
		origin string
		status int
		basic  bool // the answer asks for Basic credentials
	}{
		{name: "no key", p: withKeys, path: "/dashboard", status: 401, basic: true},
		{name: "wrong bearer", p: withKeys, path: "/dashboard", auth: bearer("sk-wrong"), status: 401, basic: true},
		{name: "bearer", p: withKeys, path: "/dashboard", auth: bearer(key), status: 200},
		{name: "basic password", p: withKeys, path: "/dashboard", auth: basic("anyone", key), status: 200},
		{name: "basic, wrong password", p: withKeys, path: "/dashboard", auth: basic(key, "nope"), status: 401, basic: true},
		{name: "data with a key", p: withKeys, path: "/dashboard/data", auth: basic("", key), status: 200},
		{name: "data without", p: withKeys, path: "/dashboard/data", status: 401, basic: true},
		{name: "script without a key", p: withKeys, path: "/dashboard/app.js", status: 401, basic: true},
		{name: "keyless, loopback", p: keyless, path: "/dashboard", status: 200},
		{name: "keyless, data", p: keyless, path: "/dashboard/data", status: 200},
		{name: "keyless, rebinding host", p: keyless, path: "/dashboard/data", host: "evil.example", status: 421},
		{name: "keyless, foreign origin", p: keyless, path: "/dashboard/data", origin: "https://evil.example", status: 403},
		{name: "unknown asset", p: keyless, path: "/dashboard/nope.js", status: 404},
		{name: "not the dashboard", p: keyless, path: "/dashboardx", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodGet, tt.p.srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.auth != nil {
				tt.auth(req)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp := do(t, req)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if got := strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic "); got != tt.basic {
				t.Errorf("WWW-Authenticate = %q, want Basic: %v", resp.Header.Get("WWW-Authenticate"), tt.basic)
			}
			if strings.Contains(string(body), key) {
				t.Error("the answer carries the gateway's key")
			}
		})
	}
	if strings.Contains(withKeys.logs.String(), key) {
		t.Error("the gateway logged its key")
	}
}

// TestDashboardOff: without Config.Dashboard the paths are not found.
func TestDashboardOff(t *testing.T) {
	p := newPool(t, poolOptions{noWorker: true, noKeys: true})
	resp := do(t, mustGet(t, p.srv.URL+"/dashboard"))
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("got %d %s, want 404", resp.StatusCode, body)
	}
}

func keysOf(on bool) []string {
	if on {
		return []string{key}
	}
	return nil
}

func bearer(k string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+k) }
}

func basic(user, pass string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
