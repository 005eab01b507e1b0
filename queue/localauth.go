package queue

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/codexpool/codexpool/queue/embedded"
)

// LocalUser is the NATS user name of the embedded server's one user.
const LocalUser = "codexpool"

// LocalAuthFileName is the name of the file, in codexpool's state directory, that holds the
// embedded server's password.
const LocalAuthFileName = "nats-password"

// LocalAuth is the credential an embedded NATS server requires: user LocalUser and a random
// password kept in a file only its owner can read (0600), so that every codexpool command of that
// user on the machine can join the pool and no other local process can.
type LocalAuth struct {
	User     string
	Password string
}

// LoadOrCreateLocalAuth reads the password file at path, or creates it (and its directory, 0700)
// with 256 random bits when it does not exist. Processes that race to create it agree on one
// password: the file appears whole or not at all.
func LoadOrCreateLocalAuth(path string) (LocalAuth, error) {
	a, err := ReadLocalAuth(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nats-password-*")
	if err != nil {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(NewLocalAuth().Password + "\n")
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", werr)
	}
	// Link, not rename: it fails if another process made the file first, and then its password wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", err)
	}
	return ReadLocalAuth(path)
}

// NewLocalAuth returns a fresh credential (user LocalUser, 256 random bits of password) for a
// server that lives only as long as its process, such as bench's.
func NewLocalAuth() LocalAuth {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return LocalAuth{User: LocalUser, Password: base64.RawURLEncoding.EncodeToString(b[:])}
}

// URL returns the nats:// URL of a server at host:port (a server's ClientURL is fine) with a's
// user and password in it, for child processes that take one URL; log it only through RedactURL.
func (a LocalAuth) URL(clientURL string) string {
	u, err := url.Parse(clientURL)
	if err != nil {
		return clientURL
	}
	u.User = url.UserPassword(a.User, a.Password)
	return u.String()
}

// ReadLocalAuth reads the password file at path. A missing file is an error wrapping
// fs.ErrNotExist; a file that other users may read is refused (its secret may be known).
func ReadLocalAuth(path string) (LocalAuth, error) {
	st, err := os.Stat(path)
	if err != nil {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential %s: mode %04o lets other users read it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential: %w", err)
	}
	pw := strings.TrimSpace(string(b))
	if len(pw) < 16 {
		return LocalAuth{}, fmt.Errorf("queue: local NATS credential %s: too short (delete it and a new one is made)", path)
	}
	return LocalAuth{User: LocalUser, Password: pw}, nil
}

// WithLocalAuth makes the embedded server accept only clients that present a's user and password.
func WithLocalAuth(a LocalAuth) embedded.Option { return embedded.WithUser(a.User, a.Password) }

// LocalAuth fills in the local credential at path when s has no authentication of its own, the
// file exists, and every server in urls is on this machine's loopback (a remote server never
// sees it). Otherwise s comes back unchanged; a credential file that exists but cannot be trusted
// is an error.
func (s Security) LocalAuth(urls, path string) (Security, error) {
	if s.Kind() != "none" || path == "" || !loopbackURLs(urls) {
		return s, nil
	}
	a, err := ReadLocalAuth(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	s.User, s.Password = a.User, a.Password
	return s, nil
}

// LoopbackURLs reports whether urls (a comma-separated server list) name only loopback hosts and
// carry no credentials of their own: the servers LocalAuth may be presented to.
func LoopbackURLs(urls string) bool { return loopbackURLs(urls) }

// URLs is URL for each server of a comma-separated list.
func (a LocalAuth) URLs(urls string) string {
	list := strings.Split(urls, ",")
	for i, u := range list {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		list[i] = a.URL(u)
	}
	return strings.Join(list, ",")
}

// loopbackURLs reports whether urls (a comma-separated server list) name only loopback hosts and
// carry no credentials of their own.
func loopbackURLs(urls string) bool {
	for _, raw := range strings.Split(urls, ",") {
		raw = strings.TrimSpace(raw)
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil || u.User != nil {
			return false
		}
		host := u.Hostname()
		if host == "localhost" {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}
