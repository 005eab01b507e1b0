package login

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// How a shared login is sealed. Every value an Auth writes to a Coordinator is
//
//	"cxp2." base64(nonce || AES-256-GCM(json(sharedLogin)))
//
// under a key derived from the pool key with HKDF-SHA-256 (salt sealSalt, info sealInfo), with
// sealAAD and the Coordinator key of the login as associated data: a value opens only under the
// pool key and only at the key it was written for, so it can be neither read, planted, nor moved
// to another login's key by whoever can write the store without the pool key. There is no
// plaintext form: an Auth without a pool key does not share at all.
const (
	sealPrefix = "cxp2."
	// sealPrefixV1 marks values of the versions that sealed only with a key set (SHA-256 key).
	sealPrefixV1 = "cxp1."
	sealSalt     = "codexpool credentials"
	sealInfo     = "codexpool credentials v2 AES-256-GCM"
	sealAAD      = "codexpool login v2\x00"
	// maxSealed bounds a value worth opening; a login is a few KiB.
	maxSealed = 1 << 20
)

// Why a shared value was ignored. None of them carries any part of the value.
var (
	errUnsealed = errors.New("codex: the shared login is not sealed: ignored, as anyone able to write the store could have planted it")
	errBadSeal  = errors.New("codex: the shared login does not open under this pool key (another credentials key, garbled, or moved from another login's key)")
	errBadEntry = errors.New("codex: the shared login opened but is not a login entry of this version")
)

// sealer seals and opens shared values. Make it with newSealer; a nil *sealer shares nothing.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the AES-256-GCM key from the pool key; an empty pool key gives nil.
func newSealer(poolKey []byte) *sealer {
	if len(poolKey) == 0 {
		return nil
	}
	k, err := hkdf.Key(sha256.New, poolKey, []byte(sealSalt), sealInfo, 32)
	if err != nil {
		panic("codex: hkdf: " + err.Error()) // only for a key length SHA-256 cannot give
	}
	block, _ := aes.NewCipher(k) // a 32-byte key never fails
	aead, _ := cipher.NewGCM(block)
	return &sealer{aead: aead}
}

func aad(key string) []byte { return []byte(sealAAD + key) }

// seal encodes v for the Coordinator key key.
func (s *sealer) seal(key string, v sharedLogin) []byte {
	plain, _ := json.Marshal(v)
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	ct := s.aead.Seal(nonce, nonce, plain, aad(key))
	return append([]byte(sealPrefix), base64.RawStdEncoding.EncodeToString(ct)...)
}

// open decodes a value sealed for key. Its errors are errUnsealed, errBadSeal or errBadEntry.
func (s *sealer) open(key string, data []byte) (sharedLogin, error) {
	rest, ok := bytes.CutPrefix(data, []byte(sealPrefix))
	switch {
	case !ok && bytes.HasPrefix(data, []byte(sealPrefixV1)):
		return sharedLogin{}, errBadSeal // sealed by an older version: replaced by the next write
	case !ok:
		return sharedLogin{}, errUnsealed
	}
	if len(rest) > maxSealed {
		return sharedLogin{}, errBadSeal
	}
	ct := make([]byte, base64.RawStdEncoding.DecodedLen(len(rest)))
	n, err := base64.RawStdEncoding.Decode(ct, rest)
	ns := s.aead.NonceSize()
	if err != nil || n < ns+s.aead.Overhead() {
		return sharedLogin{}, errBadSeal
	}
	plain, err := s.aead.Open(nil, ct[:ns], ct[ns:n], aad(key))
	if err != nil {
		return sharedLogin{}, errBadSeal
	}
	var v sharedLogin
	if json.Unmarshal(plain, &v) != nil || v.V != shareVersion || v.Tokens == nil {
		return sharedLogin{}, errBadEntry
	}
	return v, nil
}

// minKeyFile is the least a key file must hold: 32 bytes, as LoadOrCreateKeyFile writes.
const minKeyFile = 32

// LoadKeyFile returns the pool key held in the file at path ("~" is expanded): its whole
// content, as it is (32 random bytes as LoadOrCreateKeyFile writes, or any secret of at least
// 32 bytes; copy the same file to every worker of the pool). Errors never quote the file.
func LoadKeyFile(path string) ([]byte, error) {
	path, err := expandHome(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codex: credentials key file: %w", err)
	}
	if len(b) < minKeyFile {
		return nil, fmt.Errorf("codex: credentials key file %s holds %d bytes, want at least %d", path, len(b), minKeyFile)
	}
	return b, nil
}

// LoadOrCreateKeyFile returns the pool key in the file at path, first creating the file (and
// its directory, mode 0700) with 32 random bytes, mode 0600, when it does not exist. Two
// processes creating it at once end up with the same key: the file is created exclusively and
// the loser reads the winner's.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	path, err := expandHome(path)
	if err != nil {
		return nil, err
	}
	if b, err := LoadKeyFile(path); !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("codex: credentials key file: %w", err)
	}
	key := make([]byte, minKeyFile)
	_, _ = rand.Read(key)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("codex: credentials key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600) // CreateTemp makes 0600 already; say it anyway
	}
	if err == nil {
		// A hard link is an exclusive create of the complete file: nobody reads half a key.
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("codex: credentials key file: %w", err)
	}
	return LoadKeyFile(path)
}
