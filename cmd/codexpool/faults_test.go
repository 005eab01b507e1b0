package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The fault suite: origin faults, hostile input and leaked secrets, through the real worker binary.
// Every case records how long the client waited for its outcome; the tests print the tables.

// newClusterWith is newCluster with control over the NATS server's options (payload limit, fixed
// port). It returns the cluster and the server; the server is shut down at cleanup.
func newClusterWith(t *testing.T, simOpts codextest.Options, tweak func(*server.Options)) (*cluster, *server.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true}
	if tweak != nil {
		tweak(opts)
	}
	ns := startNATS(t, opts)
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	simOpts.Token = simToken
	sim := codextest.NewServer(simOpts)
	t.Cleanup(sim.Close)
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &cluster{t: t, url: ns.ClientURL(), nc: nc, sim: sim,
		client: client.New(nc, client.Options{RetryBusy: -1})}, ns
}

// startNATS starts an in-process NATS server with opts, retrying for a while when its port is
// still taken (a restart on the same port).
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if ns.ReadyForConnections(10 * time.Second) {
			return ns
		}
		ns.Shutdown()
		ns.WaitForShutdown()
		if time.Now().After(deadline) {
			t.Fatalf("NATS server on %s:%d not ready", opts.Host, opts.Port)
		}
		time.Sleep(100 * time.Millisecond) // retry pacing while the port frees up
	}
}

// workerStats is the part of a worker's $SRV.STATS endpoint data the suite checks.
type workerStats struct {
	Requests  uint64                  `json:"requests"`
	Forwarded uint64                  `json:"forwarded"`
	Busy      uint64                  `json:"busy"`
	Started   uint64                  `json:"started"`
	Inflight  int64                   `json:"inflight"`
	Completed uint64                  `json:"completed"`
	Failed    uint64                  `json:"failed"`
	Errors    map[schemas.Code]uint64 `json:"errors"`
	Upstream  struct {
		Open int64 `json:"open"`
		Idle int   `json:"idle"`
	} `json:"upstream"`
	Gate struct {
		Mode   string `json:"mode"`
		Starts int64  `json:"starts"`
		Window int    `json:"window"`
	} `json:"gate"`
}

// workerStatsOf asks $SRV.STATS.codexpool for the stats of worker id.
func workerStatsOf(nc *nats.Conn, id string) (workerStats, bool) {
	stats, _ := client.Stats(context.Background(), nc, 300*time.Millisecond)
	for _, st := range stats {
		var ws workerStats
		if st.Metadata["worker"] != id || len(st.Endpoints) == 0 || json.Unmarshal(st.Endpoints[0].Data, &ws) != nil {
			continue
		}
		return ws, true
	}
	return workerStats{}, false
}

// waitCond polls cond until it holds or within passes.
func waitCond(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, within, what, cond)
}

// outcome is what a client observed: success (status 0) or an error.
type outcome struct {
	status     int
	code       schemas.Code
	upstream   string
	retryAfter time.Duration
	events     int // streaming: events before the end
	msg        string
}

func (o outcome) String() string {
	if o.status == 0 {
		if o.events > 0 {
			return fmt.Sprintf("success (%d events)", o.events)
		}
		return "success"
	}
	s := fmt.Sprintf("%d %s", o.status, o.code)
	if o.upstream != "" {
		s += " (" + o.upstream + ")"
	}
	if o.retryAfter > 0 {
		s += fmt.Sprintf(" retry_after_ms=%d", o.retryAfter.Milliseconds())
	}
	if o.events > 0 {
		s += fmt.Sprintf(" after %d events", o.events)
	}
	return s
}

func outcomeOf(err error) (outcome, error) {
	if err == nil {
		return outcome{}, nil
	}
	se, ok := schemas.AsError(err)
	if !ok {
		return outcome{}, err
	}
	return outcome{status: se.Status, code: se.Code, upstream: se.UpstreamCode, retryAfter: se.RetryAfter, msg: se.Message}, nil
}

// streamRaw sends a streaming request with plain NATS and checks the contract's stream shape:
// events numbered 1..N by Codex-Seq, then at most one error message numbered N+1, then the empty
// sentinel without headers, and nothing else. It returns the outcome.
func streamRaw(nc *nats.Conn, payload []byte, hdr nats.Header, within time.Duration) (outcome, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return outcome{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: "codex.generate", Reply: inbox, Data: payload, Header: hdr}); err != nil {
		return outcome{}, err
	}
	deadline := time.Now().Add(within)
	var o outcome
	var failed, completed bool
	for seq := 1; ; seq++ {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			return o, fmt.Errorf("stream did not end within %s (after %d messages): %w", within, seq-1, err)
		}
		if len(m.Data) == 0 {
			if len(m.Header) != 0 {
				return o, fmt.Errorf("empty message with headers %v (not a sentinel)", m.Header)
			}
			if !failed && !completed {
				return o, errors.New("sentinel without response.completed or an error message")
			}
			return o, nil
		}
		if failed {
			return o, fmt.Errorf("message after the error message: %q", m.Data)
		}
		if got := m.Header.Get(schemas.HeaderSeq); got != strconv.Itoa(seq) {
			return o, fmt.Errorf("message %d has Codex-Seq %q", seq, got)
		}
		if code := m.Header.Get(schemas.HeaderServiceErrorCode); code != "" {
			se, err := schemas.ParseErrorBody(m.Data)
			if err != nil {
				return o, fmt.Errorf("error message body %q: %v", m.Data, err)
			}
			if code != strconv.Itoa(se.Status) || m.Header.Get(schemas.HeaderServiceError) == "" {
				return o, fmt.Errorf("error headers %v do not match body %q", m.Header, m.Data)
			}
			o.status, o.code, o.upstream, o.retryAfter, o.msg = se.Status, se.Code, se.UpstreamCode, se.RetryAfter, se.Message
			failed = true
			continue
		}
		if completed {
			return o, fmt.Errorf("event after response.completed: %q", m.Data)
		}
		var ev struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return o, fmt.Errorf("event %d is not JSON: %q", seq, m.Data)
		}
		o.events++
		completed = ev.Type == "response.completed"
	}
}

type faultRow struct {
	fault, mode, want, got string
	took, max              time.Duration
}

func logFaultTable(t *testing.T, title string, rows []faultRow) {
	t.Helper()
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tmode\twant\tobserved\ttime\tmax")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.fault, r.mode, r.want, r.got, r.took.Round(time.Millisecond), r.max)
	}
	_ = tw.Flush()
	t.Logf("%s\n%s", title, b.String())
}

func md(kv ...string) map[string]any {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return map[string]any{"metadata": m}
}

// faultCase is one origin fault: what to set up, what the request carries, what the client must
// observe and how soon.
type faultCase struct {
	fault  string
	setup  func()
	extra  map[string]any
	stream bool
	status int // 0 = success
	// orStatus is another acceptable status with the same code (a race the contract allows).
	orStatus int
	// orSuccess accepts success too (the adaptive gate retries 403s until the deadline).
	orSuccess bool
	code      schemas.Code
	up        string
	max       time.Duration
	check     func(t *testing.T, o outcome)
}

// runFaultCase runs case i against the cluster's single worker and appends its row.
func runFaultCase(t *testing.T, c *cluster, rows *[]faultRow, i int, tt faultCase) {
	mode := "one-shot"
	if tt.stream {
		mode = "stream"
	}
	want := outcome{status: tt.status, code: tt.code, upstream: tt.up}
	wantText := want.String()
	if tt.orStatus != 0 {
		wantText = fmt.Sprintf("%d or %s", tt.orStatus, want)
	}
	if tt.orSuccess {
		wantText += " or success"
	}
	t.Run(fmt.Sprintf("%02d %s %s", i, tt.fault, mode), func(t *testing.T) {
		// The pooled-socket cases need a pooled socket: make one.
		if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("warm", nil), nil); err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		if tt.setup != nil {
			tt.setup()
		}
		extra := map[string]any{"stream": tt.stream}
		for k, v := range tt.extra {
			extra[k] = v
		}
		payload := request(fmt.Sprintf("fault %d", i), extra)
		start := time.Now()
		var got outcome
		var err error
		if tt.stream {
			got, err = streamRaw(c.nc, payload, nil, 60*time.Second)
		} else {
			_, gerr := c.client.Generate(ctxT(t, 60*time.Second), payload, nil)
			got, err = outcomeOf(gerr)
		}
		took := time.Since(start)
		*rows = append(*rows, faultRow{fault: tt.fault, mode: mode, want: wantText, got: got.String(), took: took, max: tt.max})
		if err != nil {
			t.Fatalf("%v", err)
		}
		statusOK := got.status == tt.status || (tt.orStatus != 0 && got.status == tt.orStatus)
		matches := statusOK && got.code == tt.code && (tt.up == "" || got.upstream == tt.up)
		if !matches && !(tt.orSuccess && got.status == 0) {
			t.Errorf("got %s (%s), want %s", got, got.msg, want)
		}
		if strings.Contains(got.msg, simToken) {
			t.Errorf("message leaks the token: %q", got.msg)
		}
		if took > tt.max {
			t.Errorf("outcome after %s, want within %s", took, tt.max)
		}
		if tt.check != nil {
			tt.check(t, got)
		}
	})
}

// TestFaultsOrigin drives every origin fault through one real worker, one-shot and (where the
// stream shape matters) streaming, and checks the contract's outcome within its time. Afterwards
// the worker still serves, nothing is in flight and no socket is left behind.
func TestFaultsOrigin(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 4})
	// WS_RETRY_AFTER=1ms: after the 426 case the next upgrade fault meets a socket again.
	w := c.startWorker("wf", "CODEXPOOL_CONNECT_TIMEOUT=1s", "CODEXPOOL_IDLE_TIMEOUT=1s",
		"CODEXPOOL_SHUTDOWN_GRACE=5s", "CODEXPOOL_WS_RETRY_AFTER=1ms")
	fresh := func() { c.sim.CloseClientConnections() } // upgrade faults need a new socket

	const fast, slow = 10 * time.Second, 15 * time.Second
	tests := []faultCase{
		{fault: "401 upgrade", setup: func() { fresh(); c.sim.Faults.Reject(1, 401, 0) }, status: 401, code: schemas.CodeUpstreamUnauthorized, max: fast},
		{fault: "401 upgrade", stream: true, setup: func() { fresh(); c.sim.Faults.Reject(1, 401, 0) }, status: 401, code: schemas.CodeUpstreamUnauthorized, max: fast},
		{fault: "426 upgrade (answered over HTTP streaming)", setup: func() { fresh(); c.sim.Faults.Reject(1, 426, 0) }, max: fast},
		{fault: "429 upgrade + Retry-After 2s", setup: func() { fresh(); c.sim.Faults.Reject(1, 429, 2*time.Second) }, status: 429, code: schemas.CodeUpstreamRateLimited, max: fast,
			check: func(t *testing.T, o outcome) {
				if o.retryAfter < 2*time.Second {
					t.Errorf("retry_after = %s, want >= 2s", o.retryAfter)
				}
			}},
		{fault: "500 upgrade", setup: func() { fresh(); c.sim.Faults.Reject(1, 500, 0) }, status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "502 upgrade", setup: func() { fresh(); c.sim.Faults.Reject(1, 502, 0) }, status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "handshake never answers (connect 1s)", setup: func() { fresh(); c.sim.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultHangUpgrade) }, status: 504, code: schemas.CodeUpstreamTimeout, max: slow},
		{fault: "TCP drop during upgrade", setup: func() { fresh(); c.sim.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultDrop) }, status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "101 then Close 1008", setup: func() { fresh(); c.sim.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultClose1008) }, status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "101 then Close 1008", stream: true, setup: func() { fresh(); c.sim.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultClose1008) }, status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "drop mid-stream", extra: md("sim_fault", "drop"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "drop mid-stream", stream: true, extra: md("sim_fault", "drop"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "stall after first event (idle 1s)", extra: md("sim_fault", "stall"), status: 504, code: schemas.CodeUpstreamTimeout, max: slow},
		{fault: "stall after first event (idle 1s)", stream: true, extra: md("sim_fault", "stall"), status: 504, code: schemas.CodeUpstreamTimeout, max: slow},
		{fault: "malformed event JSON", extra: md("sim_fault", "bad_json"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "malformed event JSON", stream: true, extra: md("sim_fault", "bad_json"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "binary frame", extra: md("sim_fault", "binary"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "binary frame", stream: true, extra: md("sim_fault", "binary"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "error event, status 500", extra: md("sim_fault", "error"), status: 500, code: schemas.CodeUpstreamError, up: "server_error", max: fast},
		{fault: "error event, status 503", stream: true, extra: md("sim_fault", "error:503"), status: 503, code: schemas.CodeUpstreamError, up: "server_error", max: fast},
		{fault: "error event, status 429 usage limit", extra: md("sim_fault", "error:429"), status: 429, code: schemas.CodeUpstreamRateLimited, up: "usage_limit_reached", max: fast,
			check: func(t *testing.T, o outcome) {
				if o.retryAfter < 30*time.Second {
					t.Errorf("retry_after = %s, want about a minute (resets_at)", o.retryAfter)
				}
			}},
		{fault: "error event, no status", extra: md("sim_fault", "error_nostatus"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "error event, no status", stream: true, extra: md("sim_fault", "error_nostatus"), status: 502, code: schemas.CodeUpstreamError, max: fast},
		{fault: "response.failed", extra: md("sim_fault", "failed"), status: 502, code: schemas.CodeUpstreamError, up: "server_error", max: fast},
		{fault: "response.failed", stream: true, extra: md("sim_fault", "failed"), status: 502, code: schemas.CodeUpstreamError, up: "server_error", max: fast},
		{fault: "response.incomplete", extra: md("sim_fault", "incomplete"), status: 502, code: schemas.CodeUpstreamError, up: "max_output_tokens", max: fast},
		{fault: "response.incomplete", stream: true, extra: md("sim_fault", "incomplete"), status: 502, code: schemas.CodeUpstreamError, up: "max_output_tokens", max: fast},
		{fault: "conn limit on a pooled socket (retried)", setup: func() { c.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultConnLimit) }, max: fast},
		{fault: "conn limit on a pooled socket (retried)", stream: true, setup: func() { c.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultConnLimit) }, max: fast},
		{fault: "pooled socket dropped while idle (retried)", setup: fresh, max: fast},
		// The origin's event and Close race the request's write: the event's 400, or 502 for a
		// socket closed before a terminal event. Never retried: the socket was fresh.
		{fault: "conn limit on a fresh socket", setup: func() { fresh(); c.sim.Faults.Next(codextest.AtUpgrade, 1, codextest.FaultConnLimit) }, status: 400, orStatus: 502, code: schemas.CodeUpstreamError, max: fast},
	}
	var rows []faultRow
	for i, tt := range tests {
		runFaultCase(t, c, &rows, i, tt)
	}

	logFaultTable(t, "origin faults through the worker binary:", rows)

	// The worker still serves, nothing is in flight, and the origin's sockets settle to the
	// worker's pool.
	if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("after the faults", nil), nil); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	var st workerStats
	waitCond(t, 30*time.Second, "worker idle with the origin's sockets matching its pool", func() bool {
		var ok bool
		st, ok = workerStatsOf(c.nc, "wf")
		return ok && st.Inflight == 0 && st.Upstream.Open == int64(st.Upstream.Idle) &&
			c.sim.Stats().OpenSockets == st.Upstream.Open
	})
	t.Logf("after the faults: worker inflight %d, upstream open %d idle %d; origin open sockets %d; errors %v",
		st.Inflight, st.Upstream.Open, st.Upstream.Idle, c.sim.Stats().OpenSockets, st.Errors)
	w.stop(t, 30*time.Second)
	if err := c.sim.WaitIdle(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("origin still has %d sockets open after the worker stopped", c.sim.Stats().OpenSockets)
	}
}

// TestFaults403 is the 403 storm and the single-request 403 cases, on a worker of their own: the
// adaptive gate spaces new upgrades after rejections, which would slow every other fault case.
func TestFaults403(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 4})
	c.startWorker("w403", "CODEXPOOL_CONNECT_TIMEOUT=2s")
	fresh := func() { c.sim.CloseClientConnections() }
	// Rejected requests are retried through the gate (adaptive: until the request's deadline,
	// here 20s), whose spacing widens while rejections go on.
	const stormMax = 40 * time.Second
	var rows []faultRow
	// A 403 storm: 20 requests at once on fresh sockets, the next 10 upgrades rejected. None hangs.
	t.Run("403 storm", func(t *testing.T) {
		c.sim.Faults.Clear()
		c.sim.ResetStats()
		c.sim.CloseClientConnections()
		c.sim.Faults.Reject(10, 403, 0)
		const n = 20
		var mu sync.Mutex
		counts := map[string]int{}
		var slowest time.Duration
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				// The worker's deadline (20s) comes before the client's (30s): it must answer.
				_, err := c.client.Generate(ctxT(t, 30*time.Second), request(fmt.Sprintf("storm %d", i), nil),
					nats.Header{schemas.HeaderTimeout: {"20s"}})
				took := time.Since(start)
				o, oerr := outcomeOf(err)
				mu.Lock()
				defer mu.Unlock()
				slowest = max(slowest, took)
				switch {
				case oerr != nil:
					counts["client error: "+oerr.Error()]++
				default:
					counts[o.String()]++
				}
			}()
		}
		wg.Wait()
		c.sim.Faults.Clear()
		c.sim.ResetStats()
		var got []string
		for k, v := range counts {
			got = append(got, fmt.Sprintf("%d× %s", v, k))
			if k != "success" && k != "403 origin_forbidden" && k != "504 upstream_timeout" {
				t.Errorf("storm outcome %q ×%d, want success, 403 origin_forbidden or (deadline) 504", k, v)
			}
		}
		// Ten rejections in a row look, to the adaptive gate, like an origin that refuses: it backs
		// off (1 s, then x1.25 per rejection) and requests may reach their deadline queued in the
		// gate (504) or refused (403). What matters: every request is answered by its deadline,
		// and the worker serves again once the origin accepts (checked after the table).
		rows = append(rows, faultRow{fault: "403 storm: 20 at once, 10 rejected", mode: "one-shot",
			want: "success / 403 / 504 by the 20s deadline", got: strings.Join(got, ", "), took: slowest, max: stormMax})
		if slowest > stormMax {
			t.Errorf("slowest storm request took %s", slowest)
		}
	})
	// After the storm the adaptive gate spaces new upgrades (1s, doubling on each new rejection):
	// the single-request 403 cases come last and allow for it.
	const paced = 60 * time.Second
	for i, tt := range []faultCase{
		{fault: "403 once (retried)", setup: func() { fresh(); c.sim.Faults.Reject(1, 403, 0) }, max: paced},
		{fault: "403 x3 (more than the retry)", setup: func() { fresh(); c.sim.Faults.Reject(3, 403, 0) }, status: 403, code: schemas.CodeOriginForbidden, orSuccess: true, max: paced},
	} {
		runFaultCase(t, c, &rows, i, tt)
	}
	c.sim.Faults.Clear()
	c.sim.ResetStats()
	logFaultTable(t, "403 faults:", rows)
	if _, err := c.client.Generate(ctxT(t, 60*time.Second), request("after the 403s", nil), nil); err != nil {
		t.Fatalf("after the 403s: %v", err)
	}
	waitCond(t, 30*time.Second, "worker idle with the origin's sockets matching its pool", func() bool {
		st, ok := workerStatsOf(c.nc, "w403")
		return ok && st.Inflight == 0 && st.Upstream.Open == int64(st.Upstream.Idle) &&
			c.sim.Stats().OpenSockets == st.Upstream.Open
	})
}

// TestFaultsRefusedTCP points a worker at a closed port: a fast 502, and the worker keeps running.
func TestFaultsRefusedTCP(t *testing.T) {
	t.Parallel()
	c := newCluster(t, codextest.Options{Words: 3})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "ws://" + ln.Addr().String() + codextest.OriginPath
	ln.Close()
	c.startWorker("wr", "CODEXPOOL_CODEX_URL="+closed, "CODEXPOOL_CONNECT_TIMEOUT=2s")
	var rows []faultRow
	for _, stream := range []bool{false, true} {
		start := time.Now()
		var got outcome
		if stream {
			got, err = streamRaw(c.nc, request("refused", map[string]any{"stream": true}), nil, 60*time.Second)
		} else {
			_, gerr := c.client.Generate(ctxT(t, 60*time.Second), request("refused", nil), nil)
			got, err = outcomeOf(gerr)
		}
		took := time.Since(start)
		mode := map[bool]string{false: "one-shot", true: "stream"}[stream]
		rows = append(rows, faultRow{fault: "refused TCP (closed port)", mode: mode, want: "502 upstream_error", got: got.String(), took: took, max: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got.status != 502 || got.code != schemas.CodeUpstreamError {
			t.Errorf("%s: got %s (%s), want 502 upstream_error", mode, got, got.msg)
		}
		if took > 10*time.Second {
			t.Errorf("%s: took %s", mode, took)
		}
	}
	logFaultTable(t, "refused TCP:", rows)
	if st, ok := workerStatsOf(c.nc, "wr"); !ok || st.Inflight != 0 || st.Upstream.Open != 0 {
		t.Fatalf("worker stats after refused connects: %+v (found %v), want nothing in flight or open", st, ok)
	}
}

// TestFaultsBadInput sends hostile requests: each is refused with its code within milliseconds,
// none reaches the origin, and the worker keeps serving.
func TestFaultsBadInput(t *testing.T) {
	t.Parallel()
	c, _ := newClusterWith(t, codextest.Options{Words: 3}, func(o *server.Options) { o.MaxPayload = 4 << 20 })
	c.startWorker("wb", "CODEXPOOL_MAX_REQUEST_BYTES=1048576")
	if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("warm", nil), nil); err != nil {
		t.Fatal(err)
	}
	mb := strings.Repeat("x", 1_000_000)
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	hdr := func(v string) nats.Header { return nats.Header{schemas.HeaderTimeout: {v}} }
	type tc struct {
		name    string
		payload []byte
		hdr     nats.Header
		status  int
		code    schemas.Code
	}
	bad := func(name, payload string) tc {
		return tc{name: name, payload: []byte(payload), status: 400, code: schemas.CodeInvalidRequest}
	}
	tests := []tc{
		bad("empty payload", ""),
		bad("not JSON", "{nope"),
		bad("truncated JSON", `{"input":"hi"`),
		bad("JSON null", "null"),
		bad("JSON array", `[{"input":"hi"}]`),
		bad("JSON string", `"hi"`),
		bad("missing input", `{"model":"m"}`),
		bad("empty input string", `{"input":""}`),
		bad("empty input array", `{"input":[]}`),
		bad("input is a number", `{"input":5}`),
		bad("input is null", `{"input":null}`),
		bad("model is a number", `{"input":"hi","model":5}`),
		bad("instructions is an array", `{"input":"hi","instructions":["x"]}`),
		bad("stream is a string", `{"input":"hi","stream":"yes"}`),
		bad("metadata value is a number", `{"input":"hi","metadata":{"a":1}}`),
		bad("max_output_tokens negative", `{"input":"hi","max_output_tokens":-1}`),
		bad("max_output_tokens fractional", `{"input":"hi","max_output_tokens":1.5}`),
		bad("tools is an object", `{"input":"hi","tools":{}}`),
		bad("include is a string", `{"input":"hi","include":"x"}`),
		bad("1 MB string, stream wrong-typed", `{"input":"`+mb+`","stream":"`+mb[:10]+`"}`),
		bad("1 MB string as model, no input", `{"model":"`+mb+`"}`),
		bad("1 MB invalid UTF-8", `{"input":"`+mb[:500_000]+"\xff\xfe"+mb[:500_000]+`"}`),
		bad("invalid UTF-8", "{\"input\":\"hi \xc3\x28\"}"),
		bad("10,000-deep arrays in input", `{"input":`+deep(10_000, "[", "]")+`}`),
		bad("10,000-deep objects in an unknown field", `{"input":"hi","x":`+strings.Repeat(`{"a":`, 10_000)+"1"+strings.Repeat("}", 10_000)+`}`),
		bad("100,000-deep arrays at top level", deep(100_000, "[", "]")),
		bad("previous_response_id", `{"input":"hi","previous_response_id":"resp_1"}`),
		bad("background", `{"input":"hi","background":true}`),
		{name: "oversize payload (2 MB)", payload: []byte(`{"input":"` + strings.Repeat("y", 2_000_000) + `"}`), status: 413, code: schemas.CodeRequestTooLarge},
		{name: "Codex-Timeout 0s", payload: request("hi", nil), hdr: hdr("0s"), status: 400, code: schemas.CodeInvalidRequest},
		{name: "Codex-Timeout -1s", payload: request("hi", nil), hdr: hdr("-1s"), status: 400, code: schemas.CodeInvalidRequest},
		{name: "Codex-Timeout 1y", payload: request("hi", nil), hdr: hdr("1y"), status: 400, code: schemas.CodeInvalidRequest},
		{name: "Codex-Timeout soon", payload: request("hi", nil), hdr: hdr("soon"), status: 400, code: schemas.CodeInvalidRequest},
		{name: "Codex-Timeout 10", payload: request("hi", nil), hdr: hdr("10"), status: 400, code: schemas.CodeInvalidRequest},
	}
	before := c.sim.Stats().Responses
	var rows []faultRow
	const limit = 2 * time.Second // "milliseconds", with room for a loaded CI machine
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			// Plain NATS: the Go client would add its own Codex-Timeout.
			m, err := c.nc.RequestMsg(&nats.Msg{Subject: "codex.generate", Data: tt.payload, Header: tt.hdr}, 30*time.Second)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			got := outcome{}
			if e := m.Header.Get(schemas.HeaderServiceErrorCode); e != "" {
				se, perr := schemas.ParseErrorBody(m.Data)
				if perr != nil {
					t.Fatalf("error body %q: %v", m.Data, perr)
				}
				got = outcome{status: se.Status, code: se.Code, msg: se.Message}
			}
			rows = append(rows, faultRow{fault: tt.name, mode: "one-shot", want: outcome{status: tt.status, code: tt.code}.String(), got: got.String(), took: took, max: limit})
			if got.status != tt.status || got.code != tt.code {
				t.Errorf("got %s (%s), want %d %s", got, got.msg, tt.status, tt.code)
			}
			if len(got.msg) > 2048 {
				t.Errorf("error message of %d bytes echoes the input", len(got.msg))
			}
			if took > limit {
				t.Errorf("refusal took %s, want under %s", took, limit)
			}
		})
	}
	if got := c.sim.Stats().Responses - before; got != 0 {
		t.Errorf("%d refused requests reached the origin", got)
	}
	// Unknown fields are forwarded: the request succeeds.
	start := time.Now()
	_, err := c.client.Generate(ctxT(t, 30*time.Second), []byte(`{"input":"hi","frobnicate":{"x":[1,2]},"x-custom":"y"}`), nil)
	got, _ := outcomeOf(err)
	rows = append(rows, faultRow{fault: "unknown fields", mode: "one-shot", want: "success", got: got.String(), took: time.Since(start), max: 30 * time.Second})
	if err != nil {
		t.Errorf("unknown fields: %v, want success", err)
	}
	logFaultTable(t, "hostile requests:", rows)
	// The worker keeps serving; nothing is in flight.
	if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("still serving", nil), nil); err != nil {
		t.Fatalf("after hostile input: %v", err)
	}
	waitCond(t, 10*time.Second, "nothing in flight", func() bool {
		st, ok := workerStatsOf(c.nc, "wb")
		return ok && st.Inflight == 0
	})
}

// echoOrigin is a hostile Codex origin that echoes the credentials it receives back in every kind
// of error: upgrade bodies, error events, response.failed, response.incomplete and Close reasons.
type echoOrigin struct {
	mode atomic.Value // string
	srv  *httptest.Server
}

func newEchoOrigin(t *testing.T) *echoOrigin {
	t.Helper()
	o := &echoOrigin{}
	o.mode.Store("ok")
	up := websocket.Upgrader{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		echo := "you sent " + secret + " for account " + r.Header.Get("ChatGPT-Account-Id")
		body := func(msg string) string {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "code": secret}})
			return string(b)
		}
		mode := o.mode.Load().(string)
		switch mode {
		case "401", "403", "429", "500":
			status, _ := strconv.Atoi(mode)
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(status)
			fmt.Fprint(w, body(echo))
			return
		case "403-cut":
			// The 1 KiB the worker reads ends in the middle of the token.
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, strings.Repeat("x", 1024-len(secret)/2)+secret)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		send := func(v any) { _ = ws.WriteJSON(v) }
		created := map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_echo", "status": "in_progress"}}
		switch mode {
		case "ok":
			send(created)
			send(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_echo", "status": "completed",
				"output": []any{map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "hello"}}}}}})
		case "event":
			send(map[string]any{"type": "error", "status": 400, "error": map[string]any{"message": echo, "code": secret, "type": secret}})
		case "event-429":
			send(map[string]any{"type": "error", "status": 429, "error": map[string]any{"message": echo, "type": "usage_limit_reached"}, "headers": map[string]any{"retry-after": "3", "x-echo": secret}})
		case "failed":
			send(created)
			send(map[string]any{"type": "response.failed", "response": map[string]any{"status": "failed", "error": map[string]any{"code": secret, "message": echo}}})
		case "incomplete":
			send(created)
			send(map[string]any{"type": "response.incomplete", "response": map[string]any{"status": "incomplete", "incomplete_details": map[string]any{"reason": secret}}})
		case "close":
			send(created)
			reason := "bye " + secret
			if len(reason) > 120 {
				reason = reason[:120]
			}
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, reason), time.Now().Add(time.Second))
		}
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// TestSecretsNeverLeak runs every path with a debug-logging worker against an origin that echoes
// the credentials back, and checks that neither the token nor the account id appears in any reply,
// error or log line.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	const token, account = "sk-live-TOPSECRET-9f8e7d6c5b4a3210", "acct-PRIVATE-1234-5678"
	c := newCluster(t, codextest.Options{Words: 3})
	origin := newEchoOrigin(t)
	p := c.startWorker("wsec", "CODEXPOOL_CODEX_URL="+origin.srv.URL, "CODEXPOOL_CODEX_TOKEN="+token,
		"CODEXPOOL_CODEX_ACCOUNT_ID="+account, "CODEXPOOL_WS_REUSE=false", "CODEXPOOL_LOG_LEVEL=debug")
	leaks := func(where, s string) {
		t.Helper()
		for _, sec := range []string{token, account} {
			if strings.Contains(s, sec) {
				t.Errorf("%s leaks %q: %s", where, sec, s)
			}
		}
	}
	var rows []faultRow
	// Successes first, then the 403s (the gate paces new upgrades after them).
	for _, mode := range []string{"ok", "401", "429", "500", "event", "event-429", "failed", "incomplete", "close", "403", "403-cut"} {
		for _, stream := range []bool{false, true} {
			origin.mode.Store(mode)
			payload := request("secret path "+mode, map[string]any{"stream": stream})
			start := time.Now()
			inbox := nats.NewInbox()
			sub, err := c.nc.SubscribeSync(inbox)
			if err != nil {
				t.Fatal(err)
			}
			// Bounded: the adaptive gate retries 403s until the request's deadline.
			hdr := nats.Header{schemas.HeaderTimeout: {"5s"}}
			if err := c.nc.PublishMsg(&nats.Msg{Subject: "codex.generate", Reply: inbox, Data: payload, Header: hdr}); err != nil {
				t.Fatal(err)
			}
			var got outcome
			for {
				m, err := sub.NextMsg(60 * time.Second)
				if err != nil {
					t.Fatalf("%s stream=%v: %v", mode, stream, err)
				}
				leaks(fmt.Sprintf("%s stream=%v reply", mode, stream), fmt.Sprintf("%v %s", m.Header, m.Data))
				if m.Header.Get(schemas.HeaderServiceErrorCode) != "" {
					if se, err := schemas.ParseErrorBody(m.Data); err == nil {
						got = outcome{status: se.Status, code: se.Code, upstream: se.UpstreamCode}
					}
				}
				if !stream || len(m.Data) == 0 {
					break
				}
			}
			_ = sub.Unsubscribe()
			rows = append(rows, faultRow{fault: "echoing origin: " + mode, mode: map[bool]string{false: "one-shot", true: "stream"}[stream],
				want: "no secret", got: got.String(), took: time.Since(start), max: 60 * time.Second})
		}
	}
	logFaultTable(t, "paths driven with an origin that echoes the credentials:", rows)
	p.stop(t, 30*time.Second)
	out := p.out.String()
	leaks("worker output", out)
	if !strings.Contains(out, `"level":"DEBUG"`) || !strings.Contains(out, "[redacted]") {
		t.Errorf("want debug logs that show redacted origin text; output:\n%s", out)
	}
}
