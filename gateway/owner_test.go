package gateway

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestOwnerTag(t *testing.T) {
	alice, bob := owner(sha256.Sum256([]byte("sk-alice"))), owner(sha256.Sum256([]byte("sk-bob")))
	id := newRequestID(alice)
	rest, _ := strings.CutPrefix(id, "gw-")
	if uuid.Validate(rest) != nil {
		t.Fatalf("id %q is not gw- and a UUID", id)
	}
	flipped := []byte(id)
	flipped[len(flipped)-1] ^= 1 // a hex digit to another hex digit or a letter: still not the tag
	cases := []struct {
		name string
		o    owner
		id   string
		want bool
	}{
		{"own id", alice, id, true},
		{"another key", bob, id, false},
		{"no keys", owner{}, id, false},
		{"keyless id, keyless gateway", owner{}, newRequestID(owner{}), true},
		{"tag changed", alice, string(flipped), false},
		{"upper case", alice, "gw-" + strings.ToUpper(rest), false},
		{"version 4 UUID", alice, "gw-" + uuid.NewString(), false},
		{"no prefix", alice, rest, false},
		{"not a UUID", alice, "gw-job-1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.owns(tc.id); got != tc.want {
				t.Errorf("owns(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}
