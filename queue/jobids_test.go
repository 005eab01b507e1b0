package queue

import (
	"testing"

	"github.com/codexpool/codexpool/schemas"
)

// TestJobIDsOf: a pool-made id is a valid job id, the same for the same message, and different
// when the sequence, the stream's creation or the key differ.
func TestJobIDsOf(t *testing.T) {
	base := jobIDs{key: []byte("0123456789abcdef0123456789abcdef"), stream: "CODEXPOOL_JOBS", created: 1}
	otherKey := base
	otherKey.key = []byte("fedcba9876543210fedcba9876543210")
	recreated := base
	recreated.created = 2
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"one message, two deliveries", base.of(7), base.of(7), true},
		{"another sequence", base.of(7), base.of(8), false},
		{"a recreated stream", base.of(7), recreated.of(7), false},
		{"another pool key", base.of(7), otherKey.of(7), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, id := range []string{tt.a, tt.b} {
				if !schemas.ValidJobID(id) || len(id) != 22 {
					t.Errorf("id %q: want a valid job id of 22 characters", id)
				}
			}
			if got := tt.a == tt.b; got != tt.same {
				t.Errorf("%q vs %q: same = %v, want %v", tt.a, tt.b, got, tt.same)
			}
		})
	}
}

// TestJobIDKeySharedByWorkers: two workers opening the jobs of one server agree on the key,
// and so on every id.
func TestJobIDKeySharedByWorkers(t *testing.T) {
	ns := startJetStream(t)
	a, b := openJobs(t, ns, fastJobs()), openJobs(t, ns, fastJobs())
	if got, want := b.ids.of(1), a.ids.of(1); got != want {
		t.Errorf("second worker's id of sequence 1 = %q, first's %q: want the same", got, want)
	}
}
