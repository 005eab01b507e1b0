package wire

import (
	"encoding/json"
	"strconv"

	"github.com/codexpool/codexpool/schemas"
)

// The Responses output model is the contract's (package schemas): the events and items of the
// pool's streams, which every dialect reads.
type (
	Event             = schemas.Event
	Item              = schemas.OutputItem
	OutputPart        = schemas.ContentPart
	SummaryPart       = schemas.SummaryPart
	Response          = schemas.Response
	Usage             = schemas.Usage
	Error             = schemas.ResponseError
	IncompleteDetails = schemas.IncompleteDetails
)

// ParseEvent decodes a pool event; ok is false for one that is not a JSON object.
func ParseEvent(b []byte) (ev Event, ok bool) {
	return ev, json.Unmarshal(b, &ev) == nil
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
func Aliases(e *Event) []string {
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
func ItemKey(e *Event) string {
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
