package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// KeyEntry is the value of one entry of the keys bucket (CODEXPOOL_KEYS), whose key is Name:
// every field of the keys file, the secret only ever as its SHA-256 digest. JSON, with the keys
// file's field names.
type KeyEntry struct {
	Name              string   `json:"name"`
	SecretSHA256      string   `json:"secret_sha256"` // 64 hex digits
	RequestsPerMinute int      `json:"requests_per_minute,omitempty"`
	TokensPer5h       int64    `json:"tokens_per_5h,omitempty"`
	TokensPerDay      int64    `json:"tokens_per_day,omitempty"`
	TokensPerWeek     int64    `json:"tokens_per_week,omitempty"`
	MaxConcurrent     int      `json:"max_concurrent,omitempty"`
	Models            []string `json:"models,omitempty"`
	Admin             bool     `json:"admin,omitempty"`
	// Created and Updated are when the entry was added and last changed, By who changed it last.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	By      string    `json:"by,omitempty"`
}

// EntryOf returns k as a bucket entry (its times and author unset).
func EntryOf(k Key) KeyEntry {
	return KeyEntry{
		Name: k.Name, SecretSHA256: hex.EncodeToString(k.SHA256[:]),
		RequestsPerMinute: k.Limits.RequestsPerMinute, TokensPer5h: k.Limits.TokensPer5h,
		TokensPerDay: k.Limits.TokensPerDay, TokensPerWeek: k.Limits.TokensPerWeek,
		MaxConcurrent: k.Limits.MaxConcurrent, Models: k.Models, Admin: k.Admin,
	}
}

// Key returns the Key the entry describes; an error names the field at fault.
func (e KeyEntry) Key() (Key, error) {
	k := Key{Name: e.Name, Models: e.Models, Admin: e.Admin, Limits: Limits{
		RequestsPerMinute: e.RequestsPerMinute, TokensPer5h: e.TokensPer5h, TokensPerDay: e.TokensPerDay,
		TokensPerWeek: e.TokensPerWeek, MaxConcurrent: e.MaxConcurrent,
	}}
	if err := CheckKeyName(e.Name); err != nil {
		return k, err
	}
	b, err := hex.DecodeString(e.SecretSHA256)
	if err != nil || len(b) != sha256.Size {
		return k, fmt.Errorf("gateway: key %q: secret_sha256: want 64 hex digits", e.Name)
	}
	copy(k.SHA256[:], b)
	for field, v := range map[string]int64{
		"requests_per_minute": int64(e.RequestsPerMinute), "tokens_per_5h": e.TokensPer5h,
		"tokens_per_day": e.TokensPerDay, "tokens_per_week": e.TokensPerWeek, "max_concurrent": int64(e.MaxConcurrent),
	} {
		if v < 0 {
			return k, fmt.Errorf("gateway: key %q: %s: want a whole number above 0, got %d", e.Name, field, v)
		}
	}
	return k, nil
}

func decodeEntry(b []byte) (Key, error) {
	var e KeyEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return Key{}, fmt.Errorf("gateway: key entry: %w", err)
	}
	return e.Key()
}

// maxKeyName bounds a key's name: it is a NATS subject token of the bucket, and shown everywhere.
const maxKeyName = 64

// CheckKeyName reports whether name can name a key in the bucket: 1 to 64 letters, digits, '-'
// and '_', in words joined by single dots (it is the entry's key, a NATS subject).
func CheckKeyName(name string) error {
	bad := func(why string) error { return fmt.Errorf("gateway: key name %q: %s", name, why) }
	switch {
	case name == "":
		return bad("must not be empty")
	case len(name) > maxKeyName:
		return bad(fmt.Sprintf("longer than %d characters", maxKeyName))
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return bad("dots only between words")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return bad("use letters, digits, '-', '_' and '.' only")
		}
	}
	return nil
}
