package gate

import "time"

// peerTable is what a gate knows of the gates it heard from: at most maxPeers entries, each with
// the last signal applied and its trust, and an admission filter, so that a flood of random ids
// neither takes the table nor evicts a live peer. It is pure bookkeeping: it applies no signal to
// the gate (adaptive.apply does) and takes the time as a parameter. adaptive.mu guards it.
type peerTable struct {
	peers  [maxPeers]peer
	used   int                         // entries taken: peers[:used] (an entry is never given back, only to another id)
	sorted [maxPeers + 1]time.Duration // median's scratch
	key    uint64                      // keys the admission filter's hash, so ids cannot be crafted to collide
	filter [2][filterBits / 64]uint64  // ids heard in the current and the previous generation
	genAt  time.Time                   // start of the current generation (2 report intervals)
}

// peer is one entry of the table.
type peer struct {
	id      uint64
	seq     uint64
	first   time.Time // the first signal of the current run of consistent ones
	heard   time.Time // the last one applied (received: this gate's clock)
	run     int
	trusted bool
	// trustedAt is when it became trusted; doubted when it was found out (see doubt.go), and
	// holdBanned until when its Retry-After may not hold this gate.
	trustedAt, doubted, holdBanned time.Time
	credit                         credit
	quota                          int // signals applied in the interval that began at quotaAt
	quotaAt                        time.Time
	sig                            Signal    // the last one applied
	started                        time.Time // the last signal that announced a start
	// reactedAt and heldAt are when this peer last caused a reaction and a Retry-After hold
	// here: each at most once per peerReactEvery intervals (see mayDisrupt).
	reactedAt, heldAt time.Time
}

// mayDisrupt reports whether the peer may cause one more slowing event of the kind whose last
// time is *last (a reaction, a hold) at now, at most one per every; if so it records it.
func (p *peer) mayDisrupt(last *time.Time, now time.Time, every time.Duration) bool {
	if !last.IsZero() && now.Sub(*last) < every {
		return false
	}
	*last = now
	return true
}

// verdict is what admit made of a signal: applied, or why it was dropped.
type verdict int

const (
	verdictApplied verdict = iota
	verdictInvalid         // inconsistent: a total went back
	verdictStale           // not newer than one already applied
	verdictFlooded         // beyond the peer's rate, or the table is full
	verdictUnknown         // from an id not (yet) counted as a peer
	verdictDoubted         // from a peer found out (see doubt.go)
)

// admit records signal s (valid, and not this gate's own) received at now, with peers signalling
// every interval, and returns its peer's entry, the signal applied from it before, and whether
// the gate should apply it. A new id takes an entry only once the filter heard it before (within
// two generations); a peer counts only after peerTrust increasing seqs over at least
// interval/peerTrustSpan; a peer's signals beyond peerBurst per interval, stale ones and those
// whose totals go back are dropped.
func (t *peerTable) admit(s Signal, now time.Time, interval time.Duration) (*peer, Signal, verdict) {
	silent := peerLive * interval
	p, known := t.find(s.Gate)
	if !known {
		// Of a flood of random ids, each heard once, few get an entry, and those only as
		// newcomers that never count and that a live peer's entry is never given to.
		if !t.seen(s.Gate, now, 2*interval) {
			return nil, Signal{}, verdictUnknown
		}
		if p, known = t.lookup(s.Gate, now, silent); p == nil {
			return nil, Signal{}, verdictFlooded
		}
	}
	if known && s.Seq <= p.seq {
		return nil, Signal{}, verdictStale
	}
	if !p.doubted.IsZero() {
		if now.Sub(p.doubted) < peerDoubtFor {
			p.seq, p.heard = s.Seq, now // it keeps its entry (and no other id gets it)
			return nil, Signal{}, verdictDoubted
		}
		*p = peer{id: p.id} // forgiven: it earns trust again
	}
	if now.Sub(p.quotaAt) >= interval {
		p.quota, p.quotaAt = 0, now
	}
	if p.quota >= peerBurst {
		return nil, Signal{}, verdictFlooded
	}
	p.quota++
	prev, had := p.sig, p.seq != 0
	if had && (s.Accepted < prev.Accepted || s.Rejected < prev.Rejected) {
		return nil, Signal{}, verdictInvalid // totals never go back
	}
	if !p.trusted {
		if !had || now.Sub(p.heard) >= silent {
			p.run, p.first = 0, now
		}
		p.run++
		p.trusted = p.run >= peerTrust && now.Sub(p.first) >= interval/peerTrustSpan
		if p.trusted {
			p.trustedAt = now
		}
	}
	p.seq, p.heard, p.sig = s.Seq, now, s
	if !p.trusted || !had {
		return nil, Signal{}, verdictUnknown
	}
	return p, prev, verdictApplied
}

// find returns id's entry, if it has one.
func (t *peerTable) find(id uint64) (*peer, bool) {
	for i := range t.used {
		if t.peers[i].id == id {
			return &t.peers[i], true
		}
	}
	return nil, false
}

// live reports whether p counts at now: trusted and heard within silent.
func (p *peer) live(now time.Time, silent time.Duration) bool {
	return p.id != 0 && p.trusted && now.Sub(p.heard) < silent
}

// picture is the fleet's picture from the live peers: recomputed whenever a signal is applied or
// a live peer falls silent.
type picture struct {
	live        int       // trusted peers heard within peerLive intervals
	peerDemand  int       // their demand, summed
	peerDemand1 int       // their demand, each counted as at least 1, summed
	peerRecent  int       // their upgrades accepted in the last RateWindow, summed
	expiresAt   time.Time // the first time a live peer falls silent
}

// picture sums up the peers live at now (heard within silent). A peer on probation (trusted at or
// after since, an episode of doubt's start, and for less than doubtProbation; see
// fleet.credible) counts with a demand of at most one caller: a liar's new id, claiming the most
// demand a signal carries, would otherwise take all but half an equal share of the fleet's pace
// from every honest gate until it is found out (with 8 honest gates and a liar that stalls from a
// new id every 4 s, they got 5.5 of the origin's 10 upgrades/s in virtual time). Zero since: no
// episode.
func (t *peerTable) picture(now time.Time, silent time.Duration, since time.Time) picture {
	var pic picture
	for i := range t.used {
		p := &t.peers[i]
		if !p.live(now, silent) {
			continue
		}
		demand := p.sig.Demand
		if !since.IsZero() && !p.trustedAt.Before(since) && now.Sub(p.trustedAt) < doubtProbation {
			demand = min(demand, 1)
			if e := p.trustedAt.Add(doubtProbation); pic.expiresAt.IsZero() || e.Before(pic.expiresAt) {
				pic.expiresAt = e // its probation ends: the picture changes
			}
		}
		pic.live++
		pic.peerDemand += demand
		pic.peerDemand1 += max(demand, 1)
		pic.peerRecent += p.recent()
		if e := p.heard.Add(silent); pic.expiresAt.IsZero() || e.Before(pic.expiresAt) {
			pic.expiresAt = e
		}
	}
	return pic
}

// bestWait is the shortest wait a peer live at now reported, less the time since it did; a
// closed peer is no better than here. It is -1 without live peers.
func (t *peerTable) bestWait(now time.Time, silent, here time.Duration) time.Duration {
	best := time.Duration(-1)
	for i := range t.used {
		p := &t.peers[i]
		if !p.live(now, silent) {
			continue
		}
		w := max(p.sig.Wait-max(now.Sub(p.heard), 0), 0)
		if p.sig.Closed {
			w = max(w, here)
		}
		if best < 0 || w < best {
			best = w
		}
	}
	return best
}

// newcomer reports whether an id heard within silent is on its way to trust: a run of
// consistent signals (2: a flood of random ids never has one), not trusted yet.
func (t *peerTable) newcomer(now time.Time, silent time.Duration) bool {
	for i := range t.used {
		if p := &t.peers[i]; p.id != 0 && !p.trusted && p.doubted.IsZero() && p.run >= 2 && now.Sub(p.heard) < silent {
			return true
		}
	}
	return false
}

// median returns the median of own and the spacings that the live peers in epoch propose, each
// kept within [lo, hi] (the mean of the middle two of an even number).
func (t *peerTable) median(own time.Duration, epoch uint64, now time.Time, silent, lo, hi time.Duration) time.Duration {
	v := &t.sorted
	v[0] = own
	n := 1
	for i := range t.used {
		p := &t.peers[i]
		if p.id == 0 || !p.trusted || now.Sub(p.heard) >= silent || p.sig.Epoch != epoch {
			continue
		}
		x := max(min(p.sig.Spacing, hi), lo)
		j := n
		for ; j > 0 && v[j-1] > x; j-- {
			v[j] = v[j-1]
		}
		v[j] = x
		n++
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return v[n/2-1] + (v[n/2]-v[n/2-1])/2
}

// highestProposal is the widest spacing that a live, trusted peer proposes at now (heard within
// silent; kept within [lo, hi]), and whether there is one.
func (t *peerTable) highestProposal(now time.Time, silent, lo, hi time.Duration) (time.Duration, bool) {
	var top time.Duration
	ok := false
	for i := range t.used {
		p := &t.peers[i]
		if p.id == 0 || !p.trusted || now.Sub(p.heard) >= silent {
			continue
		}
		top, ok = max(top, min(max(p.sig.Spacing, lo), hi)), true
	}
	return top, ok
}

// busyBetween is how many live peers with demand come after from and before to in id order,
// wrapping (from 0: every id below to, a gate's rank among the busy gates); those not heard from
// since doubt count as having demand.
func (t *peerTable) busyBetween(from, to uint64, now time.Time, interval time.Duration, doubt time.Time) int {
	n := 0
	for i := range t.used {
		p := &t.peers[i]
		if p.trusted && between(from, p.id, to) && (p.sig.Demand > 0 || p.heard.Before(doubt)) && now.Sub(p.heard) < peerLive*interval {
			n++
		}
	}
	return n
}

// between reports whether x comes after from and before to, in ascending order wrapping around.
func between(from, x, to uint64) bool {
	if from < to {
		return from < x && x < to
	}
	return x > from || x < to
}

// seen reports whether id was heard in this or the previous generation of the filter, and
// records it in this one.
func (t *peerTable) seen(id uint64, now time.Time, gen time.Duration) bool {
	if now.Sub(t.genAt) >= gen {
		t.filter[1] = t.filter[0]
		if now.Sub(t.genAt) >= 2*gen {
			t.filter[1] = [filterBits / 64]uint64{}
		}
		t.filter[0] = [filterBits / 64]uint64{}
		t.genAt = now
	}
	h := mix(id ^ t.key)
	was := true
	for i := range filterHashes {
		b := (h >> (16 * i)) & (filterBits - 1)
		w, m := b/64, uint64(1)<<(b%64)
		if (t.filter[0][w]|t.filter[1][w])&m == 0 {
			was = false
		}
		t.filter[0][w] |= m
	}
	return was
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// lookup returns id's entry, admitting it if there is room: an empty slot, then the entry silent
// longest (if silent for peerLive intervals), then the untrusted entry heard longest ago.
func (t *peerTable) lookup(id uint64, now time.Time, silent time.Duration) (*peer, bool) {
	var free, quiet, newcomer *peer
	if t.used < maxPeers {
		free = &t.peers[t.used]
	}
	for i := range t.used {
		p := &t.peers[i]
		switch {
		case p.id == id:
			return p, true
		case now.Sub(p.heard) >= silent:
			if quiet == nil || p.heard.Before(quiet.heard) {
				quiet = p
			}
		case !p.trusted:
			if newcomer == nil || p.heard.Before(newcomer.heard) {
				newcomer = p
			}
		}
	}
	for _, p := range [...]*peer{free, quiet, newcomer} {
		if p != nil {
			if p == free {
				t.used++
			}
			*p = peer{id: id}
			return p, false
		}
	}
	return nil, false
}
