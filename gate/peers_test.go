package gate

import (
	"testing"
	"time"
)

// TestPeerTableAdmitSteps feeds one peer table signals at explicit times (report interval
// 100ms) and checks each verdict: a new id enters once the filter heard it before, counts after
// 3 increasing seqs over a quarter interval, and stale, flooding and inconsistent signals are
// dropped.
func TestPeerTableAdmitSteps(t *testing.T) {
	const iv = 100 * time.Millisecond
	ms := time.Millisecond
	type step struct {
		at   time.Duration // since t0
		gate uint64
		seq  uint64
		acc  uint64 // Accepted
		want verdict
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"trusted after the filter and 3 seqs over a quarter interval", []step{
			{0, 7, 1, 0, verdictUnknown},       // the filter hears it
			{1 * ms, 7, 2, 0, verdictUnknown},  // an entry, run 1
			{2 * ms, 7, 3, 0, verdictUnknown},  // run 2
			{25 * ms, 7, 4, 0, verdictUnknown}, // run 3, but only 24ms since it began
			{26 * ms, 7, 5, 0, verdictApplied}, // run 4, a quarter interval: trusted and applied
		}},
		{"silence restarts the run", []step{
			{0, 7, 1, 0, verdictUnknown}, {1 * ms, 7, 2, 0, verdictUnknown}, {2 * ms, 7, 3, 0, verdictUnknown},
			{302 * ms, 7, 4, 0, verdictUnknown}, {303 * ms, 7, 5, 0, verdictUnknown}, {327 * ms, 7, 6, 0, verdictApplied},
		}},
		{"stale", []step{
			{0, 7, 1, 0, verdictUnknown}, {1 * ms, 7, 5, 0, verdictUnknown}, {2 * ms, 7, 5, 0, verdictStale}, {3 * ms, 7, 4, 0, verdictStale},
		}},
		{"totals never go back", []step{
			{0, 7, 1, 0, verdictUnknown}, {1 * ms, 7, 2, 5, verdictUnknown}, {2 * ms, 7, 3, 4, verdictInvalid},
		}},
		{"two new ids each enter once heard before", []step{
			{0, 8, 1, 0, verdictUnknown}, {0, 9, 1, 0, verdictUnknown}, {1 * ms, 8, 2, 0, verdictUnknown}, {1 * ms, 9, 2, 0, verdictUnknown},
		}},
		{"the filter forgets after two generations", []step{
			{0, 7, 1, 0, verdictUnknown}, {4 * iv, 7, 2, 0, verdictUnknown}, {4*iv + ms, 7, 3, 0, verdictUnknown},
		}},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pt peerTable
			for i, s := range tt.steps {
				_, _, got := pt.admit(Signal{Gate: s.gate, Seq: s.seq, Accepted: s.acc}, t0.Add(s.at), iv)
				if got != s.want {
					t.Errorf("step %d (gate %d seq %d at %v): verdict %d, want %d", i, s.gate, s.seq, s.at, got, s.want)
				}
			}
		})
	}
}

// TestPeerTableFlood checks that a peer's signals beyond peerBurst per interval are dropped, and
// that a full table of live peers admits no newcomer.
func TestPeerTableFlood(t *testing.T) {
	const iv = 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var pt peerTable
	pt.admit(Signal{Gate: 7, Seq: 1}, t0, iv) // the filter
	n := 0
	for seq := uint64(2); seq < 2+2*peerBurst; seq++ {
		if _, _, v := pt.admit(Signal{Gate: 7, Seq: seq}, t0, iv); v == verdictFlooded {
			n++
		}
	}
	if n != peerBurst {
		t.Errorf("%d of %d signals in one interval flooded, want %d", n, 2*peerBurst, peerBurst)
	}
	if _, _, v := pt.admit(Signal{Gate: 7, Seq: 1000}, t0.Add(iv), iv); v == verdictFlooded {
		t.Errorf("a signal in the next interval flooded, want its quota renewed")
	}

	var full peerTable
	for i := range full.peers {
		full.peers[i] = peer{id: uint64(100 + i), trusted: true, heard: t0, seq: 1}
	}
	full.used = maxPeers
	full.admit(Signal{Gate: 7, Seq: 1}, t0, iv)
	if _, _, v := full.admit(Signal{Gate: 7, Seq: 2}, t0, iv); v != verdictFlooded {
		t.Errorf("a newcomer to a table of live peers: verdict %d, want flooded", v)
	}
	if _, _, v := full.admit(Signal{Gate: 7, Seq: 3}, t0.Add(peerLive*iv), iv); v != verdictUnknown {
		t.Errorf("a newcomer once the peers fell silent: verdict %d, want unknown (admitted, not trusted)", v)
	}
}

// TestPeerTablePicture checks the fleet's picture and the other questions asked of live peers:
// untrusted and silent entries do not count.
func TestPeerTablePicture(t *testing.T) {
	const silent = 300 * time.Millisecond
	t0 := time.Unix(1000, 0)
	var pt peerTable
	pt.peers[0] = peer{id: 1, trusted: true, heard: t0, sig: Signal{Demand: 3, Recent: 2, Accepted: 2, Wait: 2 * time.Second, Spacing: 400 * time.Millisecond}}
	pt.peers[1] = peer{id: 2, trusted: true, heard: t0.Add(-100 * time.Millisecond), sig: Signal{Demand: 0, Recent: 4, Accepted: 5, Wait: time.Second, Closed: true, Spacing: 200 * time.Millisecond}}
	pt.peers[2] = peer{id: 3, trusted: false, run: 2, heard: t0, sig: Signal{Demand: 9, Recent: 9}}
	pt.peers[1].credit.baseAcc = 4 // its Recent of 4 counts as the 1 its Accepted total grew by
	pt.peers[3] = peer{id: 4, trusted: true, heard: t0.Add(-silent), sig: Signal{Demand: 9, Recent: 9}}
	pt.used = 4
	now := t0.Add(50 * time.Millisecond)

	want := picture{live: 2, peerDemand: 3, peerDemand1: 4, peerRecent: 3, expiresAt: t0.Add(200 * time.Millisecond)}
	if got := pt.picture(now, silent, time.Time{}); got != want {
		t.Errorf("picture %+v, want %+v", got, want)
	}
	tests := []struct {
		name     string
		here     time.Duration
		wantBest time.Duration
	}{
		{"the shortest wait, less the time since it was reported", 500 * time.Millisecond, 850 * time.Millisecond},
		{"a closed peer is no better than here", 3 * time.Second, 1950 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pt.bestWait(now, silent, tt.here); got != tt.wantBest {
				t.Errorf("best wait %v, want %v", got, tt.wantBest)
			}
		})
	}
	if !pt.newcomer(now, silent) {
		t.Errorf("no newcomer seen, want the untrusted id with a run of 2")
	}
	if got := pt.median(300*time.Millisecond, 0, now, silent, 0, 8*time.Second); got != 300*time.Millisecond {
		t.Errorf("median %v, want 300ms (of 200ms, 300ms, 400ms)", got)
	}
	if got := pt.busyBetween(0, 3, now, silent/peerLive, time.Time{}); got != 1 {
		t.Errorf("busy peers below id 3: %d, want 1 (id 2 has no demand)", got)
	}
}
