package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codextest"
)

// The sticky tests run worker processes with three accounts on a JetStream server: the
// sessions bucket is what binds a session to its account across workers and restarts.

var stickyAccts = []string{"sa", "sb", "sc"}

// newStickyCluster starts a JetStream cluster with three simulator accounts (usage windows, so
// load alone spreads requests) and two workers using them.
func newStickyCluster(t *testing.T) *cluster {
	t.Helper()
	var accts []codextest.Account
	var file strings.Builder
	for _, n := range stickyAccts {
		accts = append(accts, codextest.Account{Name: n, Token: acctToken(n), Windows: []codextest.Window{{Length: time.Hour, Budget: 1000}}})
		fmt.Fprintf(&file, "- {name: %s, token: %s}\n", n, acctToken(n))
	}
	c, _, _ := newJobsCluster(t, codextest.Options{Words: 3, Accounts: accts})
	path := writeAccounts(t, file.String())
	for _, id := range []string{"ws1", "ws2"} {
		c.startWorker(id, "CODEXPOOL_ACCOUNTS="+path, "CODEXPOOL_JOBS=off")
	}
	return c
}

// servedBy returns the account whose completions grew since before, "" when none did.
func servedBy(c *cluster, before map[string]int64) string {
	for _, n := range stickyAccts {
		if c.sim.Accounts.Stats(n).Completed > before[n] {
			return n
		}
	}
	return ""
}

func completions(c *cluster) map[string]int64 {
	out := map[string]int64{}
	for _, n := range stickyAccts {
		out[n] = c.sim.Accounts.Stats(n).Completed
	}
	return out
}

// TestE2EStickyClaudeCode is issue 24's target 5: Claude Code's session header through a
// gateway's /v1/messages: 5 turns of one conversation (each resending the whole of it) go to one
// account, with a gateway restart after the third, and the turns after the first report the
// account's prompt cache as cache_read_input_tokens. Other sessions' requests between the turns
// move the load, so headroom alone would spread the turns.
func TestE2EStickyClaudeCode(t *testing.T) {
	c := newStickyCluster(t)
	gw, base := c.startGateway()
	var msgs []map[string]string
	used := map[string]bool{}
	for i := range 5 {
		if i == 3 {
			gw.stop(t, 30*time.Second)
			_, base = c.startGateway()
		}
		// Long turns: the simulator caches prefixes in 256-byte blocks.
		msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("turn %d: %s", i, strings.Repeat("a long conversation about the pool's sticky routing. ", 8))})
		before := completions(c)
		reply := postMessages(t, base, msgs, map[string]string{"X-Claude-Code-Session-Id": "cc-session-1"})
		acct := servedBy(c, before)
		used[acct] = true
		t.Logf("turn %d: account %s, input %d, cache_read_input_tokens %d", i, acct, reply.Usage.InputTokens, reply.Usage.CacheRead)
		if i > 0 && reply.Usage.CacheRead == 0 {
			t.Errorf("turn %d: cache_read_input_tokens 0, want the account's prompt cache to serve the repeated prefix", i)
		}
		msgs = append(msgs, map[string]string{"role": "assistant", "content": reply.Text()})
		// Another session's first turn moves the load.
		postMessages(t, base, []map[string]string{{"role": "user", "content": "other"}}, map[string]string{"X-Claude-Code-Session-Id": fmt.Sprintf("other-%d", i)})
	}
	if len(used) != 1 {
		t.Errorf("the session's 5 turns went to accounts %v, want one", used)
	}
}

type messagesReply struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Usage struct {
		InputTokens int `json:"input_tokens"`
		CacheRead   int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

func (r messagesReply) Text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// postMessages posts one /v1/messages request with hdr and decodes its reply.
func postMessages(t *testing.T, base string, msgs []map[string]string, hdr map[string]string) messagesReply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": msgs})
	req, err := http.NewRequestWithContext(ctxT(t, 30*time.Second), http.MethodPost, base+"/v1/messages", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", gatewayKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/messages: %d %s", resp.StatusCode, data)
	}
	var r messagesReply
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("/v1/messages reply %s: %v", data, err)
	}
	return r
}

// TestE2EStickyExhaustedAnd502 is issue 24's target 4 over NATS (session_id header), with two
// worker processes: an injected origin error fails one turn and leaves the binding; the
// session's account then runs out mid-conversation: the next turn moves once, and the session
// sticks to its new account.
func TestE2EStickyExhaustedAnd502(t *testing.T) {
	c := newStickyCluster(t)
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderStickySession, "codex-session-1")
	turn := func(i int) (string, error) {
		before := completions(c)
		_, err := c.client.Generate(ctxT(t, 30*time.Second), request(fmt.Sprintf("turn %d", i), nil), hdr)
		return servedBy(c, before), err
	}
	other := func(i int) {
		h := nats.Header{}
		h.Set(schemas.HeaderStickySession, fmt.Sprintf("other-%d", i))
		if _, err := c.client.Generate(ctxT(t, 30*time.Second), request("other", nil), h); err != nil {
			t.Fatal(err)
		}
	}
	first, err := turn(0)
	if err != nil {
		t.Fatal(err)
	}
	c.sim.Faults.Next(codextest.AtResponse, 1, codextest.FaultError)
	if _, err := turn(1); err == nil {
		t.Fatal("the turn with the injected origin error succeeded, want it to fail")
	}
	for i := 2; i < 5; i++ {
		other(i)
		got, err := turn(i)
		if err != nil {
			t.Fatal(err)
		}
		if got != first {
			t.Errorf("turn %d after the injected error went to %s, want %s: one failure must not move the binding", i, got, first)
		}
	}
	if err := c.sim.Accounts.SetUsage(first, 0, 1000); err != nil {
		t.Fatal(err)
	}
	moved, err := turn(5)
	if err != nil || moved == first || moved == "" {
		t.Fatalf("the turn that found %s exhausted: account %q, %v; want it to move to another and succeed", first, moved, err)
	}
	for i := 6; i < 10; i++ {
		other(i)
		got, err := turn(i)
		if err != nil {
			t.Fatal(err)
		}
		if got != moved {
			t.Errorf("turn %d after the move went to %s, want %s (the session sticks to its new account)", i, got, moved)
		}
	}
	t.Logf("session on %s; one injected error kept it there; %s ran out and the session moved once, to %s (refusals at the origin: %d)",
		first, first, moved, c.sim.Accounts.Stats(first).UsageLimited)
	// Each worker learns of the exhaustion from one refusal (this session's turn, or another
	// session's first turn).
	if n := c.sim.Accounts.Stats(first).UsageLimited; n > 2 {
		t.Errorf("the exhausted account refused %d requests, want at most one per worker (2)", n)
	}
}

// TestBenchSessions runs `codexpool bench --sessions` small: with sticky routing every turn after
// the first hits its account's prompt cache, and the cached share equals the one-account row's;
// without it, turns spread and the share drops.
func TestBenchSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	var file strings.Builder
	for _, n := range stickyAccts {
		fmt.Fprintf(&file, "- {name: %s, token: %s}\n", n, acctToken(n))
	}
	out, err := exec.Command(binPath, "bench", "--accounts", writeAccounts(t, file.String()), "--workers", "2",
		"--sessions", "6", "--turns", "4", "--latency", "20ms", "--json", "--quiet").Output()
	if err != nil {
		t.Fatalf("bench --sessions: %v\n%s", err, out)
	}
	var rows []struct {
		Mode          string  `json:"mode"`
		OK            int     `json:"ok"`
		CacheHitShare float64 `json:"cache_hit_share"`
		CachedShare   float64 `json:"cached_share"`
	}
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) != 3 {
		t.Fatalf("bench --sessions --json: %v, %d rows, want 3\n%s", err, len(rows), out)
	}
	t.Logf("%+v", rows)
	sticky, spread, one := rows[0], rows[1], rows[2]
	for _, r := range rows {
		if r.OK != 24 {
			t.Errorf("%s: %d of 24 turns ok", r.Mode, r.OK)
		}
	}
	if sticky.CacheHitShare != 1 || sticky.CachedShare < one.CachedShare-0.05 {
		t.Errorf("sticky: %.3f of turns 2+ hit the cache and %.3f of their input was cached, want 1 and within 5 points of one account's %.3f",
			sticky.CacheHitShare, sticky.CachedShare, one.CachedShare)
	}
	if spread.CachedShare >= sticky.CachedShare {
		t.Errorf("not sticky cached %.3f, sticky %.3f: want stickiness to matter", spread.CachedShare, sticky.CachedShare)
	}
}
