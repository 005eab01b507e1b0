package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/schemas"
)

// StickyResult is one row of the sessions scenario (RunSticky).
type StickyResult struct {
	Mode          string  `json:"mode"` // "sticky", "not sticky", "one account"
	Accounts      int     `json:"accounts"`
	Workers       int     `json:"workers"`
	Conversations int     `json:"conversations"`
	Turns         int     `json:"turns"`
	OK            int     `json:"ok"`
	Failed        int     `json:"failed"`
	CacheHitShare float64 `json:"cache_hit_share"` // of the turns after the first, those with cached tokens
	CachedShare   float64 `json:"cached_share"`    // cached input tokens / input tokens, turns after the first
	WallMS        int64   `json:"wall_ms"`
}

// RunSticky runs the sessions scenario: conversations concurrent conversations of turns turns
// each (every turn resends the conversation so far, with a session_id header), once with the
// workers' sticky routing, once with CODEXPOOL_STICKY=false, and once on the first account only
// (what the same conversations get sent directly to one account), side by side. It needs
// cfg.Accounts and runs cfg.Workers workers on an embedded JetStream server.
func RunSticky(ctx context.Context, cfg Config, conversations, turns int) ([]StickyResult, error) {
	if len(cfg.Accounts) == 0 || conversations < 1 || turns < 2 {
		return nil, fmt.Errorf("bench: the sessions scenario needs --accounts, --sessions >= 1 and --turns >= 2")
	}
	cfg.Sim.Accounts, cfg.Jobs = cfg.Accounts, true // JetStream: the sessions bucket
	cfg.Workers = max(cfg.Workers, 1)
	rg, err := startRig(cfg)
	if err != nil {
		return nil, err
	}
	defer rg.close()
	dir, err := os.MkdirTemp("", "codexpool-bench-sticky")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	rows := []struct {
		mode   string
		accts  int
		sticky bool
	}{{"sticky", len(cfg.Accounts), true}, {"not sticky", len(cfg.Accounts), false}, {"one account", 1, true}}
	var out []StickyResult
	for i, row := range rows {
		c := cfg
		if c.accountsFile, err = writeAccountsFile(dir, cfg.Accounts, row.accts); err != nil {
			return out, fmt.Errorf("bench: %w", err)
		}
		c.WorkerEnv = append(append([]string(nil), cfg.WorkerEnv...), fmt.Sprintf("CODEXPOOL_STICKY=%t", row.sticky),
			fmt.Sprintf("CODEXPOOL_STICKY_BUCKET=BENCH_SESSIONS_%d", i))
		res, err := runSessions(ctx, c, rg, fmt.Sprintf("codex.bench.sticky%d", i), conversations, turns)
		res.Mode, res.Accounts = row.mode, row.accts
		out = append(out, res)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// runSessions runs one row on fresh workers serving subject.
func runSessions(ctx context.Context, cfg Config, rg *rig, subject string, conversations, turns int) (StickyResult, error) {
	res := StickyResult{Workers: cfg.Workers, Conversations: conversations, Turns: turns}
	p, err := startPool(ctx, cfg, rg, "adaptive", subject)
	if err != nil {
		return res, err
	}
	defer p.stop()
	cl := client.New(rg.nc, client.Options{Subject: subject, Timeout: cfg.Timeout})
	var mu sync.Mutex
	var tally sessionTally
	start := time.Now()
	var wg sync.WaitGroup
	for c := range conversations {
		wg.Go(func() {
			// The row's subject in the text: no row hits the prompt cache another row filled.
			t := converse(ctx, cl, fmt.Sprintf("%s-conversation-%d", subject, c), turns)
			mu.Lock()
			tally.add(t)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.WallMS = time.Since(start).Milliseconds()
	tally.fill(&res)
	return res, ctx.Err()
}

// sessionTally sums what the conversations' turns after the first reported.
type sessionTally struct {
	ok, failed, later, hits int
	input, cached           int64
}

func (s *sessionTally) add(t sessionTally) {
	s.ok, s.failed, s.later, s.hits = s.ok+t.ok, s.failed+t.failed, s.later+t.later, s.hits+t.hits
	s.input, s.cached = s.input+t.input, s.cached+t.cached
}

func (s sessionTally) fill(r *StickyResult) {
	r.OK, r.Failed = s.ok, s.failed
	if s.later > 0 {
		r.CacheHitShare = float64(s.hits) / float64(s.later)
	}
	if s.input > 0 {
		r.CachedShare = float64(s.cached) / float64(s.input)
	}
}

// converse runs one conversation: every turn sends everything so far (long enough for the
// simulator's 256-byte cache blocks) with the session's session_id header.
func converse(ctx context.Context, cl *client.Client, session string, turns int) sessionTally {
	var t sessionTally
	hdr := nats.Header{}
	hdr.Set(schemas.HeaderStickySession, session)
	var history strings.Builder
	for i := range turns {
		fmt.Fprintf(&history, "%s turn %d: %s\n", session, i, strings.Repeat("tell me more about sticky sessions. ", 8))
		body, _ := json.Marshal(map[string]any{"input": history.String()})
		reply, err := cl.Generate(ctx, body, hdr)
		if err != nil {
			t.failed++
			continue
		}
		t.ok++
		in, cached := replyUsage(reply.Response)
		if i > 0 {
			t.later++
			t.input += in
			t.cached += cached
			if cached > 0 {
				t.hits++
			}
		}
	}
	return t
}

// replyUsage reads usage.input_tokens and its cached_tokens from a response object.
func replyUsage(resp []byte) (input, cached int64) {
	var r struct {
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			InputDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	_ = json.Unmarshal(resp, &r)
	return r.Usage.InputTokens, r.Usage.InputDetails.CachedTokens
}

// PrintSticky writes the sessions scenario's rows as a table.
func PrintSticky(w io.Writer, rows []StickyResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\taccounts\tworkers\tconversations\tturns\tok\tfailed\tturns 2+ with a cache hit\tcached share (turns 2+)\twall")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f %%\t%.1f %%\t%s\n", r.Mode, r.Accounts, r.Workers, r.Conversations,
			r.Turns, r.OK, r.Failed, 100*r.CacheHitShare, 100*r.CachedShare, (time.Duration(r.WallMS) * time.Millisecond).String())
	}
	_ = tw.Flush()
}
