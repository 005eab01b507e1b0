package gate

import (
	"errors"
	"time"
)

// A closed origin: closedRefusals refusals with nothing accepted, the first and the last at least
// closedSpans RateWindows apart. With nothing accepted the gate spaces its starts at least a
// RateWindow apart (1 s), and a token-bucket origin refills a token in 1/rate, so an origin that
// is only rate-limited (at 1/s or faster) accepts the second or third paced attempt; three paced
// refusals over two seconds mean the origin is refusing everything. A burst refused in the same
// instant is not enough however large: it is one signal, not several.
const (
	closedRefusals = 3
	closedSpans    = 2
)

// ErrClosed is returned by [Gate.Wait] in Adaptive mode while the origin is closed: no upgrade
// was accepted while several were refused (three, spread over at least two RateWindows). A closed
// origin is probed by one caller at a time at the widest spacing (max(Max, Floor)): a caller that
// may probe waits for the next probe slot if its context's deadline allows; every other caller gets
// ErrClosed at once, and so do the callers waiting when the gate closes. The first accepted
// upgrade reopens the gate. [Connect] returns the last 403 instead.
var ErrClosed = errors.New("gate: origin closed: upgrades refused and none accepted")

// closedTracker tells a closed origin from a rate limit: an origin that refuses everything (a
// blocked account, a WAF rule) closes the gate, one caller at a time probes it at the widest
// spacing, and the first acceptance reopens it (see [ErrClosed]). It counts the refusals of this
// gate and of its peers since the last acceptance, but one of them must be this gate's own: peers
// alone cannot close it. Its decisions take the time as a parameter; adaptive.mu guards it.
type closedTracker struct {
	closed       bool      // see ErrClosed
	refused      int       // refusals since the last acceptance, this gate's and its peers'
	ownRefused   bool      // one of them was this gate's own
	firstRefused time.Time // the first of them
	lastRefused  time.Time // this gate's last

	probing    bool      // a prober is waiting or its probe is in flight
	probeID    uint64    // the probe's slot once granted (0: still waiting)
	probeStart time.Time // when it was granted

	peerRefusedAt time.Time // the last refusal a peer reported
	ownAcceptedAt time.Time // this gate's last accepted upgrade
	peerClosedAt  time.Time // the last signal of a peer that sees a closed origin
	confirmedAt   time.Time // the last start that confirmed a peer's closed origin (see confirms)
}

// accepted records an accepted upgrade, here or at a peer: the origin is not closed.
func (c *closedTracker) accepted() {
	c.refused, c.ownRefused = 0, false
	c.closed, c.probing, c.probeID = false, false, 0
}

// refuse counts a refusal at now, this gate's own or a peer's, and reports whether the refusals
// now say the origin is closed while the gate is not yet: closedRefusals of them with nothing
// accepted, one of them its own, the first and the last at least closedSpans RateWindows apart.
// The caller closes the gate (unless it was just cut off from its peers).
func (c *closedTracker) refuse(now time.Time, own bool, rateWindow time.Duration) bool {
	if own {
		c.lastRefused, c.ownRefused = now, true
	} else {
		c.peerRefusedAt = now
		if !c.ownAcceptedAt.IsZero() && now.Sub(c.ownAcceptedAt) < closedSpans*rateWindow || c.ownRefused && now.Sub(c.lastRefused) >= rateWindow {
			// The origin accepted this gate within the span a closing needs, or this gate's
			// own refusals are over a RateWindow old: a peer's word does not count against that (one that reports refusals the origin never made
			// would otherwise close the gate on the few refusals at the end of a burst).
			return false
		}
	}
	if c.refused == 0 {
		c.firstRefused = now
	}
	c.refused++
	return !c.closed && c.ownRefused && c.refused >= closedRefusals && now.Sub(c.firstRefused) >= closedSpans*rateWindow
}

// probeSlot is a closed origin's next probe: the widest spacing w after this gate's last refusal,
// and, with live peers, after the last refusal a peer reported (plus a fixed offset by this
// gate's id, so that the same gate keeps probing for the fleet), but never more than live + 1
// widest spacings after this gate's own.
func (c *closedTracker) probeSlot(live int, id uint64, w time.Duration) time.Time {
	t := c.lastRefused.Add(w)
	if live > 0 && c.peerRefusedAt.After(c.lastRefused) {
		jitter := time.Duration(id%1024) * (w / 4096)
		t = later(t, earlier(c.peerRefusedAt.Add(w+jitter), c.lastRefused.Add(time.Duration(live+1)*w)))
	}
	return t
}

// confirms reports whether a start at now may confirm a closed origin that a peer reported within
// silent, once per widest spacing w: this gate is not closed and was not refused itself since the
// last acceptance, and has callers queued (see adaptive.earliest).
func (c *closedTracker) confirms(now time.Time, queued bool, silent, w time.Duration) bool {
	return !c.closed && !c.ownRefused && queued && !c.peerClosedAt.IsZero() &&
		now.Sub(c.peerClosedAt) < silent && now.Sub(c.confirmedAt) >= w
}

// probeGranted records the slot the prober was granted at now.
func (c *closedTracker) probeGranted(id uint64, now time.Time) { c.probeID, c.probeStart = id, now }

// released notes that permit id was reported: if it was the probe, another caller may probe.
func (c *closedTracker) released(id uint64) {
	if id == c.probeID {
		c.probing, c.probeID = false, 0
	}
}

// expire ends a probe whose lease ran out at now (its slot was just reclaimed).
func (c *closedTracker) expire(now time.Time, lease time.Duration) {
	if c.probeID != 0 && now.Sub(c.probeStart) >= lease {
		c.probing, c.probeID = false, 0
	}
}

// left notes that a prober left the line without a start.
func (c *closedTracker) left() {
	if c.probeID == 0 {
		c.probing = false
	}
}
