package queue

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Security is how a connection authenticates to NATS and verifies the server. The zero value is a
// plain, unauthenticated connection. At most one of CredsFile, NKeyFile, User and Token may be set;
// TLS settings combine with any of them. Options turns it into nats.Options for Connect.
//
// Secrets (passwords, tokens, seeds) are read only when connecting and never appear in errors or
// logs: String shows which kinds are set, not their values.
type Security struct {
	CredsFile string // user JWT + nkey seed (.creds file, from `nsc` or an operator)
	NKeyFile  string // nkey seed file (a line starting with "SU")
	User      string // user name, with Password
	Password  string
	Token     string // authorization token
	TLSCA     string // PEM file of CAs that sign the server's certificate; setting it turns TLS on
	TLSCert   string // PEM client certificate, with TLSKey, for servers that verify clients
	TLSKey    string
}

// Kind names the authentication Security uses: "creds", "nkey", "user", "token" or "none".
func (s Security) Kind() string {
	switch {
	case s.CredsFile != "":
		return "creds"
	case s.NKeyFile != "":
		return "nkey"
	case s.User != "":
		return "user"
	case s.Token != "":
		return "token"
	}
	return "none"
}

// TLS reports whether Security asks for TLS.
func (s Security) TLS() bool { return s.TLSCA != "" || s.TLSCert != "" }

// String describes the settings without their secrets.
func (s Security) String() string {
	return fmt.Sprintf("auth=%s tls=%t client_cert=%t", s.Kind(), s.TLS(), s.TLSCert != "")
}

// Validate checks that the settings do not contradict each other and that the files exist.
func (s Security) Validate() error {
	n := 0
	for _, set := range []bool{s.CredsFile != "", s.NKeyFile != "", s.User != "" || s.Password != "", s.Token != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return errors.New("queue: NATS auth: set only one of creds file, nkey seed file, user/password and token")
	case s.Password != "" && s.User == "":
		return errors.New("queue: NATS auth: a password needs a user")
	case (s.TLSCert == "") != (s.TLSKey == ""):
		return errors.New("queue: NATS TLS: a client certificate needs its key and a key needs its certificate")
	}
	for what, f := range map[string]string{
		"creds file": s.CredsFile, "nkey seed file": s.NKeyFile,
		"TLS CA file": s.TLSCA, "TLS client certificate": s.TLSCert, "TLS client key": s.TLSKey,
	} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("queue: NATS %s: %w", what, err)
		}
	}
	return nil
}

// Options returns the nats.Options that apply s, after Validate.
func (s Security) Options() ([]nats.Option, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case s.CredsFile != "":
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	case s.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(s.NKeyFile)
		if err != nil {
			// nats.go's message names the file, never the seed.
			return nil, fmt.Errorf("queue: NATS nkey seed file %s: %w", s.NKeyFile, err)
		}
		opts = append(opts, o)
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	}
	if s.TLSCA != "" {
		opts = append(opts, nats.RootCAs(s.TLSCA))
	}
	if s.TLSCert != "" {
		opts = append(opts, nats.ClientCert(s.TLSCert, s.TLSKey))
	}
	if s.TLS() {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}

// tlsHint explains the one TLS failure whose error does not say why: with TLS 1.3 the server
// checks the client certificate after the client's handshake is done, and just closes.
func tlsHint(err error) string {
	if errors.Is(err, nats.ErrTLS) && strings.Contains(err.Error(), "closed by remote") {
		return " (the server probably refused the client certificate, or none was given: check the client certificate and key settings)"
	}
	return ""
}

// permanent reports whether a failed first connection cannot succeed by retrying: the server
// refused the credentials, or TLS failed on a certificate or a missing file.
func permanent(err error) bool {
	var (
		unknownCA   x509.UnknownAuthorityError
		invalid     x509.CertificateInvalidError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
		alert       tls.AlertError
		pathErr     *os.PathError
		recordError tls.RecordHeaderError
		opErr       *net.OpError
	)
	// A TLS alert the server sent (e.g. "certificate required" or "bad certificate" for a client
	// certificate it refused) arrives as a net.OpError with Op "remote error"; with TLS 1.3 it
	// comes on the first read after the handshake, not wrapped in nats.ErrTLS.
	if errors.As(err, &opErr) && opErr.Op == "remote error" {
		return true
	}
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.Is(err, nats.ErrClientCertOrRootCAsRequired) || errors.Is(err, nats.ErrTLS) ||
		errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &pathErr) ||
		errors.As(err, &recordError)
}

// RedactURL returns the NATS server list urls with any user info (user, password, token) replaced,
// for errors and logs.
func RedactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		if err != nil || u.User == nil {
			if strings.Contains(p, "@") {
				p = "<redacted>@" + p[strings.LastIndex(p, "@")+1:]
			}
			parts[i] = p
			continue
		}
		u.User = url.User("redacted")
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
