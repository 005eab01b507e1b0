package queue

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/queue/embedded"
)

// TestLocalAuthFile: the first call creates a 0600 file, later calls and concurrent first calls
// agree on one password, and a file others may read is refused.
func TestLocalAuthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "codexpool", LocalAuthFileName)
	if _, err := ReadLocalAuth(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadLocalAuth of a missing file: %v, want fs.ErrNotExist", err)
	}
	var wg sync.WaitGroup
	got := make([]LocalAuth, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = LoadOrCreateLocalAuth(path) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("concurrent creators disagree: %v vs %v", got[i].User, got[0].User)
		}
	}
	if got[0].User != LocalUser || len(got[0].Password) < 40 {
		t.Fatalf("got user %q and a %d-character password, want %q and 43", got[0].User, len(got[0].Password), LocalUser)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	again, err := LoadOrCreateLocalAuth(path)
	if err != nil || again != got[0] {
		t.Errorf("second load changed the password (err %v)", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLocalAuth(path); err == nil {
		t.Error("a world-readable credential file was accepted")
	}
}

// TestEmbeddedRequiresLocalAuth: an embedded server started with WithLocalAuth refuses a client
// without the password (and with a wrong one), and serves one with it, JetStream included.
func TestEmbeddedRequiresLocalAuth(t *testing.T) {
	a, err := LoadOrCreateLocalAuth(filepath.Join(t.TempDir(), LocalAuthFileName))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := embedded.Start("127.0.0.1:0", nil, embedded.WithJetStream(t.TempDir()), WithLocalAuth(a))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"no credential", nil},
		{"wrong password", []nats.Option{nats.UserInfo(LocalUser, a.Password+"x")}},
	} {
		if nc, err := nats.Connect(ns.ClientURL(), tc.opts...); err == nil {
			nc.Close()
			t.Errorf("%s: connected, want an authorization error", tc.name)
		}
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(a.User, a.Password))
	if err != nil {
		t.Fatalf("with the credential: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Request("$JS.API.INFO", nil, waitTimeout); err != nil {
		t.Errorf("JetStream with the credential: %v", err)
	}
}

// TestSecurityLocalAuth: the local credential is used only without other authentication and only
// for servers on loopback.
func TestSecurityLocalAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), LocalAuthFileName)
	a, err := LoadOrCreateLocalAuth(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sec  Security
		urls string
		want string // the user the result presents
	}{
		{"loopback", Security{}, "nats://127.0.0.1:4222", LocalUser},
		{"localhost list", Security{}, "nats://localhost:4222,nats://[::1]:4223", LocalUser},
		{"bare host:port", Security{}, "127.0.0.1:4222", LocalUser},
		{"remote server", Security{}, "nats://nats.example:4222", ""},
		{"one remote in the list", Security{}, "nats://127.0.0.1:4222,nats://10.1.2.3:4222", ""},
		{"credentials in the URL", Security{}, "nats://me:pw@127.0.0.1:4222", ""},
		{"own user", Security{User: "alice", Password: "x"}, "nats://127.0.0.1:4222", "alice"},
		{"own token", Security{Token: "t"}, "nats://127.0.0.1:4222", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.sec.LocalAuth(tc.urls, path)
			if err != nil {
				t.Fatal(err)
			}
			if got.User != tc.want {
				t.Errorf("user %q, want %q", got.User, tc.want)
			}
			if got.User == LocalUser && got.Password != a.Password {
				t.Error("the local user without the file's password")
			}
		})
	}
	if got, err := (Security{}).LocalAuth("nats://127.0.0.1:4222", filepath.Join(t.TempDir(), "missing")); err != nil || got.Kind() != "none" {
		t.Errorf("no file: %v, %v; want no authentication and no error", got, err)
	}
}

// TestLocalAuthURLs: every server of a list gets the credential; the result still parses as a
// server list and RedactURL hides the password.
func TestLocalAuthURLs(t *testing.T) {
	a := LocalAuth{User: LocalUser, Password: "pw-secret"}
	got := a.URLs("nats://127.0.0.1:4222, 127.0.0.1:4223")
	if want := "nats://codexpool:pw-secret@127.0.0.1:4222,nats://codexpool:pw-secret@127.0.0.1:4223"; got != want {
		t.Errorf("URLs = %q, want %q", got, want)
	}
	if red := RedactURL(got); strings.Contains(red, "pw-secret") {
		t.Errorf("RedactURL(%q) = %q, shows the password", got, red)
	}
	if LoopbackURLs(got) {
		t.Error("a URL with credentials counts as one LocalAuth may add to")
	}
}
