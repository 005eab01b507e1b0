package codextest

import (
	"encoding/base64"
	"strings"
)

// Reasoning: a request whose include has "reasoning.encrypted_content" is answered with a
// reasoning item first, its summary streamed, its encrypted_content opaque; a later request may
// send the item back, and only content the server issued is accepted.

const (
	includeEncrypted = "reasoning.encrypted_content"
	// reasoningSummary is the summary text of every reasoning item.
	reasoningSummary = "Thinking it over (simulated)."
	// reasoningTokens is the reasoning_tokens of a response with a reasoning item.
	reasoningTokens = 16
	// encryptedPrefix starts every encrypted_content, as Fernet tokens do; encryptedTag follows
	// it, base64url-encoded with the item id.
	encryptedPrefix = "gAAAAB"
	encryptedTag    = "codextest-reasoning:"
)

const (
	evSummaryPartAdded = "response.reasoning_summary_part.added"
	evSummaryDelta     = "response.reasoning_summary_text.delta"
	evSummaryDone      = "response.reasoning_summary_text.done"
	evSummaryPartDone  = "response.reasoning_summary_part.done"
)

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type reasoningItem struct {
	ID               string        `json:"id"`
	Type             string        `json:"type"`
	Summary          []summaryPart `json:"summary"`
	EncryptedContent string        `json:"encrypted_content"`
}

type summaryPartEvent struct {
	evHead
	ItemID       string      `json:"item_id"`
	OutputIndex  int         `json:"output_index"`
	SummaryIndex int         `json:"summary_index"`
	Part         summaryPart `json:"part"`
}

type summaryTextEvent struct {
	evHead
	ItemID       string `json:"item_id"`
	OutputIndex  int    `json:"output_index"`
	SummaryIndex int    `json:"summary_index"`
	Delta        string `json:"delta,omitempty"`
	Text         string `json:"text,omitempty"`
}

// encryptedFor is the encrypted_content of reasoning item id.
func encryptedFor(id string) string {
	return encryptedPrefix + base64.RawURLEncoding.EncodeToString([]byte(encryptedTag+id))
}

// issuedEncrypted reports whether s is an encrypted_content the server issued.
func issuedEncrypted(s string) bool {
	rest, ok := strings.CutPrefix(s, encryptedPrefix)
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil && strings.HasPrefix(string(b), encryptedTag)
}

// reasoning adds a reasoning item, its summary streamed a word a delta, and returns its
// reasoning tokens.
func (b *stepBuilder) reasoning() int {
	id, idx := "rs_sim"+b.id, b.nextIndex()
	item := reasoningItem{ID: id, Type: "reasoning", Summary: []summaryPart{}, EncryptedContent: encryptedFor(id)}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	b.add(0, &summaryPartEvent{evHead: evHead{Type: evSummaryPartAdded}, ItemID: id, OutputIndex: idx, Part: summaryPart{Type: "summary_text"}})
	for i, w := range strings.Fields(reasoningSummary) {
		if i > 0 {
			w = " " + w
		}
		b.add(0, &summaryTextEvent{evHead: evHead{Type: evSummaryDelta}, ItemID: id, OutputIndex: idx, Delta: w})
	}
	part := summaryPart{Type: "summary_text", Text: reasoningSummary}
	b.add(0, &summaryTextEvent{evHead: evHead{Type: evSummaryDone}, ItemID: id, OutputIndex: idx, Text: reasoningSummary})
	b.add(0, &summaryPartEvent{evHead: evHead{Type: evSummaryPartDone}, ItemID: id, OutputIndex: idx, Part: part})
	item.Summary = []summaryPart{part}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: item})
	b.output = append(b.output, item)
	return reasoningTokens
}
