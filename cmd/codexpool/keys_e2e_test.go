package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/worker/codextest"
)

// startGatewayAs starts a gateway process named id and returns its base URL once it listens.
func (c *cluster) startGatewayAs(id string, env ...string) (*proc, string) {
	c.t.Helper()
	p := c.startProcess(id, []string{"gateway"}, append([]string{
		"CODEXPOOL_GATEWAY_ADDR=127.0.0.1:0", "CODEXPOOL_GATEWAY_KEYS=" + gatewayKey,
	}, env...)...)
	listening := regexp.MustCompile(`"msg":"gateway listening","addr":"([^"]+)"`)
	var addr string
	testutil.WaitFor(c.t, 60*time.Second, id+" to listen", func() bool {
		select {
		case <-p.done:
			c.t.Fatalf("%s exited: %v\n%s", id, p.err, p.out.String())
		default:
		}
		if m := listening.FindStringSubmatch(p.out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return p, "http://" + addr
}

// keysCommand runs `codexpool keys args...` against the cluster's NATS and returns its stdout;
// it fails the test unless the command succeeds.
func (c *cluster) keysCommand(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"keys"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "CODEXPOOL_NATS_URL=" + c.url}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("codexpool keys %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// modelsStatus is the status of GET base/v1/models with secret as the Bearer key.
func modelsStatus(t *testing.T, hc *http.Client, base, secret string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestE2EKeyRevocation: keys managed live across two gateway processes on one NATS server.
// `codexpool keys add` prints a secret that both gateways accept (a real generation through
// each); `codexpool keys set` changes it; `codexpool keys revoke`, run with gateway A's NATS
// settings, makes gateway B refuse the key within 1 s of the command's return, without a
// restart (the time is logged). The bucket's stream holds no plaintext secret in any revision,
// and the audit stream has add, set and revoke with who, what and when, and no secret.
func TestE2EKeyRevocation(t *testing.T) {
	c := newJetStreamCluster(t, codextest.Options{Words: 4})
	c.startWorker("w-keys")
	gwA, baseA := c.startGatewayAs("gateway-a")
	gwB, baseB := c.startGatewayAs("gateway-b")
	ctx := ctxT(t, 2*time.Minute)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	secret := strings.TrimSpace(c.keysCommand(t, "add", "team-a", "--models", "gpt-5.1-codex", "--requests-per-minute", "100"))
	if !strings.HasPrefix(secret, "sk-cp-") || strings.ContainsAny(secret, " \n") {
		t.Fatalf("keys add printed %q, want one new secret", secret)
	}
	added := time.Now()
	for _, base := range []string{baseA, baseB} {
		testutil.WaitFor(t, 5*time.Second, "the new key accepted by "+base, func() bool {
			return modelsStatus(t, hc, base, secret) == http.StatusOK
		})
	}
	t.Logf("the added key was accepted by both gateways %s after keys add returned", time.Since(added).Round(time.Microsecond))
	for _, base := range []string{baseA, baseB} {
		sdk := sdkClient(t, base, secret)
		resp, err := sdk.Responses.New(ctx, sdkParams("hello with a live key"))
		if err != nil || resp.OutputText() != codextest.Answer("hello with a live key", 4) {
			t.Fatalf("generate through %s with the new key: %v", base, err)
		}
	}

	// The bucket holds the digest, not the secret.
	js, err := jetstream.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "CODEXPOOL_KEYS")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	var e gateway.KeyEntry
	if err := json.Unmarshal(entry.Value(), &e); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(secret))
	if e.SecretSHA256 != hex.EncodeToString(sum[:]) || e.RequestsPerMinute != 100 || len(e.Models) != 1 {
		t.Errorf("bucket entry %+v: want the secret's SHA-256, requests_per_minute 100, one model", e)
	}

	c.keysCommand(t, "set", "team-a", "--requests-per-minute", "200", "--max-concurrent", "2")
	if list := c.keysCommand(t, "list"); !strings.Contains(list, "team-a") || !strings.Contains(list, e.SecretSHA256[:12]) ||
		!strings.Contains(list, "requests_per_minute=200") || strings.Contains(list, secret) || strings.Contains(list, e.SecretSHA256) {
		t.Errorf("keys list: want team-a, its digest's prefix (only) and the new limit, no secret:\n%s", list)
	}
	if got := modelsStatus(t, hc, baseB, secret); got != http.StatusOK {
		t.Fatalf("gateway B before the revocation: %d, want 200", got)
	}

	// Revoke with gateway A's settings; gateway B must refuse the key within 1 s.
	start := time.Now()
	c.keysCommand(t, "revoke", "team-a")
	returned := time.Now()
	var refusedAt time.Time
	testutil.WaitFor(t, 5*time.Second, "gateway B to refuse the revoked key", func() bool {
		if modelsStatus(t, hc, baseB, secret) == http.StatusUnauthorized {
			refusedAt = time.Now()
			return true
		}
		return false
	})
	latency := refusedAt.Sub(returned)
	t.Logf("revocation: gateway B refused the key %s after `codexpool keys revoke` returned (%s after it started)",
		latency.Round(time.Microsecond), refusedAt.Sub(start).Round(time.Millisecond))
	if latency > time.Second {
		t.Errorf("gateway B refused the revoked key %s after the revocation, want within 1s", latency)
	}
	if got := modelsStatus(t, hc, baseA, secret); got != http.StatusUnauthorized {
		t.Errorf("gateway A after the revocation: %d, want 401", got)
	}
	if got := modelsStatus(t, hc, baseB, gatewayKey); got != http.StatusOK {
		t.Errorf("gateway B's configured key after the revocation: %d, want 200", got)
	}

	// No plaintext secret in any message of the bucket (every revision, the delete marker).
	bucket, err := js.Stream(ctx, "KV_CODEXPOOL_KEYS")
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); ; seq++ {
		m, err := bucket.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			info, _ := bucket.Info(ctx)
			if seq >= info.State.LastSeq {
				break
			}
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m.Data), secret) || bytes.Contains(m.Data, []byte(secret[6:])) {
			t.Errorf("bucket message %d holds the secret: %s", seq, m.Data)
		}
	}

	// The audit stream: add, set, revoke, each with who, what and when; no secret.
	audit, err := js.Stream(ctx, "CODEXPOOL_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := audit.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := audit.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m.Data), secret[6:]) || strings.Contains(string(m.Data), e.SecretSHA256) {
			t.Errorf("audit record %d holds the secret or its digest: %s", seq, m.Data)
		}
		var r gateway.AuditRecord
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Who == "" || !strings.Contains(r.Who, "@") || r.Time.IsZero() || time.Since(r.Time) > time.Minute {
			t.Errorf("audit record %s: want who (user@host) and when", m.Data)
		}
		got = append(got, r.Action+" "+r.Key)
		if r.Action == "set" && (r.Changes["requests_per_minute"] != float64(200) || r.Changes["max_concurrent"] != float64(2)) {
			t.Errorf("the set's audit record: %s, want requests_per_minute 200 and max_concurrent 2", m.Data)
		}
	}
	if strings.Join(got, ", ") != "add team-a, set team-a, revoke team-a" {
		t.Errorf("audit records: %v, want add, set, revoke of team-a", got)
	}

	// keys log shows them, oldest first, of one key when named, the last N when asked.
	c.keysCommand(t, "add", "team-b")
	var actions []string
	table := c.keysCommand(t, "log")
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 4 {
			actions = append(actions, f[2]+" "+f[3])
		}
	}
	if strings.Join(actions, ", ") != "add team-a, set team-a, revoke team-a, add team-b" || !strings.Contains(table, "max_concurrent=2") {
		t.Errorf("keys log:\n%s\nwant add, set (max_concurrent=2), revoke of team-a, then add team-b", table)
	}
	var last []string
	for _, line := range strings.Split(strings.TrimSpace(c.keysCommand(t, "log", "team-a", "--last", "2", "--json")), "\n") {
		var r gateway.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("keys log --json line %q: %v", line, err)
		}
		last = append(last, r.Action+" "+r.Key)
	}
	if strings.Join(last, ", ") != "set team-a, revoke team-a" {
		t.Errorf("keys log team-a --last 2 --json: %v, want the set and the revoke of team-a", last)
	}
	if strings.Contains(table, secret[6:]) || strings.Contains(table, e.SecretSHA256) {
		t.Errorf("keys log shows the secret or its digest:\n%s", table)
	}
	for _, p := range []*proc{gwA, gwB} {
		if out := p.out.String(); strings.Contains(out, secret[6:]) {
			t.Errorf("%s logged the secret", p.id)
		}
	}
}

// TestKeysCommandErrors: `codexpool keys` refuses bad input with an error naming what is wrong
// (the flag, the name) and changes nothing.
func TestKeysCommandErrors(t *testing.T) {
	c := newJetStreamCluster(t, codextest.Options{})
	getenv := envOf(map[string]string{"CODEXPOOL_NATS_URL": c.url, "HOME": t.TempDir()})
	keys := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"keys"}, args...), getenv, strings.NewReader(""), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	if _, err := keys("add", "dup"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"duplicate name", []string{"add", "dup"}, `a key of that name exists: "dup"`},
		{"bad limit", []string{"add", "x", "--requests-per-minute", "lots"}, "-requests-per-minute"},
		{"negative limit", []string{"add", "x", "--tokens-per-day=-5"}, "-tokens-per-day"},
		{"bad name", []string{"add", "a b"}, `key name "a b"`},
		{"bad digest", []string{"add", "x", "--secret-sha256", "abc"}, "--secret-sha256"},
		{"unknown key revoked", []string{"revoke", "nobody"}, `no key of that name: "nobody"`},
		{"unknown key set", []string{"set", "nobody", "--admin"}, `no key of that name: "nobody"`},
		{"set without a change", []string{"set", "dup"}, "give at least one field"},
		{"no name", []string{"revoke"}, "give the key's name"},
		{"unknown subcommand", []string{"rename", "dup"}, `unknown subcommand "rename"`},
		{"log of a bad name", []string{"log", "a b"}, `key name "a b"`},
		{"log, negative --last", []string{"log", "--last=-1"}, "--last must be 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := keys(tc.args...)
			if err == nil {
				t.Fatalf("keys %v succeeded:\n%s", tc.args, out)
			}
			if !strings.Contains(err.Error()+out, tc.want) {
				t.Errorf("keys %v: %v\n%s\nwant it to say %q", tc.args, err, out, tc.want)
			}
		})
	}
	out, err := keys("list")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "dup ") {
		t.Errorf("keys list after the refused commands: want only dup:\n%s", out)
	}
	if out, err := keys("--help"); err != nil || !strings.Contains(out, "keys revoke NAME") {
		t.Errorf("keys --help: %v\n%s", err, out)
	}
}

// TestKeysSeedCommand: `codexpool keys seed FILE` adds the keys file's keys the bucket lacks and
// keeps those it has or revoked (the bucket wins); a name the bucket cannot hold is an error
// naming it.
func TestKeysSeedCommand(t *testing.T) {
	c := newJetStreamCluster(t, codextest.Options{})
	getenv := envOf(map[string]string{"CODEXPOOL_NATS_URL": c.url, "HOME": t.TempDir()})
	keys := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"keys"}, args...), getenv, strings.NewReader(""), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	dir := t.TempDir()
	file := dir + "/keys.yaml"
	const secret = "sk-seeded-file-secret-7"
	if err := os.WriteFile(file, []byte("keys:\n  - name: seeded\n    secret: "+secret+"\n    requests_per_minute: 5\n  - name: gone\n    secret: sk-gone-9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "gone"}, {"revoke", "gone"}} {
		if out, err := keys(args...); err != nil {
			t.Fatalf("keys %v: %v\n%s", args, err, out)
		}
	}
	out, err := keys("seed", file)
	if err != nil || !strings.Contains(out, `added "seeded"`) || !strings.Contains(out, `kept "gone"`) {
		t.Fatalf("keys seed: %v\n%s\nwant seeded added, gone kept (revoked)", err, out)
	}
	if out, err := keys("seed", file); err != nil || !strings.Contains(out, `kept "seeded"`) {
		t.Errorf("keys seed again: %v\n%s\nwant seeded kept", err, out)
	}
	list, _ := keys("list")
	if !strings.Contains(list, "seeded") || !strings.Contains(list, "requests_per_minute=5") || strings.Contains(list, "gone") || strings.Contains(list, secret) {
		t.Errorf("keys list after seeding:\n%s", list)
	}
	bad := dir + "/bad.yaml"
	if err := os.WriteFile(bad, []byte("- name: fine\n  secret: sk-x-0\n- name: has space\n  secret: sk-x-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := keys("seed", bad); err == nil || !strings.Contains(err.Error(), `"has space"`) {
		t.Errorf("seeding a name the bucket cannot hold: %v, want an error naming it", err)
	}
	if list, _ := keys("list"); strings.Contains(list, "fine") {
		t.Errorf("a seed that failed wrote a key:\n%s", list)
	}
}
