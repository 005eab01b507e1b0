package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/codexpool/codexpool/gateway/dashboard"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codextest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const waitTimeout = 20 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// fleet starts embedded NATS, the simulator with two accounts (a 5-hour and a weekly window
// each) and n workers using both, each behind a real micro service publishing the stats as the
// binary does; it returns a client connection.
func fleet(t *testing.T, n int) (*nats.Conn, *client.Client) {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	wins := []codextest.Window{{Length: 5 * time.Hour, Budget: 50}, {Length: 7 * 24 * time.Hour, Budget: 200}}
	sim := codextest.NewServer(codextest.Options{Words: 3, Accounts: []codextest.Account{
		{Name: "alice", Token: "tok-alice-0123456789", Windows: wins}, {Name: "bob", Token: "tok-bob-0123456789", Windows: wins},
	}})
	t.Cleanup(sim.Close)
	for i := range n {
		id := "w" + strconv.Itoa(i+1)
		w, err := worker.New(worker.Config{ID: id, URL: sim.URL, Accounts: []worker.Account{
			{Name: "alice", Token: "tok-alice-0123456789"}, {Name: "bob", Token: "tok-bob-0123456789"},
		}}, worker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		wnc, err := queue.Connect(ctxT(t), ns.ClientURL(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(wnc.Close)
		svc, err := queue.NewService(wnc, queue.Config{WorkerID: id, WorkerStats: w.StatsData}, w)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, client.New(nc, client.Options{RetryBusy: -1})
}

func getData(t *testing.T, base, query string) dashboard.Data {
	t.Helper()
	resp, err := http.Get(base + "/dashboard/data" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d dashboard.Data
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /dashboard/data%s: %d %s %s", query, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDataFromRealWorkers: two workers' real STATS become the page's data: both workers, both
// accounts with their 5 h and weekly windows, the requests made, and a throughput point.
func TestDataFromRealWorkers(t *testing.T) {
	nc, cl := fleet(t, 2)
	d := dashboard.New(nc, dashboard.Config{Resolution: time.Millisecond, Usage: func(context.Context) (any, error) {
		return []map[string]any{{"key": "team", "requests": 3}}, nil
	}})
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)

	d.Sample(ctxT(t))
	for i := range 6 {
		if _, err := cl.Generate(ctxT(t), []byte(`{"input":"dash `+strconv.Itoa(i)+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	d.Sample(ctxT(t))
	got := getData(t, srv.URL, "")

	if len(got.Workers) != 2 || got.Workers[0].ID != "w1" || got.Workers[1].ID != "w2" {
		t.Fatalf("workers = %+v, want w1 and w2", got.Workers)
	}
	if got.Totals.Completed != 6 || got.Totals.Requests < 6 {
		t.Errorf("totals = %+v, want 6 completed", got.Totals)
	}
	if len(got.Accounts) != 2 || got.Accounts[0].Name != "alice" || got.Accounts[1].Name != "bob" {
		t.Fatalf("accounts = %+v, want alice and bob", got.Accounts)
	}
	classes := map[string]bool{}
	for _, a := range got.Accounts {
		for _, w := range a.Windows {
			classes[w.Class] = true
			if w.UsedPercent <= 0 || w.ResetAt.IsZero() {
				t.Errorf("%s's %s window = %+v, want a used percentage and a reset time", a.Name, w.Label, w)
			}
		}
	}
	if !classes[dashboard.Class5h] || !classes[dashboard.ClassWeekly] {
		t.Errorf("window classes %v, want 5h and weekly", classes)
	}
	if len(got.Gates) != 4 {
		t.Errorf("gates = %+v, want one per worker and account (4)", got.Gates)
	}
	if got.Jobs != nil || got.JobsNote == "" {
		t.Errorf("jobs = %+v, %q; want none, with why (no JetStream)", got.Jobs, got.JobsNote)
	}
	if !got.UsageOn || got.Usage == nil {
		t.Errorf("usage = %v (on %v), want the hook's result", got.Usage, got.UsageOn)
	}
	if len(got.History) != 2 || got.History[1].Throughput <= 0 || got.History[1].LatencyMS <= 0 {
		t.Errorf("history = %+v, want 2 points, the second with throughput and latency", got.History)
	}
	if later := getData(t, srv.URL, "?since="+strconv.FormatInt(got.History[0].T, 10)); len(later.History) != 1 {
		t.Errorf("history since the first point = %+v, want only the second", later.History)
	}
}

// TestRunSamplesUntilCancelled: Run samples at once and every Interval, and returns ctx.Err()
// when its context ends.
func TestRunSamplesUntilCancelled(t *testing.T) {
	nc, _ := fleet(t, 1)
	d := dashboard.New(nc, dashboard.Config{Interval: 50 * time.Millisecond, Resolution: 50 * time.Millisecond, StatsWait: 20 * time.Millisecond})
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(waitTimeout)
	for len(getData(t, srv.URL, "").History) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 samples after 20s")
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

// TestRoutes: the page, its assets and its data; bad input is refused and changes nothing.
func TestRoutes(t *testing.T) {
	nc, _ := fleet(t, 0)
	srv := httptest.NewServer(dashboard.New(nc, dashboard.Config{}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name, method, path string
		status             int
		contentType        string
	}{
		{name: "page", method: "GET", path: "/dashboard", status: 200, contentType: "text/html; charset=utf-8"},
		{name: "page, slash", method: "GET", path: "/dashboard/", status: 200, contentType: "text/html; charset=utf-8"},
		{name: "script", method: "GET", path: "/dashboard/app.js", status: 200, contentType: "text/javascript; charset=utf-8"},
		{name: "style", method: "GET", path: "/dashboard/app.css", status: 200, contentType: "text/css; charset=utf-8"},
		{name: "data before a sample", method: "GET", path: "/dashboard/data", status: 200, contentType: "application/json"},
		{name: "bad since", method: "GET", path: "/dashboard/data?since=yesterday", status: 400},
		{name: "unknown", method: "GET", path: "/dashboard/secret.txt", status: 404},
		{name: "traversal", method: "GET", path: "/dashboard/../go.mod", status: 404},
		{name: "post", method: "POST", path: "/dashboard/data", status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
			}
			if tt.contentType != "" && resp.Header.Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", resp.Header.Get("Content-Type"), tt.contentType)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("Content-Security-Policy = %q, want scripts from the gateway only", csp)
			}
		})
	}
}

// TestAssetsSelfContained: the page weighs at most 300 KB and loads nothing from elsewhere.
func TestAssetsSelfContained(t *testing.T) {
	var total int64
	err := filepath.WalkDir("assets", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		total += int64(len(b))
		for _, bad := range []string{"http://", "https://", "//cdn", "eval(", "innerHTML"} {
			if strings.Contains(strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", ""), bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded assets: %d bytes", total)
	if total > 300<<10 {
		t.Errorf("assets weigh %d bytes, want at most 300 KB", total)
	}
}

// TestUsageHook: the usage panel's hook is optional; its error and a result that does not
// encode are shown as such, and the rest of the data still comes.
func TestUsageHook(t *testing.T) {
	nc, _ := fleet(t, 1)
	tests := []struct {
		name    string
		usage   func(context.Context) (any, error)
		on      bool
		wantErr string
		want    bool // a usage value
	}{
		{name: "no hook", usage: nil},
		{name: "a table", usage: func(context.Context) (any, error) { return []map[string]int{{"requests": 2}}, nil }, on: true, want: true},
		{name: "an error", usage: func(context.Context) (any, error) { return nil, errors.New("usage: bucket gone") }, on: true, wantErr: "usage: bucket gone"},
		{name: "does not encode", usage: func(context.Context) (any, error) { return make(chan int), nil }, on: true, wantErr: "usage: json: unsupported type: chan int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dashboard.New(nc, dashboard.Config{Usage: tt.usage})
			srv := httptest.NewServer(d)
			t.Cleanup(srv.Close)
			d.Sample(ctxT(t))
			got := getData(t, srv.URL, "")
			if got.UsageOn != tt.on || got.UsageError != tt.wantErr || (got.Usage != nil) != tt.want {
				t.Errorf("usage on %v, error %q, value %v; want on %v, error %q, a value: %v", got.UsageOn, got.UsageError, got.Usage, tt.on, tt.wantErr, tt.want)
			}
			if len(got.Workers) != 1 {
				t.Errorf("workers = %+v, want the one worker whatever the usage hook did", got.Workers)
			}
		})
	}
}
