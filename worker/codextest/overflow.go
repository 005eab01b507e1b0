package codextest

// Context overflow: what the origin answers when the input is over the model's context window.
// Over the WebSocket it accepts the response.create and then fails it; an HTTP request it refuses
// with 400 and the same error. Both carry the code clients act on (Claude Code compacts its
// history, chat clients trim it) and the origin's message.

const (
	// FaultContextLength sends response.created, response.in_progress, then response.failed
	// whose response.error is {code:"context_length_exceeded", message:"Your input exceeds the
	// context window of this model. ..."}.
	FaultContextLength Fault = "context_length"
	// FaultContextLengthError sends, before any other event, the error event with status 400 and
	// error {type:"invalid_request_error", code:"context_length_exceeded", message} (on HTTP
	// streaming: a 400 with that body).
	FaultContextLengthError Fault = "context_length_error"
)

const (
	codeContextLength    = "context_length_exceeded"
	contextLengthMessage = "Your input exceeds the context window of this model. Please adjust your input and try again. (simulated)"
)

// contextLengthFailed is FaultContextLength's response.failed.
func (b *stepBuilder) contextLengthFailed() *responseEvent {
	ev := b.respEvent(evFailed, "failed")
	ev.Response.Error = &respError{Code: codeContextLength, Message: contextLengthMessage}
	return ev
}

// contextLengthEvent is FaultContextLengthError's error event.
func contextLengthEvent() *errorEvent {
	return &errorEvent{
		evHead: evHead{Type: evError}, Status: 400,
		Error: errorBody{Type: "invalid_request_error", Code: codeContextLength, Message: contextLengthMessage},
	}
}
