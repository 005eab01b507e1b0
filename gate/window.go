package gate

import "time"

// slowStartRun is the successes per step of the window in slow start: the window grows by half
// every round of handshakes, not doubles. Against a small bucket, the upgrades in flight when it
// runs dry are refused, and in a fleet the news of the first refusal reaches the other gates a
// moment late: a window that doubled is twice what was just accepted. Half more costs a healthy
// 30-burst one more round (2+3+4+6+9+...), a few milliseconds on loopback.
const slowStartRun = 2

// window is the Adaptive controller's limit on upgrades in flight, and the permits in it. It
// starts at InitialWindow, grows by one per slowStartRun successes below ssthresh (slow start) and
// by one per window of successes above it, and halves on a reaction, setting ssthresh there.
// Whether it grows at all (only while it limits) and how much of it this gate may use (its share
// of the fleet's) are the owner's to decide. adaptive.mu guards it.
type window struct {
	size     int      // upgrades allowed in flight
	ssthresh int      // slow start below it; MaxWindow until the first rejection
	acked    int      // successes towards the next +1
	inflight int      // permits granted and neither reported nor expired
	slots    slotRing // the permits in flight, for their leases
}

func newWindow(initial, maxSize int) window { return window{size: initial, ssthresh: maxSize} }

// grow counts n accepted upgrades and reports whether the window grew; it never exceeds maxSize.
func (w *window) grow(n, maxSize int) bool {
	was := w.size
	for range n {
		if w.size < w.ssthresh {
			// Slow start: one more per slowStartRun successes, so the window grows by half
			// every round of handshakes.
			if w.acked++; w.acked >= slowStartRun {
				w.acked = 0
				w.size++
			}
		} else if w.acked++; w.acked >= w.size {
			w.acked = 0
			w.size++
		}
	}
	w.size = min(w.size, maxSize)
	return w.size > was
}

// halve is a reaction to a rejection: half the window (never below 1), and slow start ends there.
func (w *window) halve() {
	w.size = max(w.size/2, 1)
	w.ssthresh = w.size
	w.acked = 0
}

// take puts a permit started at now in flight and returns its id.
func (w *window) take(now time.Time) uint64 {
	w.inflight++
	return w.slots.push(now)
}

// release takes permit id out of flight and reports whether it was in flight (not reported
// before, its lease not run out).
func (w *window) release(id uint64) bool {
	if !w.slots.release(id) {
		return false
	}
	w.inflight--
	return true
}

// expire reclaims the permits started at or before cutoff (their lease ran out unreported).
func (w *window) expire(cutoff time.Time) { w.inflight -= w.slots.expire(cutoff) }
