package codextest

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Event JSON shapes. Every event starts with evHead; its sequence number is set when the event is
// written, so an error event slipped into a running response keeps the socket's numbering
// monotonic.

type evHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *evHead) setSeq(n int) { h.SequenceNumber = n }

func (h *evHead) eventType() string { return h.Type }

type sequenced interface {
	setSeq(int)
	eventType() string
}

type usage struct {
	InputTokens         int          `json:"input_tokens"`
	InputTokensDetails  cachedTokens `json:"input_tokens_details"`
	OutputTokens        int          `json:"output_tokens"`
	OutputTokensDetails reasonTokens `json:"output_tokens_details"`
	TotalTokens         int          `json:"total_tokens"`
}

type cachedTokens struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasonTokens struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type respError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseObj struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Status            string             `json:"status"`
	Model             string             `json:"model"`
	Output            []any              `json:"output"` // outputItem, callItem, reasoningItem
	Usage             *usage             `json:"usage"`
	Error             *respError         `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
}

type contentPart struct {
	Type        string      `json:"type"`
	Text        string      `json:"text"`
	Annotations [0]struct{} `json:"annotations"` // always [], without allocating
}

type outputItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Status  string        `json:"status"`
	Role    string        `json:"role"`
	Content []contentPart `json:"content"`
}

type responseEvent struct {
	evHead
	Response responseObj `json:"response"`
}

type itemEvent struct {
	evHead
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"` // outputItem, callItem or reasoningItem
}

type partEvent struct {
	evHead
	ItemID       string      `json:"item_id"`
	OutputIndex  int         `json:"output_index"`
	ContentIndex int         `json:"content_index"`
	Part         contentPart `json:"part"`
}

type deltaEvent struct {
	evHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Delta        string `json:"delta"`
}

type textDoneEvent struct {
	evHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	ContentIndex int    `json:"content_index"`
	Text         string `json:"text"`
}

type errorBody struct {
	Type            string `json:"type"`
	Code            string `json:"code,omitempty"`
	Message         string `json:"message"`
	Param           string `json:"param,omitempty"`
	PlanType        string `json:"plan_type,omitempty"`
	ResetsAt        int64  `json:"resets_at,omitempty"`
	ResetsInSeconds int    `json:"resets_in_seconds,omitempty"`
}

type errorEvent struct {
	evHead
	Status  int               `json:"status,omitempty"`
	Error   errorBody         `json:"error"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Event types.
const (
	evCreated     = "response.created"
	evInProgress  = "response.in_progress"
	evItemAdded   = "response.output_item.added"
	evPartAdded   = "response.content_part.added"
	evDelta       = "response.output_text.delta"
	evTextDone    = "response.output_text.done"
	evPartDone    = "response.content_part.done"
	evItemDone    = "response.output_item.done"
	evCompleted   = "response.completed"
	evFailed      = "response.failed"
	evIncomplete  = "response.incomplete"
	evError       = "error"
	codeConnLimit = "websocket_connection_limit_reached"
	codeBusy      = "conversation_already_has_active_response"
)

func connLimitEvent() *errorEvent {
	return invalidRequestEvent(codeConnLimit, "Responses websocket connection limit reached (60 minutes). Create a new websocket connection to continue.")
}

func busyEvent() *errorEvent {
	return invalidRequestEvent(codeBusy, "Another response is already in progress on this connection; wait for it to finish.")
}

func badRequestEvent(msg string) *errorEvent { return invalidRequestEvent("invalid_request", msg) }

// invalidRequestEvent is a status 400 error event of type invalid_request_error.
func invalidRequestEvent(code, msg string) *errorEvent {
	return &errorEvent{
		evHead: evHead{Type: evError},
		Status: 400,
		Error:  errorBody{Type: "invalid_request_error", Code: code, Message: msg},
	}
}

// faultErrorEvent builds the event of FaultError ("error", "error:NNN") and FaultErrorNoStatus.
func faultErrorEvent(f Fault, now time.Time) *errorEvent {
	status := 500
	if f == FaultErrorNoStatus {
		status = 0
	} else if s := f.errorStatus(); s != 0 {
		status = s
	}
	ev := &errorEvent{evHead: evHead{Type: evError}, Status: status}
	switch {
	case status == 429:
		ev.Error = errorBody{
			Type:            "usage_limit_reached",
			Code:            "usage_limit_reached",
			Message:         "The usage limit has been reached (simulated).",
			ResetsAt:        now.Add(time.Minute).Unix(),
			ResetsInSeconds: 60,
		}
		ev.Headers = map[string]string{"retry-after": "60"}
	case status >= 400 && status < 500:
		ev.Error = errorBody{Type: "invalid_request_error", Code: "invalid_request", Message: "Invalid request (simulated status " + strconv.Itoa(status) + ")."}
	default:
		ev.Error = errorBody{Type: "server_error", Code: "server_error", Message: "The server had an error while processing your request (simulated)."}
	}
	return ev
}

// stepOp is what one step of a generation does besides (or instead of) writing an event.
type stepOp uint8

const (
	opText      stepOp = iota // write ev as a text frame
	opRaw                     // write raw as a text frame
	opBinary                  // write raw as a binary frame
	opDrop                    // close the TCP connection
	opClose1008               // send Close 1008 and close
	opCloseConn               // write ev, send Close 1000 and close
	opStall                   // stop here until the socket closes
	opInfo                    // write raw, an event outside the response's numbering (named name)
)

// step is one timed action of a generation, at offset at from response.create.
type step struct {
	at   time.Duration
	op   stepOp
	ev   sequenced
	raw  []byte
	name string // opInfo: the event type
}

// genRequest is what the server takes from a response.create frame.
type genRequest struct {
	Model    string            `json:"model"`
	Input    json.RawMessage   `json:"input"`
	Generate *bool             `json:"generate"`
	Metadata map[string]string `json:"metadata"`
	// ClientMetadata is where a pool worker sends a request's metadata (the origin refuses
	// "metadata"); its string values are read as the same per-request overrides.
	ClientMetadata json.RawMessage `json:"client_metadata"`
	// PreviousResponseID continues a response made on the same socket (continue.go).
	PreviousResponseID string `json:"previous_response_id"`
	// Instructions, Tools and Include are kept raw: a shape the server does not read must not
	// fail the frame.
	Instructions json.RawMessage `json:"instructions"`
	Tools        json.RawMessage `json:"tools"`
	Include      json.RawMessage `json:"include"`
	// Text is the text option: a json_schema or json_object format asks for structured output.
	Text json.RawMessage `json:"text"`
}

// overrides returns the per-request settings (sim_fault, sim_latency_ms, …): metadata when the
// request has it, else the string values of client_metadata.
func (r *genRequest) overrides() map[string]string {
	if r.Metadata != nil || len(r.ClientMetadata) == 0 {
		return r.Metadata
	}
	var m map[string]any
	if json.Unmarshal(r.ClientMetadata, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// plan holds the per-response settings after metadata overrides.
type plan struct {
	latency, ttft time.Duration
	words         int
	fault         Fault
	calls         []ToolCall // Options.ToolCalls: the calls of a turn without a directive
}

// schedule returns the offset of delta i (0-based) and of the completion, per Options.TTFT.
func (p plan) deltaAt(i int) time.Duration {
	if p.latency <= 0 {
		return 0
	}
	if p.ttft <= 0 {
		return time.Duration(int64(p.latency) * int64(i+1) / int64(p.words+1))
	}
	return p.ttft + time.Duration(int64(p.latency-p.ttft)*int64(i)/int64(p.words))
}

// buildSteps turns one response.create, read as t, into the timed steps of its answer; id names
// the response and its items (resp_sim<id>, msg_sim<id>, ...).
func buildSteps(p plan, req *genRequest, t *turn, id string, now time.Time) []step {
	model := req.Model
	if model == "" {
		model = "gpt-5.1-codex"
	}
	b := &stepBuilder{
		steps: make([]step, 0, p.words+10),
		resp:  responseObj{ID: "resp_sim" + id, Object: "response", CreatedAt: now.Unix(), Model: model},
		id:    id,
	}
	if b.faulted(p, now) {
		return b.steps
	}
	if req.Generate != nil && !*req.Generate {
		ev := b.respEvent(evCompleted, "completed")
		ev.Response.Usage = &usage{}
		b.add(0, ev)
		return b.steps
	}
	b.reply(p, t)
	return b.steps
}

// A stepBuilder collects the steps of one response.
type stepBuilder struct {
	steps  []step
	resp   responseObj // the response's id, creation and model
	id     string      // the response's number, in the ids of its items
	output []any       // the output items so far, as done
}

func (b *stepBuilder) add(at time.Duration, ev sequenced) {
	b.steps = append(b.steps, step{at: at, op: opText, ev: ev})
}

func (b *stepBuilder) addOp(st step) { b.steps = append(b.steps, st) }

// nextIndex is the output_index of the next output item.
func (b *stepBuilder) nextIndex() int { return len(b.output) }

// respEvent is a response-level event of type typ with the response in status.
func (b *stepBuilder) respEvent(typ, status string) *responseEvent {
	r := b.resp
	r.Status, r.Output = status, []any{}
	return &responseEvent{evHead: evHead{Type: typ}, Response: r}
}

// faulted adds the steps of p.fault when it ends the response before its text, and reports
// whether it did; otherwise it adds response.created and response.in_progress.
func (b *stepBuilder) faulted(p plan, now time.Time) bool {
	switch p.fault.kind() {
	case FaultError, FaultErrorNoStatus:
		b.add(0, faultErrorEvent(p.fault, now))
		return true
	case FaultContextLengthError:
		b.add(0, contextLengthEvent())
		return true
	case FaultConnLimit:
		b.addOp(step{op: opCloseConn, ev: connLimitEvent()})
		return true
	case FaultClose1008:
		b.addOp(step{op: opClose1008})
		return true
	}
	b.add(0, b.respEvent(evCreated, "in_progress"))
	switch p.fault {
	case FaultDrop:
		b.addOp(step{op: opDrop})
		return true
	case FaultStall:
		b.addOp(step{op: opStall})
		return true
	case FaultBadJSON:
		b.addOp(step{op: opRaw, raw: []byte(`{"type":"response.output_text.delta","delta":`)})
		return true
	case FaultBinary:
		b.addOp(step{op: opBinary, raw: []byte{0x00, 0x01, 0xfe, 0xff}})
		return true
	}
	b.add(0, b.respEvent(evInProgress, "in_progress"))
	return b.failed(p)
}

// failed adds the end of a response that fails after response.in_progress, and reports
// whether p.fault is such a fault.
func (b *stepBuilder) failed(p plan) bool {
	switch p.fault {
	case FaultFailed:
		ev := b.respEvent(evFailed, "failed")
		ev.Response.Error = &respError{Code: "server_error", Message: "The model failed to generate a response (simulated)."}
		b.add(p.deltaAt(0), ev)
	case FaultOverloaded:
		b.add(p.deltaAt(0), overloadedEvent())
	case FaultOverloadedFailed:
		ev := b.respEvent(evFailed, "failed")
		ev.Response.Error = &respError{Code: codeOverloaded, Message: overloadedMessage}
		b.add(p.deltaAt(0), ev)
	case FaultContextLength:
		b.add(p.deltaAt(0), b.contextLengthFailed())
	default:
		return false
	}
	return true
}

const (
	codeOverloaded    = "server_is_overloaded"
	overloadedMessage = "Our servers are currently overloaded. Please try again later. (simulated)"
)

// overloadedEvent is the error event an overloaded origin sends inside a 200 stream: no status.
func overloadedEvent() *errorEvent {
	return &errorEvent{
		evHead: evHead{Type: evError},
		Error:  errorBody{Type: "service_unavailable_error", Code: codeOverloaded, Message: overloadedMessage},
	}
}

// reply adds the answer t asks for: one compaction item when it asks for a compaction, else,
// after a reasoning item when it asks for one, function
// calls, text quoting tool results or saying why a call cannot be made, or the Answer words;
// then the completion (or, with FaultIncomplete, response.incomplete).
func (b *stepBuilder) reply(p plan, t *turn) {
	u := &usage{InputTokens: max(1, len(strings.Fields(t.prompt)))}
	u.InputTokensDetails.CachedTokens = int(float64(u.InputTokens) * t.cached)
	if t.compact {
		u.OutputTokens = b.compaction(p, t)
		u.TotalTokens = u.InputTokens + u.OutputTokens
		b.finish(p, u)
		return
	}
	if t.reasoning {
		u.OutputTokensDetails.ReasoningTokens = b.reasoning()
	}
	text, calls := t.decide(p.calls)
	switch {
	case calls != nil:
		for i, c := range calls {
			u.OutputTokens += b.call(i, c)
		}
	case text != "":
		b.message(p, []string{text})
		u.OutputTokens = len(strings.Fields(text))
	case t.query != "":
		u.OutputTokens = b.search(p, t)
	case t.format != "":
		answer := structuredAnswer(t, p.words)
		b.message(p, jsonDeltas(answer))
		u.OutputTokens = max(1, len(answer)/4)
	default:
		b.message(p, answerDeltas(t.prompt, p.words))
		u.OutputTokens = p.words
	}
	u.OutputTokens += u.OutputTokensDetails.ReasoningTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
	b.finish(p, u)
}

// answerDeltas are the deltas of Answer(prompt, words): a word each, the first after
// AnswerPrefix, the others after a space.
func answerDeltas(prompt string, words int) []string {
	h := promptHash(prompt)
	out := make([]string, words)
	for i := range words {
		out[i] = wordAt(h, i)
		if i > 0 {
			out[i] = " " + out[i]
		} else {
			out[i] = AnswerPrefix + out[i]
		}
	}
	return out
}

// message adds a message item whose text is deltas, on p's schedule. With FaultIncomplete its
// output_item.done is left out and the item is incomplete.
func (b *stepBuilder) message(p plan, deltas []string) {
	end, idx, msgID := p.latency, b.nextIndex(), "msg_sim"+b.id
	item := outputItem{ID: msgID, Type: "message", Status: "in_progress", Role: "assistant", Content: []contentPart{}}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	b.add(0, &partEvent{evHead: evHead{Type: evPartAdded}, ItemID: msgID, OutputIndex: idx, Part: contentPart{Type: "output_text"}})
	for i, d := range deltas {
		b.add(p.deltaAt(i), &deltaEvent{evHead: evHead{Type: evDelta}, ItemID: msgID, OutputIndex: idx, Delta: d})
	}
	full := strings.Join(deltas, "")
	part := contentPart{Type: "output_text", Text: full}
	b.add(end, &textDoneEvent{evHead: evHead{Type: evTextDone}, ItemID: msgID, OutputIndex: idx, Text: full})
	b.add(end, &partEvent{evHead: evHead{Type: evPartDone}, ItemID: msgID, OutputIndex: idx, Part: part})
	done := outputItem{ID: msgID, Type: "message", Status: "completed", Role: "assistant", Content: []contentPart{part}}
	if p.fault == FaultIncomplete {
		done.Status = "incomplete"
	} else {
		b.add(end, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: done})
	}
	b.output = append(b.output, done)
}

// finish adds the response's terminal event with its output and usage u.
func (b *stepBuilder) finish(p plan, u *usage) {
	ev := b.respEvent(evCompleted, "completed")
	if p.fault == FaultIncomplete {
		ev = b.respEvent(evIncomplete, "incomplete")
		ev.Response.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	ev.Response.Output = b.output
	ev.Response.Usage = u
	b.add(p.latency, ev)
}
