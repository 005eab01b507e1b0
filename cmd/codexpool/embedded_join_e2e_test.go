package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker/codextest"
)

// TestE2ESecondWorkerJoinsEmbedded: a second plain `codexpool worker` of the same user, on a
// machine where the first embeds NATS, finds the address taken and joins that server within
// seconds (it waited 10 s for a server that could not start, then failed). Both serve.
func TestE2ESecondWorkerJoinsEmbedded(t *testing.T) {
	sim := codextest.NewServer(codextest.Options{Token: simToken, Words: 4})
	t.Cleanup(sim.Close)
	addr := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	home, state := t.TempDir(), t.TempDir()
	c := &cluster{t: t, sim: sim}
	start := func(id string) *proc {
		return c.startProcess(id, []string{"worker"}, "HOME="+home, "XDG_STATE_HOME="+state,
			"CODEXPOOL_NATS_URL=", "CODEXPOOL_EMBEDDED_NATS_ADDR="+addr, "CODEXPOOL_CODEX_URL="+sim.URL,
			"CODEXPOOL_CODEX_TOKEN="+simToken, "CODEXPOOL_WORKER_ID="+id)
	}
	serving := func(p *proc) bool { return strings.Contains(p.out.String(), `"msg":"serving"`) }
	w1 := start("w1")
	testutil.WaitFor(t, 60*time.Second, "w1 serving", func() bool { return serving(w1) })

	began := time.Now()
	w2 := start("w2")
	testutil.WaitFor(t, 10*time.Second, "w2 serving", func() bool {
		select {
		case <-w2.done:
			t.Fatalf("w2 exited: %v\n%s", w2.err, w2.out.String())
		default:
		}
		return serving(w2)
	})
	t.Logf("the second worker served %s after its start", time.Since(began).Round(time.Millisecond))
	if want := "joined the embedded NATS server at nats://" + addr; !strings.Contains(w2.out.String(), want) {
		t.Errorf("w2's log lacks %q:\n%s", want, w2.out.String())
	}

	auth, err := queue.ReadLocalAuth(filepath.Join(state, "codexpool", queue.LocalAuthFileName))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+addr, nats.UserInfo(auth.User, auth.Password))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	for _, id := range []string{"w1", "w2"} {
		if n := countWorkers(nc, "codex.generate", id); n != 1 {
			t.Errorf("worker %s: %d services on codex.generate, want 1", id, n)
		}
	}
}
