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
	Output            []outputItem       `json:"output"`
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
	OutputIndex int        `json:"output_index"`
	Item        outputItem `json:"item"`
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
}

// plan holds the per-response settings after metadata overrides.
type plan struct {
	latency, ttft time.Duration
	words         int
	fault         Fault
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

// buildSteps turns one response.create into the timed steps of its answer.
func buildSteps(p plan, req *genRequest, prompt, respID, msgID string, now time.Time) []step {
	model := req.Model
	if model == "" {
		model = "gpt-5.1-codex"
	}
	b := &stepBuilder{
		steps: make([]step, 0, p.words+10),
		resp:  responseObj{ID: respID, Object: "response", CreatedAt: now.Unix(), Model: model},
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
	b.answer(p, prompt, msgID)
	return b.steps
}

// A stepBuilder collects the steps of one response.
type stepBuilder struct {
	steps []step
	resp  responseObj // the response's id, creation and model
}

func (b *stepBuilder) add(at time.Duration, ev sequenced) {
	b.steps = append(b.steps, step{at: at, op: opText, ev: ev})
}

func (b *stepBuilder) addOp(st step) { b.steps = append(b.steps, st) }

// respEvent is a response-level event of type typ with the response in status.
func (b *stepBuilder) respEvent(typ, status string) *responseEvent {
	r := b.resp
	r.Status, r.Output = status, []outputItem{}
	return &responseEvent{evHead: evHead{Type: typ}, Response: r}
}

// faulted adds the steps of p.fault when it ends the response before its text, and reports
// whether it did; otherwise it adds response.created and response.in_progress.
func (b *stepBuilder) faulted(p plan, now time.Time) bool {
	switch p.fault.kind() {
	case FaultError, FaultErrorNoStatus:
		b.add(0, faultErrorEvent(p.fault, now))
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
	if p.fault == FaultFailed {
		ev := b.respEvent(evFailed, "failed")
		ev.Response.Error = &respError{Code: "server_error", Message: "The model failed to generate a response (simulated)."}
		b.add(p.deltaAt(0), ev)
		return true
	}
	return false
}

// answer adds the message of p.words words, its deltas on p's schedule, and the completion (or,
// with FaultIncomplete, response.incomplete).
func (b *stepBuilder) answer(p plan, prompt, msgID string) {
	end := p.latency
	item := outputItem{ID: msgID, Type: "message", Status: "in_progress", Role: "assistant", Content: []contentPart{}}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, Item: item})
	b.add(0, &partEvent{evHead: evHead{Type: evPartAdded}, ItemID: msgID, Part: contentPart{Type: "output_text"}})
	h := promptHash(prompt)
	var text strings.Builder
	for i := range p.words {
		w := wordAt(h, i)
		if i > 0 {
			w = " " + w
		}
		text.WriteString(w)
		b.add(p.deltaAt(i), &deltaEvent{evHead: evHead{Type: evDelta}, ItemID: msgID, Delta: w})
	}
	full := text.String()
	part := contentPart{Type: "output_text", Text: full}
	b.add(end, &textDoneEvent{evHead: evHead{Type: evTextDone}, ItemID: msgID, Text: full})
	b.add(end, &partEvent{evHead: evHead{Type: evPartDone}, ItemID: msgID, Part: part})
	done := outputItem{ID: msgID, Type: "message", Status: "completed", Role: "assistant", Content: []contentPart{part}}
	u := &usage{InputTokens: max(1, len(strings.Fields(prompt))), OutputTokens: p.words}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	if p.fault == FaultIncomplete {
		done.Status = "incomplete"
		ev := b.respEvent(evIncomplete, "incomplete")
		ev.Response.Output = []outputItem{done}
		ev.Response.Usage = u
		ev.Response.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
		b.add(end, ev)
		return
	}
	b.add(end, &itemEvent{evHead: evHead{Type: evItemDone}, Item: done})
	ev := b.respEvent(evCompleted, "completed")
	ev.Response.Output = []outputItem{done}
	ev.Response.Usage = u
	b.add(end, ev)
}
