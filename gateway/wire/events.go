package wire

import (
	"encoding/json"
	"strconv"
)

// Event is the part of a pool (Responses API) stream event the translations read; every field
// is optional, and an unknown type is skipped by every dialect.
type Event struct {
	Type        string    `json:"type"`
	OutputIndex *int      `json:"output_index"`
	ItemID      string    `json:"item_id"`
	Delta       string    `json:"delta"`
	Name        string    `json:"name"`
	Arguments   string    `json:"arguments"`
	Item        *Item     `json:"item"`
	Response    *Response `json:"response"`
	// Status, Code and Message are the pool's own error event (the status it would answer).
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Error   *Error `json:"error"`
}

// ParseEvent decodes a pool event; ok is false for one that is not a JSON object.
func ParseEvent(b []byte) (ev Event, ok bool) {
	return ev, json.Unmarshal(b, &ev) == nil
}

// Error is the error of an "error" event or of a failed response.
type Error struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Item is an output item: a message, a function call or reasoning (other types are skipped).
type Item struct {
	Type             string        `json:"type"`
	ID               string        `json:"id"`
	CallID           string        `json:"call_id"`
	Name             string        `json:"name"`
	Arguments        string        `json:"arguments"`
	EncryptedContent string        `json:"encrypted_content"`
	Summary          []SummaryPart `json:"summary"`
	Content          []OutputPart  `json:"content"`
}

// SummaryPart is one part of a reasoning item's summary.
type SummaryPart struct {
	Text string `json:"text"`
}

// OutputPart is one part of a message item: output_text (Text) or refusal (Refusal).
type OutputPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// Response is the response of the response.* lifecycle events.
type Response struct {
	ID                string             `json:"id"`
	Model             string             `json:"model"`
	Status            string             `json:"status"`
	Output            []Item             `json:"output"`
	Usage             *Usage             `json:"usage"`
	Error             *Error             `json:"error"`
	IncompleteDetails *IncompleteDetails `json:"incomplete_details"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Usage is the Responses usage object.
type Usage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	TotalTokens        int `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Event and item types the translations act on.
const (
	EventCreated    = "response.created"
	EventTextDelta  = "response.output_text.delta"
	EventRefusal    = "response.refusal.delta"
	EventItemAdded  = "response.output_item.added"
	EventItemDone   = "response.output_item.done"
	EventArgsDelta  = "response.function_call_arguments.delta"
	EventArgsDone   = "response.function_call_arguments.done"
	EventCompleted  = "response.completed"
	EventIncomplete = "response.incomplete"
	EventFailed     = "response.failed"
	TypeFunction    = "function_call"
	TypeMessage     = "message"
	TypeReasoning   = "reasoning"
	StatusPartial   = "incomplete"
)

// Aliases are the keys an event may name its item by: its output index, its item id, the item's
// id and call id. Events about one function call may carry only some of them (see Calls).
func (e *Event) Aliases() []string {
	var k []string
	if e.OutputIndex != nil {
		k = append(k, "o:"+strconv.Itoa(*e.OutputIndex))
	}
	if e.ItemID != "" {
		k = append(k, "i:"+e.ItemID)
	}
	if e.Item != nil {
		if e.Item.ID != "" {
			k = append(k, "i:"+e.Item.ID)
		}
		if e.Item.CallID != "" {
			k = append(k, "c:"+e.Item.CallID)
		}
	}
	return k
}

// ItemKey names the item an event is about, for text and reasoning: the item id, else the
// output index.
func (e *Event) ItemKey() string {
	switch {
	case e.ItemID != "":
		return e.ItemID
	case e.Item != nil && e.Item.ID != "":
		return e.Item.ID
	case e.OutputIndex != nil:
		return "#" + strconv.Itoa(*e.OutputIndex)
	}
	return ""
}
