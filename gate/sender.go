package gate

import "time"

// sender is this gate's side of the signals: their sequence numbers, at most maxSent per report
// interval (within what its peers apply from one gate), and the cadence a transport is told to
// keep, faster while the gate joins a fleet. Its decisions take the time as a parameter;
// adaptive.mu guards it.
type sender struct {
	seq        uint64
	sent       int // signals made in the interval that began at sentAt
	sentAt     time.Time
	joinedAt   time.Time // the first signal made
	sentDemand int       // the demand in the last signal
}

// next takes a signal at now, if the interval's quota allows, and returns its seq.
func (s *sender) next(now time.Time, interval time.Duration) (uint64, bool) {
	if now.Sub(s.sentAt) >= interval {
		s.sent, s.sentAt = 0, now
	}
	if s.sent >= maxSent {
		return 0, false
	}
	s.sent++
	if s.joinedAt.IsZero() {
		s.joinedAt = now
	}
	s.seq++
	return s.seq, true
}

// joining reports whether the gate is joining a fleet at now: it made no signal yet, or its
// first less than joinIntervals intervals ago.
func (s *sender) joining(now time.Time, interval time.Duration) bool {
	return s.joinedAt.IsZero() || now.Sub(s.joinedAt) < joinIntervals*interval
}
