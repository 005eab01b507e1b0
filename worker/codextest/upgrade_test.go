package codextest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// slowRate refills so slowly that no token comes back during a test.
const slowRate = 0.001

func TestUpgradeRateLimit(t *testing.T) {
	s := newServer(t, Options{UpgradeRate: slowRate, UpgradeBurst: 3, RetryAfter: 1500 * time.Millisecond})
	for i := range 3 {
		if _, _, err := dial(t, s.URL, nil); err != nil {
			t.Fatalf("upgrade %d within the burst: %v", i, err)
		}
	}
	_, resp, err := dial(t, s.URL, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("upgrade above the burst: err %v resp %v, want 403", err, resp)
	}
	if got := resp.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2 (1.5 s rounded up)", got)
	}
	rejectBody(t, resp)
	st := s.Stats()
	if st.UpgradesAccepted != 3 || st.UpgradesRejected != 1 || st.Rejected403 != 1 {
		t.Errorf("stats %+v, want 3 accepted, 1 rejected, 1 403", st)
	}
}

func TestUpgradeRateLimitDefaultBurstNoRetryAfter(t *testing.T) {
	s := newServer(t, Options{UpgradeRate: slowRate}) // burst max(1, ceil(0.001)) = 1
	if _, _, err := dial(t, s.URL, nil); err != nil {
		t.Fatalf("first upgrade: %v", err)
	}
	_, resp, _ := dial(t, s.URL, nil)
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("second upgrade: %v, want 403", resp)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Errorf("Retry-After %q, want none when Options.RetryAfter is 0", resp.Header.Get("Retry-After"))
	}
}

func TestSetUpgradeLimitAtRunTime(t *testing.T) {
	s := newServer(t, Options{})
	for i := range 5 {
		if _, _, err := dial(t, s.URL, nil); err != nil {
			t.Fatalf("unlimited upgrade %d: %v", i, err)
		}
	}
	s.Limits.SetUpgradeRate("", slowRate, 2)
	for i := range 2 {
		if _, _, err := dial(t, s.URL, nil); err != nil {
			t.Fatalf("upgrade %d within the new burst: %v", i, err)
		}
	}
	if _, resp, _ := dial(t, s.URL, nil); resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("upgrade above the new burst: %v, want 403", resp)
	}
	s.Limits.SetUpgradeRate("", 0, 0)
	if _, _, err := dial(t, s.URL, nil); err != nil {
		t.Fatalf("upgrade after removing the limit: %v", err)
	}
	if st := s.Stats(); st.UpgradesAccepted != 8 || st.Rejected403 != 1 {
		t.Errorf("stats %+v, want 8 accepted, 1 403", st)
	}
}

func TestRejectNext(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter time.Duration
		wantRA     string
	}{
		{401, 0, ""},
		{403, 3 * time.Second, "3"},
		{426, 0, ""},
		{429, 2500 * time.Millisecond, "3"},
		{500, 0, ""},
		{503, time.Second, "1"},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			s := newServer(t, Options{})
			s.Faults.Reject(2, tt.status, tt.retryAfter)
			for i := range 2 {
				_, resp, err := dial(t, s.URL, nil)
				if err == nil || resp == nil || resp.StatusCode != tt.status {
					t.Fatalf("upgrade %d: err %v resp %v, want %d", i, err, resp, tt.status)
				}
				if got := resp.Header.Get("Retry-After"); got != tt.wantRA {
					t.Errorf("Retry-After %q, want %q", got, tt.wantRA)
				}
				body := rejectBody(t, resp)
				if body["type"] == "" || body["code"] == "" {
					t.Errorf("body %v lacks type or code", body)
				}
			}
			if _, _, err := dial(t, s.URL, nil); err != nil {
				t.Fatalf("upgrade after the rejections: %v", err)
			}
			st := s.Stats()
			want403 := int64(0)
			if tt.status == 403 {
				want403 = 2
			}
			if st.UpgradesRejected != 2 || st.UpgradesAccepted != 1 || st.Rejected403 != want403 {
				t.Errorf("stats %+v, want 2 rejected (%d 403), 1 accepted", st, want403)
			}
		})
	}
}

func TestRejectNextQueuesInOrder(t *testing.T) {
	s := newServer(t, Options{})
	s.Faults.Reject(1, 500, 0)
	s.Faults.Reject(1, 401, 0)
	for _, want := range []int{500, 401} {
		if _, resp, _ := dial(t, s.URL, nil); resp == nil || resp.StatusCode != want {
			t.Fatalf("got %v, want %d", resp, want)
		}
	}
}

func TestMaxConns(t *testing.T) {
	s := newServer(t, Options{MaxConns: 2})
	a := mustDial(t, s)
	mustDial(t, s)
	_, resp, err := dial(t, s.URL, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third socket: err %v resp %v, want 503", err, resp)
	}
	rejectBody(t, resp)
	a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := s.WaitOpenSockets(ctx, 1); err != nil {
		t.Fatalf("WaitOpenSockets(1): %v", err)
	}
	if _, _, err := dial(t, s.URL, nil); err != nil {
		t.Fatalf("socket after one closed: %v", err)
	}
	if st := s.Stats(); st.PeakOpenSockets != 2 || st.UpgradesRejected != 1 || st.Rejected403 != 0 {
		t.Errorf("stats %+v, want peak 2, 1 rejected, no 403", st)
	}
}

func TestToken(t *testing.T) {
	const token = "sk-secret-123"
	s := newServer(t, Options{Token: token})
	for _, auth := range []string{"", "Bearer wrong", token} {
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		_, resp, err := dial(t, s.URL, h)
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: err %v resp %v, want 401", auth, err, resp)
		}
		if body := rejectBody(t, resp); strings.Contains(body["message"].(string), "secret") {
			t.Errorf("401 body echoes the token: %v", body)
		}
	}
	h := http.Header{"Authorization": {"Bearer " + token}, "Chatgpt-Account-Id": {"acct-1"}}
	if _, _, err := dial(t, s.URL, h); err != nil {
		t.Fatalf("right token: %v", err)
	}
	got := s.LastUpgradeHeader()
	if got.Get("Authorization") != "Bearer "+token || got.Get("ChatGPT-Account-Id") != "acct-1" {
		t.Errorf("LastUpgradeHeader %v, want the last request's auth headers", got)
	}
	if st := s.Stats(); st.UpgradesRejected != 3 || st.UpgradesAccepted != 1 {
		t.Errorf("stats %+v, want 3 rejected, 1 accepted", st)
	}
}

func TestMaxConnAge(t *testing.T) {
	s := newServer(t, Options{MaxConnAge: 200 * time.Millisecond, Latency: time.Hour, Words: 2})
	c := mustDial(t, s)
	start := time.Now()
	send(t, c, createFrame("long", nil)) // in flight when the age is reached
	if e := readEvent(t, c); e.typ() != "response.created" {
		t.Fatalf("got %s, want response.created", e.raw)
	}
	var e event
	for e = readEvent(t, c); e.typ() != "error"; e = readEvent(t, c) {
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Errorf("limit event after %v, want >= 200ms", time.Since(start))
	}
	if e.get("status") != 400.0 || e.get("error.type") != "invalid_request_error" ||
		e.get("error.code") != "websocket_connection_limit_reached" || e.get("error.message") == "" {
		t.Errorf("limit event %s, want status 400 invalid_request_error websocket_connection_limit_reached", e.raw)
	}
	if code := expectClose(t, c); code != 1000 {
		t.Errorf("close code %d, want 1000", code)
	}
	waitIdle(t, s)
}

func TestNonWebSocketRequestGets426(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s := newServer(t, Options{})
	resp, err := http.Get(strings.Replace(s.URL, "ws://", "http://", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %d, want 426", resp.StatusCode)
	}
}
