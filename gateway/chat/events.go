package chat

import "encoding/json"

// event is the part of a pool event the translation reads; every field is optional.
type event struct {
	Type        string        `json:"type"`
	OutputIndex *int          `json:"output_index"`
	ItemID      string        `json:"item_id"`
	Delta       string        `json:"delta"`
	Name        string        `json:"name"`
	Arguments   string        `json:"arguments"`
	Item        *poolItem     `json:"item"`
	Response    *poolResponse `json:"response"`
}

// poolItem is an output item: a message or a function call (other types are skipped).
type poolItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
}

type poolResponse struct {
	Model             string     `json:"model"`
	Status            string     `json:"status"`
	Output            []poolItem `json:"output"`
	Usage             *poolUsage `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// Event types the translation acts on.
const (
	evCreated     = "response.created"
	evTextDelta   = "response.output_text.delta"
	evRefusal     = "response.refusal.delta"
	evItemAdded   = "response.output_item.added"
	evItemDone    = "response.output_item.done"
	evArgsDelta   = "response.function_call_arguments.delta"
	evArgsDone    = "response.function_call_arguments.done"
	evCompleted   = "response.completed"
	evIncomplete  = "response.incomplete"
	typeFunction  = "function_call"
	typeMessage   = "message"
	statusPartial = "incomplete"
)

func parseEvent(b []byte) (event, bool) {
	var ev event
	if json.Unmarshal(b, &ev) != nil {
		return ev, false
	}
	return ev, true
}
