package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue/client"
	"github.com/codexpool/codexpool/worker/codextest"
)

// rolesFile is the nats-server configuration docs/security.md shows for the four roles.
const rolesFile = "../../docs/nats-roles.conf"

// violations collects a connection's permission errors.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.errs...)
}

// waitFor waits until a permission violation naming subject arrived.
func (v *violations) waitFor(t *testing.T, subject string) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "a permissions violation for "+subject, func() bool {
		for _, e := range v.all() {
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, `"`+subject+`"`) {
				return true
			}
		}
		return false
	})
}

// startRolesServer runs a JetStream server with exactly docs/nats-roles.conf's users, plus an admin
// user of the test's own that sets up and inspects what the roles must not touch.
func startRolesServer(t *testing.T) *server.Server {
	t.Helper()
	for _, r := range []string{"WORKER", "CLIENT", "GATEWAY", "OPERATOR"} {
		t.Setenv("NATS_"+r+"_PASSWORD", strings.ToLower(r)+"-pw")
	}
	opts, err := server.ProcessConfigFile(rolesFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Users) != 4 {
		t.Fatalf("%s has %d users, want worker, client, gateway and operator", rolesFile, len(opts.Users))
	}
	for _, u := range opts.Users {
		for _, s := range append(u.Permissions.Publish.Allow, u.Permissions.Subscribe.Allow...) {
			if s == "$JS.API.>" || s == ">" || s == "$JS.>" || s == "$KV.>" {
				t.Errorf("role %s is granted %s", u.Username, s)
			}
		}
	}
	opts.Users = append(opts.Users, &server.User{Username: "admin", Password: "admin-pw"})
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", server.RANDOM_PORT, true, true
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	return testutil.StartServer(t, opts)
}

func connectAs(t *testing.T, url, user string, v *violations) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.UserInfo(user, user+"-pw")}
	if v != nil {
		opts = append(opts, nats.ErrorHandler(v.handler))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestE2ERoles is issue 22's target 2: a real nats-server whose users hold exactly docs/security.md's role
// sets (docs/nats-roles.conf). A worker serves under its role; a client (and the gateway's role)
// generates, streams, cancels, submits jobs, reads their results and lists the pool; and every
// forbidden act — reading a credential entry by any API, writing or deleting a result, purging or
// deleting a stream, taking jobs, publishing gate messages — is refused, one by one.
func TestE2ERoles(t *testing.T) {
	ns := startRolesServer(t)
	admin := connectAs(t, ns.ClientURL(), "admin", nil)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	creds, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CODEXPOOL_CREDENTIALS"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.Put(ctx, "login_planted", []byte("a-refresh-token-nobody-may-read")); err != nil {
		t.Fatal(err)
	}

	// The worker reads a login whose tokens live 4 s, so it refreshes and shares them through the
	// credentials bucket under its role while the test runs.
	sim := codextest.NewServer(codextest.Options{
		Accounts:      []codextest.Account{{Name: "alice", AccountID: "acct-alice-roles-0123456789"}},
		TokenLifetime: 4 * time.Second, Latency: 20 * time.Millisecond, Words: 4,
	})
	t.Cleanup(sim.Close)
	var workerV violations
	c := &cluster{t: t, url: ns.ClientURL(), sim: sim}
	c.nc = connectAs(t, ns.ClientURL(), "client", &workerV) // the cluster's own connection: a client
	c.client = client.New(c.nc, client.Options{})
	path := filepath.Join(t.TempDir(), "auth.json")
	writeLoginFile(t, sim, path)
	p := c.startWorker("w-roles", append(loginEnv(c, path),
		"CODEXPOOL_NATS_USER=worker", "CODEXPOOL_NATS_PASSWORD=worker-pw", "CODEXPOOL_JOBS=on")...)
	testutil.WaitFor(t, 30*time.Second, "the worker's login in the credentials bucket", func() bool {
		keys, _ := creds.ListKeys(ctx)
		n := 0
		for k := range keys.Keys() {
			if k != "login_planted" {
				n++
			}
		}
		return n > 0
	})

	// The operator role manages the keys with the real command; the bucket and the audit stream
	// are created under it.
	secret := operatorKeys(t, ns.ClientURL(), "add", "planted-key", "--admin")
	operatorKeys(t, ns.ClientURL(), "set", "planted-key", "--models", "gpt-5.1-codex")
	operatorKeys(t, ns.ClientURL(), "list")
	if log := operatorKeys(t, ns.ClientURL(), "log", "planted-key"); strings.Count(log, "planted-key") != 2 {
		t.Errorf("keys log as the operator role:\n%s\nwant the add and the set", log)
	}
	for _, role := range []string{"client", "gateway"} {
		t.Run(role, func(t *testing.T) {
			var v violations
			nc := connectAs(t, ns.ClientURL(), role, &v)
			rolesCanWork(t, nc, role)
			if role == "gateway" {
				gatewayWatchesKeys(t, nc)
			}
			if errs := v.all(); len(errs) > 0 {
				t.Fatalf("the %s role's own work hit errors: %v", role, errs)
			}
			rolesCannot(t, nc, &v, js)
			keysCannot(t, nc, &v, role, js, secret)
		})
	}
	t.Run("operator", func(t *testing.T) {
		var v violations
		nc := connectAs(t, ns.ClientURL(), "operator", &v)
		for _, subject := range []string{
			"codex.generate", "codex.jobs.submit", "$KV.CODEXPOOL_CREDENTIALS.login_planted", "$KV.CODEXPOOL_RESULTS.forged",
			"$JS.API.STREAM.INFO.KV_CODEXPOOL_CREDENTIALS", "$JS.API.STREAM.LIST",
			"$JS.API.STREAM.PURGE.KV_CODEXPOOL_KEYS", "$JS.API.STREAM.DELETE.KV_CODEXPOOL_KEYS",
			"$JS.API.STREAM.PURGE.CODEXPOOL_AUDIT", "$JS.API.STREAM.DELETE.CODEXPOOL_AUDIT", "$JS.API.STREAM.MSG.DELETE.CODEXPOOL_AUDIT",
		} {
			if err := nc.PublishRequest(subject, nc.NewRespInbox(), []byte("{}")); err != nil {
				t.Fatal(err)
			}
			v.waitFor(t, subject)
		}
	})
	if errs := workerV.all(); len(errs) > 0 {
		t.Errorf("client errors: %v", errs)
	}
	jobs := exec.Command(binPath, "jobs")
	jobs.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "CODEXPOOL_NATS_URL=" + ns.ClientURL(),
		"CODEXPOOL_NATS_USER=client", "CODEXPOOL_NATS_PASSWORD=client-pw"}
	if out, err := jobs.CombinedOutput(); err != nil {
		t.Errorf("codexpool jobs as the client role: %v\n%s", err, out)
	}
	p.stop(t, 30*time.Second)
	if out := p.out.String(); strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Errorf("the worker hit a permission violation under its role:\n%s", out)
	}
}

// rolesCanWork: what a client (or the gateway) does, all allowed.
func rolesCanWork(t *testing.T, nc *nats.Conn, role string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	cl := client.New(nc, client.Options{})
	if r, err := cl.Generate(ctx, request("hello "+role, nil), nil); err != nil || r.OutputText == "" {
		t.Fatalf("generate: %+v, %v", r, err)
	}
	if _, err := cl.Stream(ctx, request("stream "+role, nil), nil, func([]byte) error { return nil }); err != nil {
		t.Fatalf("stream: %v", err)
	}
	sess := cl.Session("")
	r, err := sess.Generate(ctx, request("session "+role, nil), nil)
	if err != nil {
		t.Fatalf("session turn 1: %v", err)
	}
	var first struct{ ID string }
	_ = json.Unmarshal(r.Response, &first)
	if r, err = sess.Generate(ctx, request("more", map[string]any{"previous_response_id": first.ID}), nil); err != nil || r.Worker != "w-roles" {
		t.Fatalf("session turn 2 on the worker's own subject: %+v, %v", r, err)
	}
	if err := nc.Publish("codex.cancel", []byte("no-such-request")); err != nil {
		t.Fatal(err)
	}
	inbox := nc.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription before the worker answers
		t.Fatal(err)
	}
	j, err := cl.Submit(ctx, request("job "+role, nil), client.SubmitOptions{ReplyTo: inbox})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := replies.NextMsg(30 * time.Second); err != nil {
		t.Fatalf("no reply on the job's Codex-Reply-To %s: %v", inbox, err)
	}
	if r, err := cl.Wait(ctx, j.ID); err != nil || r.OutputText == "" {
		t.Fatalf("wait for job %s: %+v, %v", j.ID, r, err)
	}
	if _, err := cl.Result(ctx, j.ID); err != nil {
		t.Fatalf("result: %v", err)
	}
	if n := countWorkers(nc, "codex.generate", "w-roles"); n != 1 {
		t.Fatalf("discovery found %d workers, want 1", n)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// rolesCannot: every act a client must not do is refused by the server, and changed nothing.
func rolesCannot(t *testing.T, nc *nats.Conn, v *violations, admin jetstream.JetStream) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	for _, subject := range []string{
		"$JS.API.DIRECT.GET.KV_CODEXPOOL_CREDENTIALS.$KV.CODEXPOOL_CREDENTIALS.login_planted",
		"$JS.API.DIRECT.GET.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.STREAM.MSG.GET.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.STREAM.INFO.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.CONSUMER.CREATE.KV_CODEXPOOL_CREDENTIALS.spy",
		"$JS.API.CONSUMER.DURABLE.CREATE.KV_CODEXPOOL_CREDENTIALS.spy",
		"$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO.KV_CODEXPOOL_JOBS_KEY",
		"$KV.CODEXPOOL_RESULTS.forged",
		"$KV.CODEXPOOL_CREDENTIALS.login_planted",
		"$JS.API.STREAM.MSG.DELETE.KV_CODEXPOOL_RESULTS",
		"$JS.API.STREAM.PURGE.KV_CODEXPOOL_RESULTS",
		"$JS.API.STREAM.PURGE.CODEXPOOL_JOBS",
		"$JS.API.STREAM.DELETE.CODEXPOOL_JOBS",
		"$JS.API.STREAM.DELETE.KV_CODEXPOOL_RESULTS",
		"$JS.API.STREAM.DELETE.KV_CODEXPOOL_CREDENTIALS",
		"$JS.API.STREAM.UPDATE.CODEXPOOL_JOBS",
		"$JS.API.CONSUMER.CREATE.CODEXPOOL_JOBS.thief",
		"$JS.API.CONSUMER.DELETE.CODEXPOOL_JOBS.codexpool",
		"$JS.API.CONSUMER.MSG.NEXT.CODEXPOOL_JOBS.codexpool",
		"$JS.ACK.CODEXPOOL_JOBS.codexpool.1.1.1.1.1",
		"codexpool.gate.0123456789abcdef",
		"_INBOX.someone-elses-reply",
	} {
		if err := nc.PublishRequest(subject, nc.NewRespInbox(), []byte("{}")); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subject)
	}
	for _, subject := range []string{"$KV.CODEXPOOL_CREDENTIALS.>", "$KV.CODEXPOOL_RESULTS.>", "codex.generate", "codexpool.gate.>"} {
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subject)
	}
	// A request that names a result key as its reply subject: the server lets the client send it,
	// the worker refuses it (no generation, no write).
	before := refusedReplies(nc)
	if err := nc.PublishMsg(&nats.Msg{Subject: "codex.generate", Reply: "$KV.CODEXPOOL_RESULTS.forged", Data: request("forge", nil)}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the worker's count of refused reply subjects", func() bool {
		return refusedReplies(nc) > before
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := js.KeyValue(short, "CODEXPOOL_CREDENTIALS"); err == nil {
		t.Error("the credentials bucket opened through the KV API")
	}
	// Nothing changed: the credential entry, the jobs stream and its consumer are all still there.
	kv, err := admin.KeyValue(ctx, "CODEXPOOL_CREDENTIALS")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "login_planted"); err != nil || string(e.Value()) != "a-refresh-token-nobody-may-read" {
		t.Errorf("credential entry after the attempts: %v", err)
	}
	results, err := admin.KeyValue(ctx, "CODEXPOOL_RESULTS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := results.Get(ctx, "forged"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a forged result exists: %v", err)
	}
	if _, err := admin.Consumer(ctx, "CODEXPOOL_JOBS", "codexpool"); err != nil {
		t.Errorf("the jobs consumer after the attempts: %v", err)
	}
}

// operatorKeys runs `codexpool keys args...` under the operator role and returns its stdout.
func operatorKeys(t *testing.T, url string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"keys"}, args...)...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "CODEXPOOL_NATS_URL=" + url,
		"CODEXPOOL_NATS_USER=operator", "CODEXPOOL_NATS_PASSWORD=operator-pw"}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("codexpool keys %v as the operator role: %v\n%s%s", args, err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}

// gatewayWatchesKeys: under the gateway role, the keys bucket opens and its watcher reads the
// operator's key.
func gatewayWatchesKeys(t *testing.T, nc *nats.Conn) {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := gateway.OpenKeysBucket(ctx, js)
	if err != nil {
		t.Fatalf("the gateway role opens the keys bucket: %v", err)
	}
	live, err := gateway.WatchKeys(ctx, nc, kv, nil)
	if err != nil {
		t.Fatalf("the gateway role watches the keys bucket: %v", err)
	}
	defer live.Stop()
	if live.Len() != 1 {
		t.Errorf("the gateway role's watcher read %d keys, want the operator's 1", live.Len())
	}
}

// keysCannot: neither the client nor the gateway role may write the keys bucket or the audit
// stream (the client may not even read the bucket), and the attempts change nothing.
func keysCannot(t *testing.T, nc *nats.Conn, v *violations, role string, admin jetstream.JetStream, secret string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	subjects := []string{
		"$KV.CODEXPOOL_KEYS.planted-key", "$KV.CODEXPOOL_KEYS.forged",
		"$JS.API.STREAM.PURGE.KV_CODEXPOOL_KEYS", "$JS.API.STREAM.DELETE.KV_CODEXPOOL_KEYS",
		"$JS.API.STREAM.UPDATE.KV_CODEXPOOL_KEYS", "$JS.API.STREAM.MSG.DELETE.KV_CODEXPOOL_KEYS",
		"codexpool.audit.keys", "$JS.API.STREAM.INFO.CODEXPOOL_AUDIT", "$JS.API.STREAM.PURGE.CODEXPOOL_AUDIT",
		"$JS.API.STREAM.DELETE.CODEXPOOL_AUDIT", "$JS.API.STREAM.MSG.GET.CODEXPOOL_AUDIT",
		"$JS.API.CONSUMER.CREATE.CODEXPOOL_AUDIT.spy",
	}
	if role == "client" {
		subjects = append(subjects, "$JS.API.STREAM.INFO.KV_CODEXPOOL_KEYS",
			"$JS.API.CONSUMER.CREATE.KV_CODEXPOOL_KEYS.spy", "$JS.API.DIRECT.GET.KV_CODEXPOOL_KEYS.$KV.CODEXPOOL_KEYS.planted-key")
	}
	for _, subject := range subjects {
		if err := nc.PublishRequest(subject, nc.NewRespInbox(), []byte(`{"name":"forged","secret_sha256":"00"}`)); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subject)
	}
	kv, err := admin.KeyValue(ctx, "CODEXPOOL_KEYS")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "planted-key")
	if err != nil {
		t.Fatalf("the operator's key after the %s role's attempts: %v", role, err)
	}
	var entry gateway.KeyEntry
	if err := json.Unmarshal(e.Value(), &entry); err != nil || !entry.Admin || len(entry.Models) != 1 || e.Revision() != 2 {
		t.Errorf("the operator's key after the %s role's attempts: %s (revision %d), want it as the operator left it", role, e.Value(), e.Revision())
	}
	if strings.Contains(string(e.Value()), secret) {
		t.Error("the keys bucket holds the secret")
	}
	if _, err := kv.Get(ctx, "forged"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("a forged key exists: %v", err)
	}
	audit, err := admin.Stream(ctx, "CODEXPOOL_AUDIT")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := audit.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Errorf("audit stream after the %s role's attempts: %+v, %v; want the operator's 2 records", role, info, err)
	}
}

// refusedReplies sums refused_reply_subject over the pool's stats.
func refusedReplies(nc *nats.Conn) uint64 {
	stats, _ := client.Stats(context.Background(), nc, 200*time.Millisecond)
	var n uint64
	for _, st := range stats {
		for _, ep := range st.Endpoints {
			var d struct {
				Refused uint64 `json:"refused_reply_subject"`
			}
			if json.Unmarshal(ep.Data, &d) == nil {
				n += d.Refused
			}
		}
	}
	return n
}
