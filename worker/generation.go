package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/codexpool/codexpool/internal/tracing"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker/codex"
)

// Generate runs one generation. With emit nil it returns the one-shot reply payload (the
// response object with output_text); otherwise it passes every upstream event to emit, in
// order, and returns a nil payload. Errors are *schemas.Error or ctx.Err().
//
// With Config.Accounts, Generate picks the account (see docs/routing.md: not cooling down, not
// at its MaxConcurrent, the session's account, the soonest start, the most headroom). The
// session is Request.Session, else the prompt_cache_key; its binding to an account
// (Options.Bindings) is written when the generation completes on an account and the session was
// unbound or its account is cooling down; a failure never moves it. A generation that finds no
// account able to take it waits up to Config.AccountQueueTimeout, then gets 429 worker_busy. A
// generation the origin refuses for the account's limits (429) or credentials (401) before any
// other event arrived moves to the next account, invisibly to the caller; the refused account
// cools down. When every account is cooling down, Generate answers at once, without upstream
// traffic, with 429 upstream_rate_limited (401 when credentials were the reason) whose RetryAfter
// is when the first account is usable again (at least 1 s) and whose Account names it. Errors
// from the origin name the account that answered.
func (w *Worker) Generate(ctx context.Context, req *schemas.Request, emit func(event []byte) error) ([]byte, error) {
	start := time.Now()
	frame, err := req.Upstream(w.cfg.Model)
	if err != nil {
		return nil, schemas.Errorf(schemas.CodeInvalidRequest, "%v", err)
	}
	g := &generation{w: w, req: req, emit: emit, frame: frame, session: cmp.Or(req.StickyKey, req.PromptCacheKey()), start: start}
	_, g.admitSpan = tracing.Start(ctx, "admit")
	defer g.admitted()
	if err := g.enterSession(ctx); err != nil {
		g.report(ctx, err)
		return nil, err
	}
	defer g.leaveSession()
	g.lookup(ctx)
	err = g.route(ctx)
	g.settle(ctx, err)
	err = g.release(err)
	out, err := g.reply(err)
	g.report(ctx, err)
	return out, err
}

// generation is one request on its way through the worker's accounts: what Generate's steps
// share. It lives on the generation's goroutine (codex calls onEvent there), so it needs no lock.
type generation struct {
	w       *Worker
	req     *schemas.Request
	emit    func(event []byte) error // nil for a one-shot reply
	frame   []byte                   // the upstream request
	session string                   // the sticky-routing key: session headers, else prompt_cache_key; "" = none
	start   time.Time
	bind    binding   // the session's binding when the generation began
	bound   *account  // the account bind names; nil = unbound (or an account this worker lacks)
	queued  time.Time // when the generation first held (no account could take it); zero = never
	unlease func()    // gives the running try's slot back; nil = it holds none
	sess    *session  // the continuation session the request belongs to; nil for none (session.go)
	cont    bool      // the request continues a response of sess (previous_response_id)

	tried      []*account    // accounts picked, in order; the last is the one trying (or that tried)
	try        attempt       // what the last account's try has seen
	res        *codex.Result // the last try's result; nil when it never reached the origin
	total      codex.Result  // summed over the accounts tried
	reached    bool          // a try reached an account's client (some res was not nil)
	firstEvent time.Duration // from start to the first upstream event; 0 = none arrived
	admitSpan  trace.Span    // from Generate to the first account's try: session, binding, pick, wait
}

// admitted ends the admission span (at the first try, or at the end without one).
func (g *generation) admitted() {
	if g.admitSpan.IsRecording() {
		g.admitSpan.SetAttributes(attribute.Bool("codexpool.continuation", g.cont), attribute.Bool("codexpool.queued", !g.queued.IsZero()))
		g.admitSpan.End()
	}
}

// attempt is what one account's try has seen of the origin's events.
type attempt struct {
	events    int
	firstType string
	held      []byte // a leading error event, held back while the request may still move
	refusal   string // the origin refused the account: "limits" or "credentials" (see Worker.refused); "" if not
	started   bool   // the router knows the try as started (its first event was an answer)
}

// onlyRefusal reports whether the try saw nothing the caller must see: no event, or just the
// leading error event of a refusal.
func (t attempt) onlyRefusal() bool {
	return t.events == 0 || (t.events == 1 && t.firstType == "error")
}

// account returns the account trying (or that tried last); nil before the first pick.
func (g *generation) account() *account {
	if len(g.tried) == 0 {
		return nil
	}
	return g.tried[len(g.tried)-1]
}

// route tries accounts until one answers, the error is the caller's, or none is left, and returns
// the last try's error.
func (g *generation) route(ctx context.Context) error {
	var err error
	for {
		now := time.Now()
		a, hold, cerr := g.w.router.pick(now, g.want(now), g.excluded(), g.queued)
		if hold {
			if g.queued.IsZero() {
				g.queued = now
			}
			if g.queuedTooLong(now) {
				return g.busy()
			}
			if herr := g.hold(ctx); herr != nil {
				return herr
			}
			continue
		}
		if a == nil && g.cont {
			return errNotFound("the session's account cannot take it now")
		}
		if a == nil {
			return g.w.noAccountLeft(err, cerr)
		}
		if !g.lease(ctx, a) {
			g.w.router.unpick(a)
			continue
		}
		err = g.run(ctx, a)
		if err == nil || !g.moveOn(ctx, a, err) {
			return err
		}
	}
}

// want is the account the generation holds out for at now: a continuation's session account,
// else its sticky binding's, until Config.StickyWait has passed.
func (g *generation) want(now time.Time) *account {
	if g.cont && g.sess.acct != nil {
		return g.sess.acct // a continuation runs on its session's account alone (excluded)
	}
	if g.bound == nil || now.Sub(g.start) > g.w.sticky.wait {
		return nil
	}
	return g.bound
}

// lookup reads the session's binding.
func (g *generation) lookup(ctx context.Context) {
	b, err := g.w.sticky.lookup(ctx, g.session)
	if err != nil {
		g.w.log.LogAttrs(ctx, slog.LevelWarn, "sticky: cannot read the session's binding; routing without it",
			slog.String("request_id", g.req.ID), slog.String("error", err.Error()))
	}
	g.bind, g.bound = b, nil
	if b.account != "" {
		g.bound = g.w.router.named(b.account)
	}
}

// settle binds the session to the account that completed the generation, when it was unbound
// or its bound account is cooling down (see sticky).
func (g *generation) settle(ctx context.Context, err error) {
	a := g.account()
	if err != nil || a == nil || g.bind.key == "" {
		return
	}
	now := time.Now()
	moved := g.bound == nil || g.w.router.cooling(g.bound, now)
	wrote, serr := g.w.sticky.settle(ctx, g.bind, a.name, moved, now)
	switch {
	case serr != nil:
		g.w.log.LogAttrs(ctx, slog.LevelWarn, "sticky: cannot write the session's binding",
			slog.String("request_id", g.req.ID), slog.String("account", a.name), slog.String("error", serr.Error()))
	case wrote && g.bind.account != "" && g.bind.account != a.name:
		g.w.log.LogAttrs(ctx, slog.LevelInfo, "sticky: session moved to another account",
			slog.String("request_id", g.req.ID), slog.String("from", g.bind.account), slog.String("to", a.name))
	}
}

// hold waits for an account to free up, counting the wait as gate wait.
func (g *generation) hold(ctx context.Context) error {
	t := time.Now()
	err := g.w.router.hold(ctx)
	g.total.GateWait += time.Since(t)
	return err
}

// run tries the generation on a, which pick chose.
func (g *generation) run(ctx context.Context, a *account) (err error) {
	g.admitted()
	span := trace.SpanFromContext(ctx)
	if tracing.Recording(ctx) {
		ctx, span = tracing.Start(ctx, "account", trace.WithAttributes(attribute.String("codexpool.account", a.name),
			attribute.Int("codexpool.try", len(g.tried)+1)))
	}
	defer func() { endTry(span, g.try, err) }()
	g.tried = append(g.tried, a)
	g.try = attempt{}
	if g.w.policy.name {
		schemas.NoteAccount(ctx, a.name)
	}
	res, err := g.upstream(ctx, a)
	if err != nil {
		// Before the account frees up (its slot, started, finish): a generation held for it,
		// woken then, must find it cooling down, not on a last call or final stretch with
		// nothing running.
		g.try.refusal = g.w.refused(a, err)
	}
	if g.unlease != nil {
		g.unlease()
		g.unlease = nil
	}
	if !g.try.started {
		g.w.router.started(a, false) // no answer: no event, or a leading error
	}
	g.res = res
	if res != nil {
		g.reached = true
		g.total.Attempts += res.Attempts
		g.total.GateWait += res.GateWait
		g.total.Events, g.total.Reused, g.total.Retried = res.Events, res.Reused, g.total.Retried || res.Retried
	}
	g.w.router.finish(a, err == nil)
	if err == nil {
		a.completed.Add(1)
	}
	return err
}

// onEvent passes one upstream event of the current try on to emit; a leading error event is held
// back while the policy may still move the request.
func (g *generation) onEvent(ev codex.Event) error {
	if g.firstEvent == 0 {
		g.firstEvent = max(time.Since(g.start), time.Nanosecond)
	}
	g.try.events++
	if g.try.events == 1 {
		g.try.firstType = ev.Type
	}
	if !g.try.started && (ev.Type != "error" || g.try.events > 1) {
		// An answer (an event after a leading error too): the account is no longer starting. A
		// lone leading error is most likely a refusal, which run records before the account
		// counts as started.
		g.try.started = true
		g.w.router.started(g.account(), true)
	}
	if g.emit == nil {
		return nil
	}
	if g.try.events == 1 && ev.Type == "error" && g.w.policy.move {
		g.try.held = ev.Data
		return nil
	}
	return g.emit(ev.Data)
}

// moveOn reports whether the generation moves on from a, whose try ended in err, to the next
// account: when the policy moves requests, the origin refused a for its limits or credentials
// (run cooled it down), and the caller has seen nothing of it.
func (g *generation) moveOn(ctx context.Context, a *account, err error) bool {
	reason := g.try.refusal
	if reason == "" || g.cont || !g.try.onlyRefusal() || !g.w.policy.move || ctx.Err() != nil {
		return false
	}
	a.moved.Add(1)
	g.try.held = nil // the refusal stays invisible
	g.w.log.LogAttrs(ctx, slog.LevelDebug, "account refused the request; moving on",
		slog.String("request_id", g.req.ID), slog.String("account", a.name), slog.String("reason", reason),
		slog.String("error", err.Error()))
	return true
}

// release emits a held error event (it stays: the generation did not move) and names the
// account in the error when the policy names accounts.
func (g *generation) release(err error) error {
	if g.try.held != nil {
		if eerr := g.emit(g.try.held); eerr != nil {
			err = eerr
		}
	}
	a := g.account()
	if e, ok := schemas.AsError(err); ok && a != nil && g.w.policy.name && e.Account == "" {
		cp := *e // errors may be shared (a closed origin's last 403 answers every waiting request)
		cp.Account = a.name
		err = &cp
	}
	return err
}

// reply returns the one-shot reply payload of a generation that succeeded without emit.
func (g *generation) reply(err error) ([]byte, error) {
	if err != nil || g.emit != nil {
		return nil, err
	}
	out, err := schemas.WithOutputText(g.res.Response)
	if err != nil {
		return nil, schemas.Errorf(schemas.CodeUpstreamError, "response.completed carried a bad response object: %v", err)
	}
	return out, nil
}

// result is what the generation's logs report of its sockets: the sums over the accounts tried;
// nil when it never reached an account's client nor waited.
func (g *generation) result() *codex.Result {
	if g.reached || g.total.GateWait > 0 {
		return &g.total
	}
	return nil
}

// report tells the observer and the logs how the generation ended.
func (g *generation) report(ctx context.Context, err error) {
	d, res, a := time.Since(g.start), g.result(), g.account()
	if obs := g.w.obs; obs != nil {
		o := Generation{OK: err == nil, Duration: d, FirstEvent: g.firstEvent, Metered: g.req.Metered,
			Model: cmp.Or(g.req.Model, g.w.cfg.Model, DefaultModel)}
		if a != nil {
			o.Account = a.name
		}
		if e, ok := schemas.AsError(err); ok {
			o.Code = string(e.Code)
		} else if err != nil {
			o.Code = string(schemas.CodeUpstreamError)
		}
		if g.res != nil {
			o.Usage = usageOf(g.res.Response)
		}
		if res != nil && res.Attempts > 0 {
			o.Dialed, o.GateWait = true, res.GateWait
		}
		obs.ObserveGeneration(o)
	}
	g.w.logResult(ctx, g.req, a, len(g.tried), res, err, d, g.firstEvent)
	if a != nil {
		g.w.logGate(ctx, g.req, a, res)
	}
}

// usageOf returns the "usage" member of a response object, nil when it has none.
func usageOf(response []byte) []byte {
	var r struct {
		Usage json.RawMessage `json:"usage"`
	}
	if len(response) == 0 || json.Unmarshal(response, &r) != nil || len(r.Usage) == 0 || string(r.Usage) == "null" {
		return nil
	}
	return r.Usage
}
