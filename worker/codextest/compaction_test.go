package codextest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// compactionOf returns the output items of a response.completed and the one compaction item
// among them, failing unless there is exactly one.
func compactionOf(t *testing.T, evs []event) ([]any, map[string]any) {
	t.Helper()
	last := evs[len(evs)-1]
	if last.typ() != evCompleted {
		t.Fatalf("last event %s, want response.completed", last.raw)
	}
	out := last.get("response.output").([]any)
	var found []map[string]any
	for _, it := range out {
		if m := it.(map[string]any); m["type"] == itemCompaction {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("output %v: %d compaction items, want exactly one (the Codex CLI refuses any other count)", out, len(found))
	}
	return out, found[0]
}

// TestCompactionTrigger: an input ending with compaction_trigger is answered with exactly one
// compaction item (added and done events, then response.completed with usage), whose content
// says what it summarised; a later request that sends the item back is answered as usual and
// counted; a compaction item the server did not issue is refused with a 400.
func TestCompactionTrigger(t *testing.T) {
	s := newServer(t, Options{Words: 3, Strict: true})
	c := mustDial(t, s)
	history := []any{developerMsg("You are a coding agent."), userMsg("first turn words here"), assistantMsg("done")}
	trigger := map[string]any{"type": itemCompactionTrigger}
	evs := readResponseOf(t, c, toolFrame(append(slices.Clone(history), trigger), []string{"Bash"}, nil))

	if got, want := types(evs), []string{evCreated, evInProgress, evItemAdded, evItemDone, evCompleted}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	out, item := compactionOf(t, evs)
	if len(out) != 1 {
		t.Errorf("output %v, want the compaction item alone", out)
	}
	summary, issued := CompactionSummary(item["encrypted_content"].(string))
	words := len(strings.Fields(promptOfInput(mustJSON(t, history))))
	if want := "compacted 4 input items (" + strconv.Itoa(words) + " words)"; !issued || summary != want {
		t.Errorf("compaction summary %q (issued %v), want %q", summary, issued, want)
	}
	if u := evs[len(evs)-1].get("response.usage.output_tokens"); u != float64(compactionTokens) {
		t.Errorf("usage.output_tokens %v, want %d", u, compactionTokens)
	}

	next := []any{userMsg("first turn words here"), item, userMsg("second turn")}
	evs = readResponseOf(t, c, toolFrame(next, nil, nil))
	if txt, want := textOf(evs), Answer(promptOfInput(mustJSON(t, next)), 3); txt != want {
		t.Errorf("the turn after the compaction answered %q, want %q", txt, want)
	}

	forged := map[string]any{"type": itemCompaction, "encrypted_content": "gAAAABnot-ours"}
	evs = readResponseOf(t, c, toolFrame([]any{userMsg("hi"), forged}, nil, nil))
	if e := evs[0]; e.typ() != evError || e.get("status") != 400.0 || !strings.Contains(e.get("error.message").(string), "compaction") {
		t.Errorf("a forged compaction item got %s, want a 400 naming the compaction", e.raw)
	}
	if st := s.Stats(); st.Compactions != 1 || st.CompactedInputs != 1 || st.Unsupported != 0 {
		t.Errorf("stats compactions %d, compacted inputs %d, unsupported %d; want 1, 1, 0", st.Compactions, st.CompactedInputs, st.Unsupported)
	}
}

// TestCompactionSummaryRejectsOthers: only the server's own compaction content decodes.
func TestCompactionSummaryRejectsOthers(t *testing.T) {
	for _, s := range []string{"", "gAAAAB", encryptedFor("rs_1"), "plain text", compactionContent("cmp_1", "x")[1:]} {
		if got, ok := CompactionSummary(s); ok {
			t.Errorf("CompactionSummary(%q) = %q, true; want false", s, got)
		}
	}
	if got, ok := CompactionSummary(compactionContent("cmp_1", "compacted 2 input items (5 words)")); !ok || got != "compacted 2 input items (5 words)" {
		t.Errorf("CompactionSummary of an issued item = %q, %v", got, ok)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
