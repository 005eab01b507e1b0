package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codexpool/codexpool/worker/codextest"
)

// compactTokenLimit is the model_auto_compact_token_limit the CLI runs with: the simulator
// reports a prompt's words as its input tokens, and the CLI's own instructions are thousands of
// words, so the first turn is over it and the CLI compacts before the second.
const compactTokenLimit = 500

// TestE2ECodexCLICompact runs the real Codex CLI (0.169) through the gateway, a worker and the
// strict simulator, in a loopback-only network namespace as TestE2ECodexCLI does, over a
// conversation that outgrows model_auto_compact_token_limit: `codex exec` asks once, then
// `codex exec resume --last` asks again, and the CLI compacts the conversation before the
// second turn. Both ways the CLI compacts are driven (docs/compaction.md):
//
//   - local: a custom provider (name "codexpool", as examples/codex-cli configures it). The CLI
//     sends a streamed POST /v1/responses whose turn metadata says request_kind "compaction",
//     implementation "responses", ending with its summarisation prompt as a user message; the
//     simulator's answer to it is the summary the second turn carries.
//   - remote: a provider named "OpenAI", for which the CLI asks the origin: a streamed POST
//     /v1/responses whose input ends with {"type":"compaction_trigger"} (implementation
//     "responses_compaction_v2"); the simulator answers with one compaction item, and the second
//     turn sends that item back (the simulator counts it, and refuses any it did not issue).
//
// In both the CLI goes on after the compaction: the second turn prints the simulator's answer
// to the request the CLI made after compacting. The remote compaction is also driven over the
// gateway's WebSocket (supports_websockets = true).
func TestE2ECodexCLICompact(t *testing.T) {
	codexBin := os.Getenv(codexCLIEnv)
	if codexBin == "" {
		t.Skip(codexCLIEnv + " is not set: run examples/codex-cli/ci.sh (installs the Codex CLI, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: the Codex CLI runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8, Strict: true})
	c.startWorker("w1")
	gw, base := c.startGateway()

	t.Run("local", func(t *testing.T) {
		rec := newRecorder(t, base)
		cx := compactingCLI(t, codexBin, rec.url, "codexpool")
		reqs, out := cx.twoTurns(t, rec)
		i := compactionRequest(t, reqs, "responses")
		if last := reqs[i].lastItem(); last.Type != "message" || last.Role != "user" || len(last.text()) < 100 {
			t.Errorf("the local compaction ends with %+v, want the CLI's summarisation prompt as a user message", last)
		}
		if reqs[i].hasTrigger() {
			t.Error("the local compaction carries a compaction_trigger")
		}
		summary := codextest.Answer(codextest.PromptOf(reqs[i].raw), 8)
		after := reqs[len(reqs)-1]
		if !bytes.Contains(after.raw, []byte(summary)) {
			t.Errorf("the turn after the compaction does not carry the summary %q", summary)
		}
		if want := codextest.Answer(codextest.PromptOf(after.raw), 8); out != want {
			t.Errorf("the second turn printed %q, want the simulator's answer %q", out, want)
		}
		rec.check(t, "/v1/")
	})

	t.Run("remote", func(t *testing.T) {
		before := c.sim.Stats()
		rec := newRecorder(t, base)
		cx := compactingCLI(t, codexBin, rec.url, "OpenAI")
		reqs, out := cx.twoTurns(t, rec)
		i := compactionRequest(t, reqs, "responses_compaction_v2")
		if !reqs[i].hasTrigger() {
			t.Fatalf("the remote compaction ends with %+v, want {\"type\":\"compaction_trigger\"}", reqs[i].lastItem())
		}
		after := reqs[len(reqs)-1]
		var sent []string
		for _, it := range after.items {
			if it.Type == "compaction" {
				sent = append(sent, it.EncryptedContent)
			}
		}
		if len(sent) != 1 {
			t.Fatalf("the turn after the compaction sent %d compaction items, want the simulator's one", len(sent))
		}
		if summary, issued := codextest.CompactionSummary(sent[0]); !issued {
			t.Errorf("the compaction item sent back is not the simulator's (%q)", sent[0])
		} else {
			t.Logf("the simulator's compaction, sent back by the CLI: %s", summary)
		}
		st := c.sim.Stats()
		if st.Compactions-before.Compactions != 1 || st.CompactedInputs-before.CompactedInputs < 1 {
			t.Errorf("simulator compactions +%d, compacted inputs +%d; want +1 and at least +1",
				st.Compactions-before.Compactions, st.CompactedInputs-before.CompactedInputs)
		}
		if want := codextest.Answer(codextest.PromptOf(after.raw), 8); out != want {
			t.Errorf("the second turn printed %q, want the simulator's answer %q", out, want)
		}
		rec.check(t, "/v1/")
	})

	// Over the gateway's WebSocket the same request is a response.create frame; the proxy
	// cannot read frames, so the simulator's counters and the gateway's log are the evidence.
	t.Run("remote websocket", func(t *testing.T) {
		before := c.sim.Stats()
		cx := compactingCLI(t, codexBin, base, "OpenAI", "supports_websockets = true")
		dir := t.TempDir()
		cx.run(t, dir, "First turn of a long conversation")
		out := cx.run(t, dir, "Second turn, after the compaction", "resume", "--last")
		st := c.sim.Stats()
		if st.Compactions-before.Compactions != 1 || st.CompactedInputs-before.CompactedInputs < 1 {
			t.Errorf("simulator compactions +%d, compacted inputs +%d; want +1 and at least +1",
				st.Compactions-before.Compactions, st.CompactedInputs-before.CompactedInputs)
		}
		if !strings.Contains(gw.out.String(), `"msg":"websocket closed"`) {
			t.Error("the CLI did not use the gateway's WebSocket")
		}
		if !strings.HasPrefix(out, codextest.AnswerPrefix) {
			t.Errorf("the second turn printed %q, want the simulator's answer", out)
		}
	})
}

// compactingCLI is a codexCLI whose config names the gateway at base as a provider called name
// (more lines of the provider's table in extra), with a low model_auto_compact_token_limit.
func compactingCLI(t *testing.T, bin, base, name string, extra ...string) codexCLI {
	t.Helper()
	cx := codexCLI{bin: bin, home: t.TempDir()}
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "codexpool"
model_auto_compact_token_limit = %d

[model_providers.codexpool]
name = %q
base_url = "%s/v1"
wire_api = "responses"
env_key = "POOL_API_KEY"
%s
`, compactTokenLimit, name, base, strings.Join(extra, "\n"))
	if err := os.WriteFile(filepath.Join(cx.home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return cx
}

// twoTurns runs a first turn and, resuming it, a second; it returns the requests the CLI sent
// to /v1/responses (each logged) and the second turn's answer.
func (cx codexCLI) twoTurns(t *testing.T, rec *recorder) ([]cliRequest, string) {
	t.Helper()
	dir := t.TempDir()
	cx.run(t, dir, "First turn of a long conversation")
	out := cx.run(t, dir, "Second turn, after the compaction", "resume", "--last")
	var reqs []cliRequest
	for _, r := range rec.all() {
		if r.method != "POST" || r.path != "/v1/responses" {
			continue
		}
		cr := parseCLIRequest(t, r.body)
		t.Logf("request %d: %d bytes, %d input items, last %s, turn metadata %s", len(reqs), len(r.body), len(cr.items), cr.lastItem().brief(), cr.compaction)
		reqs = append(reqs, cr)
	}
	if len(reqs) < 3 {
		t.Fatalf("%d requests to /v1/responses, want the first turn, the compaction and the second turn", len(reqs))
	}
	return reqs, out
}

// compactionRequest returns the index of the one request whose turn metadata is a compaction
// by implementation impl, which must come after the first turn and before the last.
func compactionRequest(t *testing.T, reqs []cliRequest, impl string) int {
	t.Helper()
	found := -1
	for i, r := range reqs {
		if r.kind != "compaction" {
			continue
		}
		if found >= 0 {
			t.Fatalf("requests %d and %d are both compactions, want one", found, i)
		}
		found = i
		if !strings.Contains(r.compaction, `"implementation":"`+impl+`"`) {
			t.Errorf("the compaction's metadata %s, want implementation %q", r.compaction, impl)
		}
	}
	if found <= 0 || found == len(reqs)-1 {
		t.Fatalf("compaction request at %d of %d, want one between the first turn and the last", found, len(reqs))
	}
	return found
}

// A cliRequest is what the tests read of a Responses request the CLI sent.
type cliRequest struct {
	raw        []byte
	items      []cliItem
	kind       string // x-codex-turn-metadata request_kind
	compaction string // x-codex-turn-metadata compaction, as JSON
}

type cliItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	EncryptedContent string          `json:"encrypted_content"`
}

func parseCLIRequest(t *testing.T, body []byte) cliRequest {
	t.Helper()
	var b struct {
		Input          []cliItem `json:"input"`
		ClientMetadata struct {
			TurnMetadata string `json:"x-codex-turn-metadata"`
		} `json:"client_metadata"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("a request body the tests cannot read: %v", err)
	}
	var md struct {
		RequestKind string          `json:"request_kind"`
		Compaction  json.RawMessage `json:"compaction"`
	}
	_ = json.Unmarshal([]byte(b.ClientMetadata.TurnMetadata), &md)
	return cliRequest{raw: body, items: b.Input, kind: md.RequestKind, compaction: string(md.Compaction)}
}

func (r cliRequest) lastItem() cliItem {
	if len(r.items) == 0 {
		return cliItem{}
	}
	return r.items[len(r.items)-1]
}

func (r cliRequest) hasTrigger() bool { return r.lastItem().Type == "compaction_trigger" }

// text is a message item's input_text, joined.
func (it cliItem) text() string {
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (it cliItem) brief() string {
	s := it.Type
	if it.Role != "" {
		s += "/" + it.Role
	}
	if txt := it.text(); txt != "" {
		s += fmt.Sprintf(" %.80q", txt)
	}
	return s
}
