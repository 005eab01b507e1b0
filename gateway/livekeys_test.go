package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/queue/embedded"
)

// keysPool is an embedded JetStream server (file store in dir), an operator's KeyAdmin and a
// gateway watching the keys bucket, behind a loopback HTTP server.
type keysPool struct {
	ns    *server.Server
	js    jetstream.JetStream
	admin *gateway.KeyAdmin
	live  *gateway.LiveKeys
	url   string
	logs  *testutil.SyncBuffer
}

func startJetStream(t *testing.T, dir string) *server.Server {
	t.Helper()
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(t *testing.T, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// newKeysPool starts a gateway with the static keys cfg holds plus the bucket's.
func newKeysPool(t *testing.T, ns *server.Server, cfg gateway.Config) *keysPool {
	t.Helper()
	ctx := ctxT(t, waitTimeout)
	p := &keysPool{ns: ns, logs: &testutil.SyncBuffer{}}
	var err error
	if p.js, err = jetstream.New(connect(t, ns)); err != nil {
		t.Fatal(err)
	}
	if p.admin, err = gateway.OpenKeyAdmin(ctx, p.js, "tester@test"); err != nil {
		t.Fatal(err)
	}
	gnc := connect(t, ns)
	gjs, err := jetstream.New(gnc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := gateway.OpenKeysBucket(ctx, gjs)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(p.logs, nil))
	if p.live, err = gateway.WatchKeys(ctx, gnc, kv, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.live.Stop)
	cfg.LiveKeys, cfg.Logger = p.live, log
	g := gateway.New(client.New(gnc, client.Options{}), gnc, cfg)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

// status is the answer to GET path with secret as the Bearer key ("": none).
func (p *keysPool) status(t *testing.T, path, secret string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.url+path, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus waits until GET path with secret answers want, and returns how long that took.
func (p *keysPool) waitStatus(t *testing.T, path, secret string, want int) time.Duration {
	t.Helper()
	start := time.Now()
	testutil.WaitFor(t, waitTimeout, "GET "+path+" to answer "+http.StatusText(want), func() bool {
		return p.status(t, path, secret) == want
	})
	return time.Since(start)
}

func fileKey(t *testing.T, name, secret string) gateway.Key {
	t.Helper()
	keys, err := gateway.ParseKeys([]byte("- name: " + name + "\n  secret: " + secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return keys[0]
}

// TestLiveKeys: a key added to the bucket is accepted, a change of its fields applies, a revoked
// one is refused, each within 1 s, on a gateway that was never restarted; the keys file's keys
// still work, a bucket entry of the same name revokes one; the last key revoked leaves the
// gateway asking for keys; the bucket and the audit stream hold no secret, and the audit stream
// has who, what and when of every change.
func TestLiveKeys(t *testing.T) {
	ns := startJetStream(t, t.TempDir())
	const (
		fileSecret  = "sk-file-team-secret-1"
		otherSecret = "sk-file-other-secret-2"
	)
	p := newKeysPool(t, ns, gateway.Config{ClientKeys: []gateway.Key{
		fileKey(t, "team", fileSecret), fileKey(t, "other", otherSecret),
	}})
	ctx := ctxT(t, waitTimeout)

	if got := p.status(t, "/v1/models", fileSecret); got != http.StatusOK {
		t.Fatalf("the keys file's key: %d, want 200", got)
	}
	secret := gateway.NewSecret()
	k := gateway.Key{Name: "alice", SHA256: gateway.Digest(secret), Admin: true, Models: []string{"gpt-5.1-codex"}}
	if got := p.status(t, "/v1/models", secret); got != http.StatusUnauthorized {
		t.Fatalf("a key not yet added: %d, want 401", got)
	}
	if err := p.admin.Add(ctx, k); err != nil {
		t.Fatal(err)
	}
	if d := p.waitStatus(t, "/v1/models", secret, http.StatusOK); d > time.Second {
		t.Errorf("the added key was accepted after %s, want within 1s", d)
	}
	if err := p.admin.Add(ctx, k); !errors.Is(err, gateway.ErrKeyExists) {
		t.Errorf("adding alice again: %v, want ErrKeyExists", err)
	}
	// An admin key without a Meter: 503; once not an admin: 403.
	if got := p.status(t, "/v1/usage", secret); got != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/usage as an admin key: %d, want 503 (no meter)", got)
	}
	if _, err := p.admin.Set(ctx, "alice", func(e *gateway.KeyEntry) []string {
		e.Admin, e.RequestsPerMinute = false, 60
		return []string{"admin", "requests_per_minute"}
	}); err != nil {
		t.Fatal(err)
	}
	if d := p.waitStatus(t, "/v1/usage", secret, http.StatusForbidden); d > time.Second {
		t.Errorf("admin: false applied after %s, want within 1s", d)
	}
	if _, err := p.admin.Set(ctx, "nobody", func(*gateway.KeyEntry) []string { return nil }); !errors.Is(err, gateway.ErrNoKey) {
		t.Errorf("set of an unknown key: %v, want ErrNoKey", err)
	}
	if err := p.admin.Revoke(ctx, "nobody"); !errors.Is(err, gateway.ErrNoKey) {
		t.Errorf("revoke of an unknown key: %v, want ErrNoKey", err)
	}
	if err := p.admin.Revoke(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	d := p.waitStatus(t, "/v1/models", secret, http.StatusUnauthorized)
	t.Logf("revocation applied after %s", d)
	if d > time.Second {
		t.Errorf("the revoked key was refused after %s, want within 1s", d)
	}

	// Seeding from the keys file: team goes into the bucket, alice (revoked) stays revoked.
	added, kept, err := p.admin.Seed(ctx, []gateway.Key{fileKey(t, "team", fileSecret), fileKey(t, "alice", "sk-alice-from-a-file")})
	if err != nil || strings.Join(added, ",") != "team" || strings.Join(kept, ",") != "alice" {
		t.Fatalf("seed: added %v, kept %v, %v; want added [team], kept [alice]", added, kept, err)
	}
	if err := p.admin.Revoke(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if d := p.waitStatus(t, "/v1/models", fileSecret, http.StatusUnauthorized); d > time.Second {
		t.Errorf("the keys file's key revoked in the bucket was refused after %s, want within 1s", d)
	}
	if got := p.status(t, "/v1/models", otherSecret); got != http.StatusOK {
		t.Errorf("the other keys-file key: %d, want 200", got)
	}

	checkNoSecret(t, ctx, p.js, secret, fileSecret)
	recs := auditRecords(t, ctx, p.js)
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+" "+r.Key)
		if r.Who != "tester@test" || r.Time.IsZero() {
			t.Errorf("audit record %+v: want who tester@test and a time", r)
		}
	}
	if got, want := strings.Join(actions, ", "), "add alice, set alice, revoke alice, seed team, revoke team"; got != want {
		t.Errorf("audit records: %s, want %s", got, want)
	}
	if len(recs) > 1 && (recs[1].Changes["admin"] != false || recs[1].Changes["requests_per_minute"] != float64(60) || len(recs[1].Changes) != 2) {
		t.Errorf("the set's audit record: changes %v, want admin false and requests_per_minute 60", recs[1].Changes)
	}
}

// TestLiveKeysLastRevokedStaysClosed: a gateway with no configured keys that got one from the
// bucket keeps asking for keys when it is revoked, instead of opening up.
func TestLiveKeysLastRevokedStaysClosed(t *testing.T) {
	ns := startJetStream(t, t.TempDir())
	p := newKeysPool(t, ns, gateway.Config{})
	ctx := ctxT(t, waitTimeout)
	if got := p.status(t, "/v1/models", ""); got != http.StatusOK {
		t.Fatalf("a gateway without keys: %d, want 200 (open, loopback)", got)
	}
	secret := gateway.NewSecret()
	if err := p.admin.Add(ctx, gateway.Key{Name: "only", SHA256: gateway.Digest(secret)}); err != nil {
		t.Fatal(err)
	}
	p.waitStatus(t, "/v1/models", "", http.StatusUnauthorized)
	if got := p.status(t, "/v1/models", secret); got != http.StatusOK {
		t.Fatalf("the bucket's key: %d, want 200", got)
	}
	if err := p.admin.Revoke(ctx, "only"); err != nil {
		t.Fatal(err)
	}
	p.waitStatus(t, "/v1/models", secret, http.StatusUnauthorized)
	if got := p.status(t, "/v1/models", ""); got != http.StatusUnauthorized {
		t.Errorf("no key after the last was revoked: %d, want 401", got)
	}
}

// TestLiveKeysSurviveRestart: the keys are in the file store: a new server on the same store
// and a new gateway accept the key added before, and refuse the one revoked before.
func TestLiveKeysSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ns := startJetStream(t, dir)
	p := newKeysPool(t, ns, gateway.Config{})
	ctx := ctxT(t, waitTimeout)
	kept, gone := gateway.NewSecret(), gateway.NewSecret()
	for name, s := range map[string]string{"kept": kept, "gone": gone} {
		if err := p.admin.Add(ctx, gateway.Key{Name: name, SHA256: gateway.Digest(s)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.admin.Revoke(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	p.live.Stop()
	ns.Shutdown()
	ns.WaitForShutdown()

	p2 := newKeysPool(t, startJetStream(t, dir), gateway.Config{})
	if got := p2.status(t, "/v1/models", kept); got != http.StatusOK {
		t.Errorf("the key added before the restart: %d, want 200", got)
	}
	if got := p2.status(t, "/v1/models", gone); got != http.StatusUnauthorized {
		t.Errorf("the key revoked before the restart: %d, want 401", got)
	}
	if got := p2.status(t, "/v1/models", ""); got != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", got)
	}
}

// TestLiveKeysBadEntry: an entry that does not decode (written by hand) accepts nothing, even
// for a keys-file key of its name, and the gateway says why in its log.
func TestLiveKeysBadEntry(t *testing.T) {
	ns := startJetStream(t, t.TempDir())
	const fileSecret = "sk-file-team-secret-3"
	p := newKeysPool(t, ns, gateway.Config{ClientKeys: []gateway.Key{fileKey(t, "team", fileSecret)}})
	ctx := ctxT(t, waitTimeout)
	kv, err := p.js.KeyValue(ctx, gateway.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "team", []byte(`{"name":"team","secret_sha256":"not-hex"}`)); err != nil {
		t.Fatal(err)
	}
	p.waitStatus(t, "/v1/models", fileSecret, http.StatusUnauthorized)
	if !strings.Contains(p.logs.String(), "secret_sha256") {
		t.Errorf("no log line names the bad field:\n%s", p.logs.String())
	}
}

func TestCheckKeyName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"alice", true}, {"team-a_1", true}, {"team.alpha", true},
		{"", false}, {".a", false}, {"a.", false}, {"a..b", false}, {"a b", false}, {"a*", false},
		{"a>", false}, {"sha256:abc", false}, {strings.Repeat("a", 65), false},
	} {
		if err := gateway.CheckKeyName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckKeyName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// checkNoSecret reads every message of the keys bucket's stream (every revision and marker) and
// fails if one holds any of secrets.
func checkNoSecret(t *testing.T, ctx context.Context, js jetstream.JetStream, secrets ...string) {
	t.Helper()
	for _, stream := range []string{"KV_" + gateway.KeysBucket, gateway.AuditStream} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			for _, secret := range secrets {
				if strings.Contains(string(m.Data), secret) || strings.Contains(m.Subject, secret) {
					t.Errorf("%s message %d holds a secret: %s", stream, seq, m.Data)
				}
			}
		}
	}
}

func auditRecords(t *testing.T, ctx context.Context, js jetstream.JetStream) []gateway.AuditRecord {
	t.Helper()
	s, err := js.Stream(ctx, gateway.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []gateway.AuditRecord
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var r gateway.AuditRecord
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestLiveKeysAcrossServerRestart: the gateway's watcher outlives a restart of the NATS server
// (same address, same store): a key added after it comes back is accepted without a restart of
// the gateway.
func TestLiveKeysAcrossServerRestart(t *testing.T) {
	dir := t.TempDir()
	ns := startJetStream(t, dir)
	addr := ns.Addr().String()
	p := newKeysPool(t, ns, gateway.Config{Keys: []string{key}})
	ns.Shutdown()
	ns.WaitForShutdown()
	ns2, err := embedded.Start(addr, nil, embedded.WithJetStream(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns2.Shutdown(); ns2.WaitForShutdown() })
	ctx := ctxT(t, waitTimeout)
	js, err := jetstream.New(connect(t, ns2))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := gateway.OpenKeyAdmin(ctx, js, "tester@test")
	if err != nil {
		t.Fatal(err)
	}
	secret := gateway.NewSecret()
	if err := admin.Add(ctx, gateway.Key{Name: "after", SHA256: gateway.Digest(secret)}); err != nil {
		t.Fatal(err)
	}
	d := p.waitStatus(t, "/v1/models", secret, http.StatusOK)
	t.Logf("a key added after the server's restart was accepted after %s", d)
	// The connection waits 2 s (nats.DefaultReconnectWait) before it reconnects; the watcher's
	// own heartbeat timeout would take 10 s and more.
	if d > 5*time.Second {
		t.Errorf("the key was accepted after %s, want it soon after the reconnection", d)
	}
}

// TestLiveKeysRevokeEndsWebSocket: a WebSocket opened with a key does not outlive its
// revocation: the next frame is answered with a close (1008) and no turn runs.
func TestLiveKeysRevokeEndsWebSocket(t *testing.T) {
	ns := startJetStream(t, t.TempDir())
	p := newKeysPool(t, ns, gateway.Config{Keys: []string{key}})
	ctx := ctxT(t, waitTimeout)
	secret := gateway.NewSecret()
	if err := p.admin.Add(ctx, gateway.Key{Name: "ws", SHA256: gateway.Digest(secret)}); err != nil {
		t.Fatal(err)
	}
	p.waitStatus(t, "/v1/models", secret, http.StatusOK)
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(p.url, "http")+"/v1/responses",
		http.Header{"Authorization": {"Bearer " + secret}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := p.admin.Revoke(ctx, "ws"); err != nil {
		t.Fatal(err)
	}
	p.waitStatus(t, "/v1/models", secret, http.StatusUnauthorized)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"response.create","input":"hello"}`)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(waitTimeout))
	_, msg, err := ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("after the revocation the socket answered %s, %v; want a close 1008", msg, err)
	}
}
