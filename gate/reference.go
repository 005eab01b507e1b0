package gate

import "time"

// The reference controller's arithmetic (ReferenceMode), as pure functions of the configuration.
// The Adaptive controller lives in adaptive.go.

// widened returns the spacing after a rejection: Widen if s was below it, else doubled, capped at
// Max, never below Floor.
func (c Config) widened(s time.Duration) time.Duration {
	switch {
	case s < c.Widen:
		s = c.Widen
	case s > c.Max/2: // also keeps the doubling from overflowing
		s = c.Max
	default:
		s *= 2
	}
	return max(min(s, c.Max), c.Floor)
}

// relaxed returns the spacing after a streak of successes: halved, snapped to Floor when the half
// is below Widen, never below Floor.
func (c Config) relaxed(s time.Duration) time.Duration {
	s /= 2
	if s < c.Widen {
		s = c.Floor
	}
	return max(s, c.Floor)
}
