package codextest

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Compaction, as the Codex CLI 0.169 asks the origin for it (docs/compaction.md): a
// response.create like any other whose input ends with {"type":"compaction_trigger"} is answered
// with exactly one output item, {"type":"compaction","encrypted_content":...}, opaque to the
// client, which then replaces its history with its user messages and that item and sends the
// item back on every later turn. The simulator's compaction content is readable by tests
// ([CompactionSummary]); a compaction item sent back must carry content the server issued, else
// the request is refused (400), as the origin refuses content it cannot decrypt.

const (
	// itemCompactionTrigger is the input item that asks for a compaction.
	itemCompactionTrigger = "compaction_trigger"
	// itemCompaction is the output (and later input) item that carries one.
	itemCompaction = "compaction"
	// compactionTag follows encryptedPrefix, base64url-encoded with the item id and the summary.
	compactionTag = "codextest-compaction:"
	// compactionTokens is the output_tokens of a compaction.
	compactionTokens = 32
)

type compactionItem struct {
	ID               string `json:"id"`
	Type             string `json:"type"`
	EncryptedContent string `json:"encrypted_content"`
}

// compactionContent is the encrypted_content of compaction item id summarising with summary.
func compactionContent(id, summary string) string {
	return encryptedPrefix + base64.RawURLEncoding.EncodeToString([]byte(compactionTag+id+"\n"+summary))
}

// CompactionSummary returns what the compaction whose encrypted_content is s summarised, as the
// server wrote it ("compacted N input items (W words)"), and whether the server issued s.
func CompactionSummary(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, encryptedPrefix)
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", false
	}
	tagged, ok := strings.CutPrefix(string(b), compactionTag)
	if !ok {
		return "", false
	}
	_, summary, ok := strings.Cut(tagged, "\n")
	return summary, ok
}

// compactionSummary is the summary of the compaction t asks for: deterministic, derived from
// the size of the input, so tests can compute it.
func compactionSummary(t *turn) string {
	return fmt.Sprintf("compacted %d input items (%d words)", t.items, len(strings.Fields(t.prompt)))
}

// compaction adds the one compaction output item of a compaction request, done at p's latency,
// and returns its output tokens.
func (b *stepBuilder) compaction(p plan, t *turn) int {
	id, idx := "cmp_sim"+b.id, b.nextIndex()
	item := compactionItem{ID: id, Type: itemCompaction, EncryptedContent: compactionContent(id, compactionSummary(t))}
	b.add(0, &itemEvent{evHead: evHead{Type: evItemAdded}, OutputIndex: idx, Item: item})
	b.add(p.latency, &itemEvent{evHead: evHead{Type: evItemDone}, OutputIndex: idx, Item: item})
	b.output = append(b.output, item)
	return compactionTokens
}

// countCompaction counts the compaction t asks for and the compaction items it sends back.
func (s *Server) countCompaction(t *turn) {
	if t.compact {
		s.c.compactions.Add(1)
	}
	if t.compacted > 0 {
		s.c.compactedInputs.Add(1)
	}
}
