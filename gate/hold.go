package gate

import "time"

// holds are the times before which no start may happen, whatever the window and the pace allow:
// a rejection's push (now + spacing), a Retry-After reported here, and a peer's Retry-After, which
// holds this gate too but only for a bounded time. Its decisions take the time as a parameter;
// adaptive.mu guards it.
type holds struct {
	own       time.Time // a rejection's push and Retry-Afters reported here; moves back only when peers' late news refines a reaction
	retry     time.Time // the part of own that Retry-Afters asked for
	pushedAt  time.Time // the last rejection's push
	peer      time.Time // a peer's Retry-After
	peerRun   time.Time // when the current run of peer holds began
	peerSince time.Time // when the peer's hold holding now came (see adaptive.probeAt)
	peerBy    uint64    // ...and that peer's id
}

// retryAfter holds the starts until t, on a Retry-After reported here.
func (h *holds) retryAfter(t time.Time) {
	h.own, h.retry = later(h.own, t), later(h.retry, t)
}

// push holds the starts until now + spacing: the origin just refused an upgrade, so nothing
// should start until it may have a token again.
func (h *holds) push(now time.Time, spacing time.Duration) {
	h.own = later(h.own, now.Add(spacing))
	h.pushedAt = now
}

// refine brings the last push down to spacing after it, when a reaction's spacing comes down on
// peers' late news; a Retry-After's hold stays.
func (h *holds) refine(spacing time.Duration) {
	h.own = earlier(h.own, later(h.retry, h.pushedAt.Add(spacing)))
}

// peerUntil holds the starts until t on peer by's word: for at most w (the widest spacing) in
// any 4·w, so that peers that ask again and again hold this gate for at most a quarter of the
// time (and see adaptive.peerHold: a probe ends it sooner).
func (h *holds) peerUntil(now, t time.Time, w time.Duration, by uint64) {
	if !now.Before(h.peer) && now.Sub(h.peerRun) >= 4*w {
		h.peerRun = now
	}
	if u := earlier(t, h.peerRun.Add(w)); u.After(h.peer) {
		if !h.peer.After(now) {
			h.peerSince = now // a new hold, not one extended
		}
		h.peer, h.peerBy = u, by
	}
}

// until is the first time the holds allow a start.
func (h *holds) until() time.Time { return later(h.own, h.peer) }

// confirmed notes a refusal at now, seen here (by 0) or reported by peer by: one from other than
// the peer that holds this gate confirms its hold, and the probe that would end it waits again.
func (h *holds) confirmed(now time.Time, by uint64) {
	if h.peer.After(now) && by != h.peerBy {
		h.peerSince = now
	}
}
