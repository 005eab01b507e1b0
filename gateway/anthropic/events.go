package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"
)

// event is the part of a pool (Responses API) event the translation reads.
type event struct {
	Type        string    `json:"type"`
	OutputIndex *int      `json:"output_index"`
	ItemID      string    `json:"item_id"`
	Delta       string    `json:"delta"`
	Arguments   string    `json:"arguments"`
	Item        *item     `json:"item"`
	Response    *response `json:"response"`
	Status      int       `json:"status"`
	Code        string    `json:"code"`
	Message     string    `json:"message"`
	Error       *apiErr   `json:"error"`
}

type apiErr struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

type item struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	CallID           string `json:"call_id"`
	Name             string `json:"name"`
	Arguments        string `json:"arguments"`
	EncryptedContent string `json:"encrypted_content"`
	Summary          []struct {
		Text string `json:"text"`
	} `json:"summary"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type response struct {
	ID                string  `json:"id"`
	Status            string  `json:"status"`
	Usage             *usage  `json:"usage"`
	Output            []item  `json:"output"`
	Error             *apiErr `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

type usage struct {
	InputTokens        int `json:"input_tokens"`
	OutputTokens       int `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usageOut is Anthropic's usage: input_tokens without the cached ones, which are
// cache_read_input_tokens; the backend has no cache-write figure.
type usageOut struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func mapUsage(u *usage) usageOut {
	if u == nil {
		return usageOut{}
	}
	cached := u.InputTokensDetails.CachedTokens
	return usageOut{InputTokens: max(u.InputTokens-cached, 0), CacheReadInputTokens: cached, OutputTokens: u.OutputTokens}
}

// stopReason is the Anthropic stop_reason of a finished response.
func stopReason(sawTool bool, typ string, r *response) string {
	reason := ""
	if r != nil && r.IncompleteDetails != nil {
		reason = r.IncompleteDetails.Reason
	}
	switch {
	case sawTool:
		return "tool_use"
	case reason == "content_filter":
		return "refusal"
	case typ == "response.incomplete", reason != "", r != nil && r.Status == "incomplete":
		return "max_tokens"
	}
	return "end_turn"
}

// messageText joins a message item's output text.
func messageText(it *item) string {
	var b strings.Builder
	for _, c := range it.Content {
		if c.Type == "output_text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// summaryText joins a reasoning item's summary parts with blank lines.
func summaryText(it *item) string {
	parts := make([]string, 0, len(it.Summary))
	for _, s := range it.Summary {
		parts = append(parts, s.Text)
	}
	return strings.Join(parts, "\n\n")
}

// aliases are the keys an event may name its item by.
func (e *event) aliases() []string {
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

// itemKey names the item an event is about, for text and thinking blocks.
func (e *event) itemKey() string {
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

// failure is the Anthropic error of an "error" or "response.failed" event.
func (e *event) failure() *Error {
	code, msg := e.Code, e.Message
	if e.Response != nil && e.Response.Error != nil {
		code, msg = e.Response.Error.Code, e.Response.Error.Message
	}
	if e.Error != nil {
		code, msg = firstNonEmpty(e.Error.Code, e.Error.Type), e.Error.Message
	}
	if msg == "" {
		msg = "the origin failed the response"
		if code != "" {
			msg += " (" + code + ")"
		}
	}
	status := e.Status
	if status == 0 {
		status = 500
	}
	return FromStatus(status, code, msg, 0)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type obj = map[string]any

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
