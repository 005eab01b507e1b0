package client

import (
	"testing"

	"github.com/codexpool/codexpool/schemas"
)

// TestNewJobID: the ids Submit makes for jobs without one are valid job ids, 128 bits long, and
// never the same twice (a sequence number or a clock would repeat or be guessable).
func TestNewJobID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newJobID()
		if !schemas.ValidJobID(id) {
			t.Fatalf("newJobID() = %q, not a valid job id", id)
		}
		if len(id) != 22 {
			t.Fatalf("newJobID() = %q: %d characters, want 22 (128 bits in base64url)", id, len(id))
		}
		if seen[id] {
			t.Fatalf("newJobID() repeated %q", id)
		}
		seen[id] = true
	}
}
