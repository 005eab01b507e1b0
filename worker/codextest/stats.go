package codextest

import (
	"sync/atomic"
	"time"
)

// Stats are the server's counters, as returned by [Server.Stats] and GET ControlURL+"/stats".
type Stats struct {
	UpgradesAccepted int64 `json:"upgrades_accepted"` // 101 sent
	UpgradesRejected int64 `json:"upgrades_rejected"` // any upgrade not answered with 101 (incl. hang/drop faults)
	Rejected403      int64 `json:"rejected_403"`      // of those, with 403 (rate limit or Faults.Reject)
	Upgrades426      int64 `json:"upgrades_426"`      // of those, with 426 (WSOff or Faults.Reject)
	Responses        int64 `json:"responses"`         // responses started, over WebSocket and HTTP streaming
	SSEResponses     int64 `json:"sse_responses"`     // of those, over HTTP streaming
	Completed        int64 `json:"completed"`         // response.completed events sent, both transports
	ReusedResponses  int64 `json:"reused_responses"`  // responses on a socket that had started one before
	BusyRejected     int64 `json:"busy_rejected"`     // response.create refused: one already in flight
	Faults           int64 `json:"faults"`            // faults applied: response-, upgrade- and refresh-level
	OpenSockets      int64 `json:"open_sockets"`      // upgraded sockets open now
	PeakOpenSockets  int64 `json:"peak_open_sockets"` // most open at once since start or ResetStats

	// HTTPRejected counts HTTP streaming requests answered with an error status instead of a
	// stream (Faults.Reject, 401, a bad body, usage_limit_reached).
	HTTPRejected int64 `json:"http_rejected"`
	// Unauthorized counts 401s, upgrades and HTTP requests.
	Unauthorized int64 `json:"unauthorized"`
	// UsageLimited counts responses refused with usage_limit_reached, both transports.
	UsageLimited int64 `json:"usage_limited"`
	// Unsupported counts requests refused for a field the origin does not accept (Options.Strict).
	Unsupported int64 `json:"unsupported"`
	// ClientAborts counts responses whose client went away before their terminal event: the
	// socket closed or dropped mid-response, or the HTTP request ended mid-stream. Ends the
	// server causes (faults, CloseClientConnections, MaxConnAge, Close) are not counted.
	ClientAborts int64 `json:"client_aborts"`
	// Pings counts the WebSocket pings clients sent (each answered with a pong).
	Pings int64 `json:"pings"`
	// LastAbort is when the latest client abort was seen (zero = none since start or ResetStats).
	LastAbort time.Time `json:"last_abort,omitzero"`

	RefreshCalls       int64 `json:"refresh_calls"`       // POSTs to /oauth/token
	RefreshOK          int64 `json:"refresh_ok"`          // of those, that spent a valid refresh token and issued new tokens
	RefreshReused      int64 `json:"refresh_reused"`      // of those, answered refresh_token_reused (the family is revoked)
	RefreshInvalidated int64 `json:"refresh_invalidated"` // of those, answered refresh_token_invalidated

	// InputTokens and CachedTokens sum usage.input_tokens and its cached_tokens over the
	// responses started with usage, so CachedTokens/InputTokens is the prompt cache's share.
	InputTokens  int64 `json:"input_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// ToolCalls counts the function_call output items of the responses started.
	ToolCalls int64 `json:"tool_calls"`
	// WebSearches counts the web_search_call output items of the responses started (websearch.go).
	WebSearches int64 `json:"web_searches"`
	// Images counts the input_image parts of the requests answered (messages and tool outputs).
	Images int64 `json:"images"`

	// FrameBytes sums the sizes of the response.create frames received over WebSockets: the
	// bytes clients sent upstream (see also Server.Turns, per frame).
	FrameBytes int64 `json:"frame_bytes"`
	// Continued counts responses that continued a previous_response_id made on their socket;
	// PreviousNotFound the previous_response_ids answered previous_response_not_found.
	Continued        int64 `json:"continued"`
	PreviousNotFound int64 `json:"previous_not_found"`

	// Compactions counts the responses that answered a compaction_trigger with a compaction
	// item; CompactedInputs the requests whose input sent an issued compaction item back.
	Compactions     int64 `json:"compactions"`
	CompactedInputs int64 `json:"compacted_inputs"`

	// Accounts are the per-account counters by Account.Name; nil without Options.Accounts.
	Accounts map[string]AccountStats `json:"accounts,omitempty"`
}

// counters are the atomically updated Stats fields; the socket counts live in the connTable,
// the aborts in the abortLog.
type counters struct {
	upgradesAccepted, upgradesRejected, rejected403, upgrades426 atomic.Int64
	responses, sse, completed, reused, busy, faults              atomic.Int64
	httpRejected, unauthorized, usageLimited, unsupported        atomic.Int64
	refreshCalls, refreshOK, refreshReused, refreshInvalidated   atomic.Int64
	frameBytes, continued, previousNotFound, images, pings       atomic.Int64
	compactions, compactedInputs                                 atomic.Int64
	tokens                                                       tokenCounters
}

// tokenCounters are the usage sums of Stats and AccountStats.
type tokenCounters struct {
	input, cached, calls, searches atomic.Int64
}

func (c *tokenCounters) reset() {
	c.input.Store(0)
	c.cached.Store(0)
	c.calls.Store(0)
	c.searches.Store(0)
}

// add counts the usage and function calls of a response's terminal event, if steps have one.
func (c *tokenCounters) add(steps []step) {
	for _, st := range steps {
		re, ok := st.ev.(*responseEvent)
		if !ok || re.Response.Usage == nil {
			continue
		}
		c.input.Add(int64(re.Response.Usage.InputTokens))
		c.cached.Add(int64(re.Response.Usage.InputTokensDetails.CachedTokens))
		for _, it := range re.Response.Output {
			switch it.(type) {
			case callItem:
				c.calls.Add(1)
			case searchItem:
				c.searches.Add(1)
			}
		}
	}
}

func (c *counters) reset() {
	for _, v := range []*atomic.Int64{&c.upgradesAccepted, &c.upgradesRejected, &c.rejected403,
		&c.upgrades426, &c.responses, &c.sse, &c.completed, &c.reused, &c.busy, &c.faults,
		&c.httpRejected, &c.unauthorized, &c.usageLimited, &c.unsupported,
		&c.refreshCalls, &c.refreshOK, &c.refreshReused, &c.refreshInvalidated,
		&c.frameBytes, &c.continued, &c.previousNotFound, &c.images, &c.pings,
		&c.compactions, &c.compactedInputs} {
		v.Store(0)
	}
	c.tokens.reset()
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	open, peak := s.conns.counts()
	aborts, lastAbort := s.aborts.read()
	return Stats{
		UpgradesAccepted:   s.c.upgradesAccepted.Load(),
		UpgradesRejected:   s.c.upgradesRejected.Load(),
		Rejected403:        s.c.rejected403.Load(),
		Upgrades426:        s.c.upgrades426.Load(),
		Responses:          s.c.responses.Load(),
		SSEResponses:       s.c.sse.Load(),
		Completed:          s.c.completed.Load(),
		ReusedResponses:    s.c.reused.Load(),
		BusyRejected:       s.c.busy.Load(),
		Faults:             s.c.faults.Load(),
		Pings:              s.c.pings.Load(),
		OpenSockets:        open,
		PeakOpenSockets:    peak,
		HTTPRejected:       s.c.httpRejected.Load(),
		Unauthorized:       s.c.unauthorized.Load(),
		UsageLimited:       s.c.usageLimited.Load(),
		Unsupported:        s.c.unsupported.Load(),
		ClientAborts:       aborts,
		LastAbort:          lastAbort,
		RefreshCalls:       s.c.refreshCalls.Load(),
		RefreshOK:          s.c.refreshOK.Load(),
		RefreshReused:      s.c.refreshReused.Load(),
		RefreshInvalidated: s.c.refreshInvalidated.Load(),
		InputTokens:        s.c.tokens.input.Load(),
		CachedTokens:       s.c.tokens.cached.Load(),
		ToolCalls:          s.c.tokens.calls.Load(),
		WebSearches:        s.c.tokens.searches.Load(),
		Images:             s.c.images.Load(),
		FrameBytes:         s.c.frameBytes.Load(),
		Continued:          s.c.continued.Load(),
		PreviousNotFound:   s.c.previousNotFound.Load(),
		Compactions:        s.c.compactions.Load(),
		CompactedInputs:    s.c.compactedInputs.Load(),
		Accounts:           s.Accounts.all(time.Now()),
	}
}

// ResetStats zeroes the counters, the accounts' too, and LastAbort; PeakOpenSockets restarts
// from the sockets open now. Usage windows keep their counts (see [Accounts.SetUsage]), and
// queued faults stay (see [Faults.Clear]).
func (s *Server) ResetStats() {
	s.c.reset()
	s.Accounts.resetCounters()
	s.aborts.reset()
	s.conns.resetPeak()
	s.turns.reset()
	s.searches.reset()
}
