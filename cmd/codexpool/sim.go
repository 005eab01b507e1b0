package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/codexpool/codexpool/worker/codextest"
)

const simTrailer = `The simulator speaks the Codex Responses WebSocket protocol with deterministic answers, an
optional upgrade-rate limit (403 above it) and fault injection, and the HTTP streaming fallback
(POST with Accept: text/event-stream) on the same URL. Nothing is generated: every answer is
"[codexpool sim] " and then --words words picked by hashing the prompt, so the same prompt always
gets the same answer. Unknown request fields are ignored; with --strict they are refused as the
real origin refuses them (400 unsupported_parameter naming the field: metadata, temperature, …). Point workers at it with
CODEXPOOL_CODEX_URL=<the printed URL> and CODEXPOOL_CODEX_TOKEN=<--token, or anything if unset>.

Accounts (--accounts FILE, YAML or JSON): a list of
  {name, token, account_id, upgrade_rate, upgrade_burst, plan_type, windows: [{length: 5h, budget: 100}]}
Each account has its own upgrade bucket and usage windows (budget = completed responses per
window, reported in x-codex-* headers and codex.rate_limits events; exhausted accounts get
usage_limit_reached). With accounts, every request needs an account's token or a login's access
token: --write-login alice=/tmp/alice/auth.json writes a Codex CLI auth.json whose tokens expire
after --token-lifetime and refresh at the printed refresh URL (rotating, single-use; a reused
refresh token revokes its family). Point workers at it with CODEXPOOL_ACCOUNTS or
CODEXPOOL_CODEX_AUTH_FILE and CODEXPOOL_CODEX_REFRESH_URL=<the printed refresh URL>.

Control (HTTP on the same address):
  GET  /_sim/stats                          counters as JSON (also printed on SIGUSR1 and on exit)
  GET  /_sim/accounts                       per-account counters and usage windows
  GET  /_sim/login?account=NAME             the auth.json of a new login
  POST /_sim/limit?rate=5&burst=5           change the upgrade limit at run time (rate 0 = none)
  POST /_sim/limit?account=NAME&rate=1      change one account's upgrade limit
  POST /_sim/reject?n=3&status=403          answer the next n upgrades (or HTTP requests) with status
  POST /_sim/fault?n=1&kind=failed          give the next n responses a fault
  POST /_sim/usage?account=NAME&window=0&used=100   set a usage window's count
  POST /_sim/refresh_fault?n=1&kind=slow    hurt the next n refreshes: slow, 500, garbage, no_refresh
  POST /_sim/ws?off=true                    answer upgrades with 426 (HTTP streaming keeps working)
Per request: metadata {"sim_fault": "failed", "sim_latency_ms": "200", "sim_words": "5"}.
Faults: drop, failed, incomplete, bad_json, stall, binary, error, error:429, error_nostatus,
conn_limit, close1008, overloaded (an error event server_is_overloaded inside the 200 stream),
overloaded_failed (response.failed with that code), context_length (response.failed with code
context_length_exceeded), context_length_error (that code in a 400 error event).

Tool calls: a directive in the text of the last user message,
  [sim:tool name=Bash args={"command":"echo hi > f.txt"}]
is answered with a function_call output item (call_id, name, arguments streamed as
response.function_call_arguments.delta/done); several directives = parallel calls. The name must
be declared in the request's tools, else the answer is text saying so. --tool-call 'name=Bash
args={...}' (repeatable) makes the same calls for every request without a directive. A request
whose input sends function_call_output items back (each with its function_call; no assistant
message and no user message with a directive after them) is answered with text quoting them:
"Tool Bash returned: <output>".
Reasoning: with "include": ["reasoning.encrypted_content"] the answer starts with a reasoning
item (summary streamed, opaque encrypted_content, usage reasoning_tokens); sending the item back
is accepted, forged encrypted_content is refused.
Prompt cache (per account, off with --no-prompt-cache): a repeated prefix (whole 256-byte blocks)
of instructions+tools+input is reported in usage.input_tokens_details.cached_tokens.
`

// loginTarget is one --write-login NAME=PATH.
type loginTarget struct{ account, path string }

func runSim(ctx context.Context, e env, args []string) error {
	fs := newFlags(e, "sim", "sim [--addr HOST:PORT] [flags]", simTrailer)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	var opts codextest.Options
	bindSimFlags(fs.FlagSet, &opts)
	bindSimToolFlags(fs.FlagSet, &opts)
	accountsFile := fs.String("accounts", "", "accounts file (YAML or JSON list; see below)")
	var logins []loginTarget
	fs.Func("write-login", "at start, write the auth.json of a new login of account NAME to PATH, given as `NAME=PATH` (mode 0600; repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("want NAME=PATH, got %q", v)
		}
		logins = append(logins, loginTarget{name, path})
		return nil
	})
	if err := fs.parse(e, args); err != nil {
		return err
	}
	if err := simAccounts(&opts, *accountsFile, logins); err != nil {
		return err
	}
	srv, err := codextest.Listen(*addr, opts)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	for _, l := range logins {
		if err := writeLogin(srv, l); err != nil {
			srv.Close()
			return fmt.Errorf("sim: --write-login: %w", err)
		}
	}
	fmt.Fprintf(e.stdout, "codexpool sim: origin %s\ncodexpool sim: http origin %s\ncodexpool sim: refresh %s\ncodexpool sim: control %s/stats\n",
		srv.URL, srv.HTTPURL, srv.RefreshURL, srv.ControlURL)
	for _, l := range logins {
		fmt.Fprintf(e.stdout, "codexpool sim: login for %s written to %s\n", l.account, l.path)
	}
	serveSim(ctx, e, srv)
	return nil
}

// bindSimFlags registers the simulator's options as flags on fs, with the current field values
// as defaults: --latency --ttft --words --upgrade-rate --upgrade-burst --retry-after --max-conns
// --max-conn-age --token --token-lifetime --refresh-latency --ws-off. Accounts have no flag:
// see codextest.LoadAccounts. `codexpool bench` binds the same flags.
func bindSimFlags(fs *flag.FlagSet, o *codextest.Options) {
	fs.DurationVar(&o.Latency, "latency", o.Latency, "time from response.create to response.completed")
	fs.DurationVar(&o.TTFT, "ttft", o.TTFT, "time to the first text delta (0 = evenly spaced)")
	fs.IntVar(&o.Words, "words", o.Words, "answer length in words (0 = 8)")
	fs.Float64Var(&o.UpgradeRate, "upgrade-rate", o.UpgradeRate, "new WebSocket upgrades accepted per second, above it 403 (0 = unlimited)")
	fs.IntVar(&o.UpgradeBurst, "upgrade-burst", o.UpgradeBurst, "upgrade token bucket size (0 = max(1, ceil(rate)))")
	fs.DurationVar(&o.RetryAfter, "retry-after", o.RetryAfter, "Retry-After sent with rate-limit 403s (0 = none)")
	fs.IntVar(&o.MaxConns, "max-conns", o.MaxConns, "open socket cap, above it 503 (0 = unlimited)")
	fs.DurationVar(&o.MaxConnAge, "max-conn-age", o.MaxConnAge, "socket lifetime before websocket_connection_limit_reached (0 = never)")
	fs.StringVar(&o.Token, "token", o.Token, "required bearer token (empty = any; ignored with accounts)")
	fs.DurationVar(&o.TokenLifetime, "token-lifetime", o.TokenLifetime, "lifetime of issued access tokens (0 = 1h)")
	fs.DurationVar(&o.RefreshLatency, "refresh-latency", o.RefreshLatency, "delay of every /oauth/token answer (0 = none)")
	fs.BoolVar(&o.WSOff, "ws-off", o.WSOff, "answer every WebSocket upgrade with 426; HTTP streaming keeps working")
}

// bindSimToolFlags registers the flags of `codexpool sim` alone: --tool-call (repeatable),
// --no-prompt-cache and --strict.
func bindSimToolFlags(fs *flag.FlagSet, o *codextest.Options) {
	fs.Func("tool-call", "answer every request without a [sim:tool ...] directive with this function call, given as `'name=NAME args={JSON}'` (repeatable: parallel calls)", func(v string) error {
		tc, err := codextest.ParseToolCall(v)
		if err != nil {
			return err
		}
		o.ToolCalls = append(o.ToolCalls, tc)
		return nil
	})
	fs.BoolVar(&o.NoPromptCache, "no-prompt-cache", o.NoPromptCache, "report no cached_tokens (switch the per-account prompt cache off)")
	fs.BoolVar(&o.Strict, "strict", o.Strict, "refuse requests with a field the real origin does not accept (metadata, temperature, top_p, max_output_tokens, unknown names), as it does: 400 unsupported_parameter")
}

// simAccounts loads --accounts into opts and checks that every --write-login names one of them.
func simAccounts(opts *codextest.Options, file string, logins []loginTarget) error {
	if file != "" {
		accts, err := codextest.LoadAccounts(file)
		if err != nil {
			return exitError{code: 2, msg: "sim: --accounts: " + err.Error()}
		}
		opts.Accounts = accts
	}
	for _, l := range logins {
		if !hasAccount(opts.Accounts, l.account) {
			return exitError{code: 2, msg: fmt.Sprintf("sim: --write-login: no account %q (see --accounts)", l.account)}
		}
	}
	return nil
}

// serveSim prints the stats on SIGUSR1 until ctx ends, then closes srv and prints them a last
// time.
func serveSim(ctx context.Context, e env, srv *codextest.Server) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	printStats := func(prefix string) {
		b, _ := json.Marshal(srv.Stats())
		fmt.Fprintf(e.stdout, "codexpool sim: %s %s\n", prefix, b)
	}
	for {
		select {
		case <-usr1:
			printStats("stats")
		case <-ctx.Done():
			srv.Close()
			printStats("final stats")
			return
		}
	}
}

func hasAccount(accts []codextest.Account, name string) bool {
	for _, a := range accts {
		if a.Name == name {
			return true
		}
	}
	return false
}

// writeLogin writes a new login's auth.json to l.path atomically (a temporary file in the same
// directory, renamed), so a worker watching the file never reads half of it; the file is 0600
// because it holds credentials.
func writeLogin(srv *codextest.Server, l loginTarget) error {
	login, err := srv.Logins.Issue(l.account)
	if err != nil {
		return err
	}
	dir := filepath.Dir(l.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".auth-*.json") // created 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename, there is nothing left to remove
	if _, err := f.Write(login.AuthJSON()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), l.path)
}
