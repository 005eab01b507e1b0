package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2ECodexCLIWebSocket runs the real Codex CLI against the gateway's WebSocket route: the
// custom provider says supports_websockets = true, so `codex exec` opens ws://.../v1/responses,
// sends its warm-up (generate: false) and then the turn with previous_response_id and only the
// new items on the same socket; through the pool both reach one upstream socket, where the turn
// continues the warm-up. Like TestE2ECodexCLI it runs only in a loopback-only network namespace
// (examples/codex-cli/ci.sh).
func TestE2ECodexCLIWebSocket(t *testing.T) {
	codexBin := os.Getenv(codexCLIEnv)
	if codexBin == "" {
		t.Skip(codexCLIEnv + " is not set: run examples/codex-cli/ci.sh (installs the Codex CLI, runs this in a loopback-only network namespace)")
	}
	if ifs := networkInterfaces(t); len(ifs) != 1 || ifs[0] != "lo" {
		t.Fatalf("network interfaces %v: the Codex CLI runs only where loopback is all there is (ip netns)", ifs)
	}
	c := newCluster(t, codextest.Options{Words: 8, Strict: true}) // refuses any field the origin refuses
	c.startWorker("w1")
	gw, base := c.startGateway()

	home := t.TempDir()
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "codexpool"

[model_providers.codexpool]
name = "codexpool"
base_url = "%s/v1"
wire_api = "responses"
env_key = "POOL_API_KEY"
supports_websockets = true
`, base)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codexBin, "exec", "--skip-git-repo-check", "Say hello")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"HOME=" + home, "CODEX_HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"POOL_API_KEY=" + gatewayKey, "NO_COLOR=1", "TERM=dumb",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("codex exec \"Say hello\": exit %v\n--- stdout\n%s--- stderr\n%s", cmd.ProcessState, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("codex exec: %v", err)
	}
	if !strings.Contains(gw.out.String(), `"msg":"websocket closed"`) {
		t.Fatalf("the CLI did not use the gateway's WebSocket:\n%s", gw.out.String())
	}
	turns := c.sim.Turns()
	continued := 0
	for i, tr := range turns {
		t.Logf("upstream frame %d: %+v", i+1, tr)
		if tr.Continued {
			continued++
		}
		if tr.Socket != turns[0].Socket {
			t.Errorf("frame %d on upstream socket %d, want every frame of the session on %d", i+1, tr.Socket, turns[0].Socket)
		}
	}
	if continued == 0 {
		t.Errorf("no frame continued a previous response upstream (frames %+v)", turns)
	}
	if strings.TrimSpace(stdout.String()) == "" {
		t.Errorf("codex printed no answer")
	}
}
