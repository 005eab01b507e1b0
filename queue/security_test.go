package queue

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/codexpool/codexpool/internal/testutil"
)

// startSecureServer starts a nats-server with tweak applied to its options on a free port.
func startSecureServer(t *testing.T, tweak func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true}
	tweak(opts)
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(waitTimeout) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// connectWith connects through Connect with sec; a wrong setting must fail fast, not retry.
func connectWith(t *testing.T, url string, sec Security) (*nats.Conn, string, error) {
	t.Helper()
	opts, err := sec.Options()
	if err != nil {
		return nil, "", err
	}
	var logs testutil.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	nc, err := Connect(ctx, url, "security-test", slog.New(slog.NewTextHandler(&logs, nil)), opts...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect retried until the deadline instead of failing fast: %v", err)
	}
	if nc != nil {
		t.Cleanup(nc.Close)
	}
	return nc, logs.String(), err
}

// roundTrip checks that an authenticated connection can subscribe and publish.
func roundTrip(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.SubscribeSync("codex.generate")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Publish("codex.generate", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(waitTimeout); err != nil {
		t.Fatalf("no message through the authenticated connection: %v", err)
	}
}

func TestSecurityAuthKinds(t *testing.T) {
	userKP, _ := nkeys.CreateUser()
	userPub, _ := userKP.PublicKey()
	userSeed, _ := userKP.Seed()
	otherKP, _ := nkeys.CreateUser()
	otherSeed, _ := otherKP.Seed()

	credsOK, credsWrong, trustJWT := makeJWTAuth(t)

	tests := []struct {
		name      string
		server    func(*server.Options)
		good, bad Security
		secret    string // must not appear in errors or logs
	}{
		{
			name:   "user/password",
			server: func(o *server.Options) { o.Username, o.Password = "worker", "s3cret-pass" },
			good:   Security{User: "worker", Password: "s3cret-pass"},
			bad:    Security{User: "worker", Password: "wrong-pass"},
			secret: "s3cret-pass",
		},
		{
			name:   "token",
			server: func(o *server.Options) { o.Authorization = "tok-abc-123" },
			good:   Security{Token: "tok-abc-123"},
			bad:    Security{Token: "tok-wrong"},
			secret: "tok-abc-123",
		},
		{
			name:   "nkey",
			server: func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: userPub}} },
			good:   Security{NKeyFile: writeFile(t, "user.nk", userSeed)},
			bad:    Security{NKeyFile: writeFile(t, "other.nk", otherSeed)},
			secret: string(userSeed),
		},
		{
			name:   "creds (JWT)",
			server: trustJWT,
			good:   Security{CredsFile: credsOK},
			bad:    Security{CredsFile: credsWrong},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := startSecureServer(t, tc.server)
			nc, logs, err := connectWith(t, ns.ClientURL(), tc.good)
			if err != nil {
				t.Fatalf("right settings: %v", err)
			}
			roundTrip(t, nc)

			_, logs2, err := connectWith(t, ns.ClientURL(), tc.bad)
			if err == nil {
				t.Fatal("wrong settings: connected, want a refusal")
			}
			t.Logf("refused: %v", err)
			if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "queue: connect to NATS") {
				t.Errorf("wrong settings: err = %v, want a queue: error wrapping nats.ErrAuthorization", err)
			}
			_, _, err = connectWith(t, ns.ClientURL(), Security{})
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Errorf("no credentials: err = %v, want nats.ErrAuthorization", err)
			}
			if tc.secret != "" {
				for what, s := range map[string]string{"error": err.Error(), "logs": logs + logs2, "String": tc.good.String()} {
					if strings.Contains(s, tc.secret) {
						t.Errorf("the secret appears in the %s: %s", what, s)
					}
				}
			}
		})
	}
}

// makeJWTAuth builds an operator, an account and two users: one the account signed (creds ok)
// and one signed by a stranger account the server does not know (creds wrong).
func makeJWTAuth(t *testing.T) (credsOK, credsWrong string, trust func(*server.Options)) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	opKP, err := nkeys.CreateOperator()
	must(err)
	opPub, _ := opKP.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "test-operator"
	opJWT, err := oc.Encode(opKP)
	must(err)
	opClaims, err := jwt.DecodeOperatorClaims(opJWT)
	must(err)

	account := func(name string) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		tok, err := ac.Encode(opKP)
		must(err)
		return kp, pub, tok
	}
	accKP, accPub, accJWT := account("codexpool")
	strangerKP, _, _ := account("stranger") // never stored in the resolver

	creds := func(name string, signer nkeys.KeyPair) string {
		ukp, err := nkeys.CreateUser()
		must(err)
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name
		tok, err := uc.Encode(signer)
		must(err)
		seed, _ := ukp.Seed()
		b, err := jwt.FormatUserConfig(tok, seed)
		must(err)
		return writeFile(t, name+".creds", b)
	}
	credsOK = creds("worker", accKP)
	credsWrong = creds("intruder", strangerKP)

	res := &server.MemAccResolver{}
	must(res.Store(accPub, accJWT))
	return credsOK, credsWrong, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = res
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate, as PEM files.
type testPKI struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	pool                                                 *x509.CertPool
}

func newTestPKI(t *testing.T, name string) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) (string, string) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return write(certFile, "CERTIFICATE", der), write(keyFile, "PRIVATE KEY", keyDER(k))
	}
	p := testPKI{caFile: write("ca.pem", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serverCert, p.serverKey = leaf(2, "nats-server", x509.ExtKeyUsageServerAuth, "server.pem", "server-key.pem")
	p.clientCert, p.clientKey = leaf(3, "codexpool-worker", x509.ExtKeyUsageClientAuth, "client.pem", "client-key.pem")
	return p
}

func TestSecurityTLS(t *testing.T) {
	pki := newTestPKI(t, "codexpool test")
	other := newTestPKI(t, "stranger")
	ns := startSecureServer(t, func(o *server.Options) {
		cert, err := tls.LoadX509KeyPair(pki.serverCert, pki.serverKey)
		if err != nil {
			t.Fatal(err)
		}
		o.TLS, o.TLSVerify, o.TLSTimeout = true, true, 5
		o.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{cert}, ClientCAs: pki.pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
		}
		o.Username, o.Password = "worker", "pw"
	})
	url := ns.ClientURL()

	good := Security{User: "worker", Password: "pw", TLSCA: pki.caFile, TLSCert: pki.clientCert, TLSKey: pki.clientKey}
	nc, _, err := connectWith(t, url, good)
	if err != nil {
		t.Fatalf("right CA and client certificate: %v", err)
	}
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Errorf("connection is not TLS: %v", err)
	}
	roundTrip(t, nc)

	tests := []struct {
		name string
		sec  Security
		want string // in the error
	}{
		{"server certificate from an unknown CA", Security{User: "worker", Password: "pw", TLSCA: other.caFile, TLSCert: pki.clientCert, TLSKey: pki.clientKey}, "certificate"},
		{"no client certificate", Security{User: "worker", Password: "pw", TLSCA: pki.caFile}, "certificate"},
		{"client certificate from an unknown CA", Security{User: "worker", Password: "pw", TLSCA: pki.caFile, TLSCert: other.clientCert, TLSKey: other.clientKey}, "certificate"},
		{"no TLS settings at all", Security{User: "worker", Password: "pw"}, "certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := connectWith(t, url, tc.sec)
			if err == nil {
				t.Fatal("connected, want a refusal")
			}
			t.Logf("refused: %v", err)
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "queue: ") {
				t.Errorf("err = %v, want a queue: error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestSecurityValidate(t *testing.T) {
	f := writeFile(t, "x", []byte("x"))
	tests := []struct {
		name string
		sec  Security
		want string
	}{
		{"two auth kinds", Security{Token: "t", User: "u"}, "only one"},
		{"password without user", Security{Password: "p"}, "needs a user"},
		{"cert without key", Security{TLSCert: f}, "needs its key"},
		{"missing creds file", Security{CredsFile: filepath.Join(t.TempDir(), "nope.creds")}, "creds file"},
		{"missing CA", Security{TLSCA: filepath.Join(t.TempDir(), "nope.pem")}, "TLS CA file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.sec.Options()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if s := (Security{User: "u", Password: "hunter2", Token: ""}).String(); strings.Contains(s, "hunter2") {
		t.Errorf("String shows the password: %s", s)
	}
}

func TestRedactURL(t *testing.T) {
	got := RedactURL("nats://user:pw@a:4222, nats://tok@b:4222,nats://c:4222")
	if strings.Contains(got, "pw") || strings.Contains(got, "tok") || !strings.Contains(got, "c:4222") {
		t.Errorf("RedactURL = %q", got)
	}
}
