package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2EEmbeddedRequiresAuth is issue 22's target 3: the quick start's embedded server (a worker
// with no NATS URL, reading a Codex CLI login) admits only clients holding the credential it
// generated in the state directory. A NATS client without it cannot connect, let alone read a
// bucket; `codexpool ask`, `jobs` and `batch` of the same user work unchanged; and the login the
// worker shares through the credentials bucket is sealed: no entry holds a token in plaintext.
func TestE2EEmbeddedRequiresAuth(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{
		Accounts:      []codextest.Account{{Name: "alice", AccountID: "acct-alice-embedded-0123456789"}},
		TokenLifetime: 4 * time.Second, Latency: 20 * time.Millisecond, Words: 4,
	})
	t.Cleanup(sim.Close)
	home, state := t.TempDir(), t.TempDir()
	authPath := filepath.Join(home, "auth.json")
	writeLoginFile(t, sim, authPath)
	url := "nats://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	env := []string{"HOME=" + home, "XDG_STATE_HOME=" + state, "PATH=" + os.Getenv("PATH")}
	c := &cluster{t: t, sim: sim}
	p := c.startProcess("w-embedded", []string{"worker"}, append(env,
		"CODEXPOOL_NATS_URL=", "CODEXPOOL_EMBEDDED_NATS_ADDR="+strings.TrimPrefix(url, "nats://"),
		"CODEXPOOL_CODEX_URL="+sim.URL, "CODEXPOOL_CODEX_TOKEN=", "CODEXPOOL_CODEX_AUTH_FILE="+authPath,
		"CODEXPOOL_CODEX_REFRESH_URL="+sim.RefreshURL, "CODEXPOOL_WORKER_ID=w-embedded")...)
	testutil.WaitFor(t, 60*time.Second, "the worker serving", func() bool { return strings.Contains(p.out.String(), `"msg":"serving"`) })

	// Without the credential: no connection at all.
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without the generated credential connected to the embedded server")
	} else if !strings.Contains(err.Error(), "Authorization Violation") {
		t.Fatalf("connect without the credential: %v, want an authorization violation", err)
	}
	cred := filepath.Join(state, "codexpool", queue.LocalAuthFileName)
	st, err := os.Stat(cred)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the generated credential %s: %v, mode %v; want it 0600", cred, err, st)
	}

	// The same user's commands find the credential on their own.
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(binPath, args...)
		cmd.Env, cmd.Dir = append(env, "CODEXPOOL_NATS_URL="+url), t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("codexpool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if got, want := strings.TrimSpace(run("ask", "Say", "hello")), codextest.Answer("Say hello", 4); got != want {
		t.Errorf("ask printed %q, want %q", got, want)
	}
	// Another user (another state directory) is refused, and told why.
	other := exec.Command(binPath, "ask", "--nats", url, "Say hello")
	other.Env = []string{"HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	if out, err := other.CombinedOutput(); err == nil || !strings.Contains(string(out), "embedded server admits only clients with the credential") {
		t.Errorf("ask without the credential: %v\n%s\nwant a refusal that says where the credential is", err, out)
	}
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"input":"one"}`+"\n"+`{"input":"two"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("batch", in, "-o", filepath.Join(t.TempDir(), "out.jsonl"), "--quiet")
	run("jobs")

	// Wait until the login has been refreshed at least once (tokens live 4 s), then read every
	// credential entry raw: none may contain a token of the login file.
	a, err := queue.ReadLocalAuth(cred)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserInfo(a.User, a.Password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, "CODEXPOOL_CREDENTIALS")
	if err != nil {
		t.Fatalf("the credentials bucket: %v (the quick start must share its login, sealed)", err)
	}
	testutil.WaitFor(t, 30*time.Second, "a refreshed login in the auth file", func() bool { return sim.Stats().RefreshOK > 0 })
	secrets := fileSecrets(t, authPath)
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range secrets {
			if strings.Contains(string(e.Value()), s) {
				t.Errorf("credential entry %s holds a token in plaintext", k)
			}
		}
	}
	if n == 0 {
		t.Error("no credential entry: the worker did not share its login")
	}
}
