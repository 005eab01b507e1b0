package login

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// sealedSample is a sealed entry under key k1 at login_a, and the tokens it holds.
func sealedSample() (*sealer, []byte, tokens) {
	tk := tokens{AccessToken: "at-secret-1234567890", RefreshToken: "rt-secret-1234567890"}
	s := newSealer([]byte("k1"))
	return s, s.seal("login_a", sharedLogin{V: shareVersion, Tokens: &tk, Seq: 7}), tk
}

func TestSealerOpensOnlyItsOwnEntries(t *testing.T) {
	s, b, tk := sealedSample()
	if bytes.Contains(b, []byte("secret")) {
		t.Fatal("the sealed value shows the token")
	}
	if got, err := s.open("login_a", b); err != nil || got.Tokens.RefreshToken != tk.RefreshToken || got.Seq != 7 {
		t.Fatalf("open: %+v, %v", got, err)
	}
	plain := []byte(`{"v":2,"seq":9,"tokens":{"access_token":"x","refresh_token":"y"}}`)
	flipped := bytes.Clone(b)
	flipped[len(flipped)-3] ^= 1
	for _, tc := range []struct {
		name string
		s    *sealer
		key  string
		data []byte
		want error
	}{
		{name: "another pool key", s: newSealer([]byte("k2")), key: "login_a", data: b, want: errBadSeal},
		{name: "moved to another login's key", s: s, key: "login_b", data: b, want: errBadSeal},
		{name: "plaintext", s: s, key: "login_a", data: plain, want: errUnsealed},
		{name: "sealed by an older version", s: s, key: "login_a", data: []byte(sealPrefixV1 + "AAAA"), want: errBadSeal},
		{name: "a flipped bit", s: s, key: "login_a", data: flipped, want: errBadSeal},
		{name: "cut short", s: s, key: "login_a", data: b[:len(b)-20], want: errBadSeal},
		{name: "prefix only", s: s, key: "login_a", data: []byte(sealPrefix), want: errBadSeal},
		{name: "not base64", s: s, key: "login_a", data: []byte(sealPrefix + "!!!!"), want: errBadSeal},
		{name: "sealed but no tokens", s: s, key: "login_a", data: s.seal("login_a", sharedLogin{V: shareVersion}), want: errBadEntry},
		{name: "sealed, another version", s: s, key: "login_a", data: s.seal("login_a", sharedLogin{V: 1, Tokens: &tk}), want: errBadEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.s.open(tc.key, tc.data); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestSealerKeyIsDerived: the pool key is not the cipher key (HKDF), so two pool keys that
// differ anywhere give ciphers that do not open each other's entries.
func TestSealerKeyIsDerived(t *testing.T) {
	_, b, _ := sealedSample()
	for _, k := range []string{"k1 ", "K1", "k"} {
		if _, err := newSealer([]byte(k)).open("login_a", b); !errors.Is(err, errBadSeal) {
			t.Errorf("pool key %q: got %v, want %v", k, err, errBadSeal)
		}
	}
	if newSealer(nil) != nil || newSealer([]byte{}) != nil {
		t.Error("an empty pool key gave a sealer")
	}
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "credentials.key")
	var wg sync.WaitGroup
	keys := make([][]byte, 4)
	errs := make([]error, 4)
	for i := range keys { // processes starting at once agree on one key
		wg.Go(func() { keys[i], errs[i] = LoadOrCreateKeyFile(path) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("LoadOrCreateKeyFile: %v", errs[i])
		}
		if len(keys[i]) != minKeyFile || !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("key %d: %d bytes, equal to the first: %v; want %d bytes, all equal", i, len(keys[i]), bytes.Equal(keys[i], keys[0]), minKeyFile)
		}
	}
	if m := fileMode(t, path); m != 0o600 {
		t.Errorf("key file mode %v, want 0600", m)
	}
	again, err := LoadKeyFile(path)
	if err != nil || !bytes.Equal(again, keys[0]) {
		t.Errorf("LoadKeyFile: %v, same key %v", err, bytes.Equal(again, keys[0]))
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("tiny-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(short); err == nil || bytes.Contains([]byte(err.Error()), []byte("tiny")) {
		t.Errorf("a short key file: got %v, want an error that does not quote it", err)
	}
	if _, err := LoadKeyFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing key file: got %v, want ErrNotExist", err)
	}
}

// FuzzOpenEntry: whatever the store holds, open never panics, returns one of its errors or an
// entry with tokens, and only what was sealed under the key, for its login key, opens: a
// mutated or random value never does.
func FuzzOpenEntry(f *testing.F) {
	s, b, tk := sealedSample() // each fuzzing process seals its own sample (its own nonce)
	f.Add("login_a", b)
	f.Add("login_b", b)
	f.Add("login_a", []byte(`{"v":2,"seq":1,"tokens":{"access_token":"x"}}`))
	f.Add("login_a", []byte(sealPrefix))
	f.Add("login_a", []byte(sealPrefix+base64.RawStdEncoding.EncodeToString(make([]byte, 40))))
	f.Add("login_a", append([]byte(sealPrefix), bytes.Repeat([]byte("A"), 200)...))
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		v, err := s.open(key, data)
		switch {
		case err == nil:
			if v.Tokens == nil || v.V != shareVersion {
				t.Fatalf("opened an entry without tokens or of version %d", v.V)
			}
			if key != "login_a" || v.Tokens.RefreshToken != tk.RefreshToken || v.Seq != 7 {
				t.Fatalf("a value that was never sealed under the key opened (key %q)", key)
			}
		case errors.Is(err, errUnsealed), errors.Is(err, errBadSeal), errors.Is(err, errBadEntry):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}
