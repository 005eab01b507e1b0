package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// A gateway without keys answers only requests that come from this machine on purpose: a web
// page can make the user's browser send requests to 127.0.0.1, but with its own Host (DNS
// rebinding) or Origin, and without Content-Type: application/json unless CORS allowed it.
// None of those reach the pool.
func TestLocalOnly(t *testing.T) {
	p := newPool(t, poolOptions{noKeys: true})
	port := p.srv.URL[strings.LastIndexByte(p.srv.URL, ':'):]
	cases := []struct {
		name        string
		host        string // Host header; "" for the server's own 127.0.0.1:port
		origin      string // Origin header when set
		contentType string
		status      int
		code        string
	}{
		{"rebinding host", "evil.example", "", "application/json", 421, "misdirected_request"},
		{"rebinding host with port", "evil.example" + port, "", "application/json", 421, "misdirected_request"},
		{"foreign origin", "", "https://evil.example", "application/json", 403, "forbidden_origin"},
		{"null origin", "", "null", "application/json", 403, "forbidden_origin"},
		{"text/plain", "", "", "text/plain", 415, "unsupported_media_type"},
		{"form post", "", "", "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"no content type", "", "", "", 415, "unsupported_media_type"},
		{"127.0.0.1", "", "", "application/json", 200, ""},
		{"localhost", "localhost" + port, "", "application/json; charset=utf-8", 200, ""},
		{"localhost, no port", "localhost", "", "application/json", 200, ""},
		{"[::1]", "[::1]" + port, "", "application/json", 200, ""},
		{"loopback origin", "", "http://localhost:3000", "application/json", 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.svc.Stats().Requests
			req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+"/v1/responses", strings.NewReader(`{"input":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp := do(t, req)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == http.StatusOK {
				return
			}
			if _, _, code, _ := openAIError(t, body); code != tc.code {
				t.Errorf("got code %q, want %q", code, tc.code)
			}
			if n := p.svc.Stats().Requests - before; n != 0 {
				t.Errorf("the pool got %d requests, want none", n)
			}
		})
	}
}

// With keys, a browser cannot send the Authorization header across sites, so neither Host,
// Origin nor Content-Type is checked: clients that send a body without application/json (curl -d)
// keep working.
func TestLocalOnlyNotWithKeys(t *testing.T) {
	p := newPool(t, poolOptions{})
	req, err := http.NewRequestWithContext(ctxT(t, waitTimeout), http.MethodPost, p.srv.URL+"/v1/responses", strings.NewReader(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gateway.example"
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+key)
	if resp := do(t, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s, want 200", resp.StatusCode, readAll(t, resp.Body))
	}
}
