package gate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A Signal is what one gate tells the gates that share its upgrade limit (the gates of other
// processes using the same credentials on the same origin): what it has seen and how it paces.
// [Gate.NextSignal] makes one, [Gate.Observe] applies a peer's. It is a plain value; a transport
// carries it as the bytes of [Signal.AppendBinary] and decodes them with [ParseSignal].
//
// Durations are relative to the moment the signal was made, so no two machines' clocks are ever
// compared; counts are totals since the gate started, so a lost signal loses nothing but time.
type Signal struct {
	Gate  uint64 // the sending gate's random id; never 0
	Seq   uint64 // 1 for the gate's first signal, then one more for each
	Epoch uint64 // reaction epoch: bumped by each widening; a higher one from a peer is a reaction to apply

	Accepted uint64 // upgrades the gate saw accepted since it started
	Rejected uint64 // upgrades the gate saw refused (403) since it started
	Recent   int    // upgrades accepted in the last RateWindow

	Demand     int           // callers queued plus upgrades in flight
	Spacing    time.Duration // the gap between starts that the gate proposes for the whole fleet (gates of earlier versions sent their own gap: a wider vote)
	RetryAfter time.Duration // the gate holds every start back this long (Retry-After); 0: none
	Wait       time.Duration // how long a new caller would wait at the gate, as it estimates it
	Closed     bool          // the gate sees a closed origin (see ErrClosed)
	Started    bool          // the gate started an upgrade since its previous signal (sent while the fleet is paced)
}

// Signal encoding, version 1: fixed-size, big-endian.
//
//	version(1) flags(1) gate(8) seq(8) epoch(8) accepted(8) rejected(8)
//	recent(4) demand(4) spacing µs(4) retry-after ms(4) wait ms(4)
const (
	signalVersion = 1
	signalSize    = 62
	flagClosed    = 1 << 0
	flagStarted   = 1 << 1
	knownFlags    = flagClosed | flagStarted

	maxSignalCount    = 1 << 62   // Seq, Accepted, Rejected
	maxSignalEpoch    = 1 << 48   // a gate widens a few times a second at most: centuries
	maxSignalDemand   = 1 << 20   // callers and upgrades of one gate
	maxSignalRecent   = 1 << 20   // upgrades accepted in one RateWindow
	maxSignalDuration = time.Hour // Spacing, RetryAfter, Wait
	signalSpacingUnit = time.Microsecond
	signalTimeUnit    = time.Millisecond
)

// ErrSignal is wrapped by the errors of [ParseSignal] and [Signal.AppendBinary] for a signal that
// is malformed or out of range.
var ErrSignal = errors.New("gate: invalid signal")

func signalError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSignal}, args...)...)
}

// validate checks every field's range.
func (s Signal) validate() error {
	switch {
	case s.Gate == 0:
		return signalError("gate id 0")
	case s.Seq == 0 || s.Seq >= maxSignalCount:
		return signalError("seq %d out of range", s.Seq)
	case s.Epoch >= maxSignalEpoch:
		return signalError("epoch %d out of range", s.Epoch)
	case s.Accepted >= maxSignalCount || s.Rejected >= maxSignalCount:
		return signalError("totals %d, %d out of range", s.Accepted, s.Rejected)
	case s.Recent < 0 || s.Recent > maxSignalRecent:
		return signalError("recent %d out of range", s.Recent)
	case s.Demand < 0 || s.Demand > maxSignalDemand:
		return signalError("demand %d out of range", s.Demand)
	}
	for _, d := range [...]time.Duration{s.Spacing, s.RetryAfter, s.Wait} {
		if d < 0 || d > maxSignalDuration {
			return signalError("duration %v out of range", d)
		}
	}
	return nil
}

// AppendBinary implements encoding.BinaryAppender: it appends the signal's encoding (62 bytes)
// to b. It fails only for a signal that [ParseSignal] would reject. Durations are truncated to
// the encoding's units (µs for Spacing, ms for the others).
func (s Signal) AppendBinary(b []byte) ([]byte, error) {
	if err := s.validate(); err != nil {
		return b, err
	}
	var flags byte
	if s.Closed {
		flags |= flagClosed
	}
	if s.Started {
		flags |= flagStarted
	}
	b = append(b, signalVersion, flags)
	b = binary.BigEndian.AppendUint64(b, s.Gate)
	b = binary.BigEndian.AppendUint64(b, s.Seq)
	b = binary.BigEndian.AppendUint64(b, s.Epoch)
	b = binary.BigEndian.AppendUint64(b, s.Accepted)
	b = binary.BigEndian.AppendUint64(b, s.Rejected)
	b = binary.BigEndian.AppendUint32(b, uint32(s.Recent))
	b = binary.BigEndian.AppendUint32(b, uint32(s.Demand))
	b = binary.BigEndian.AppendUint32(b, uint32(s.Spacing/signalSpacingUnit))
	b = binary.BigEndian.AppendUint32(b, uint32(s.RetryAfter/signalTimeUnit))
	b = binary.BigEndian.AppendUint32(b, uint32(s.Wait/signalTimeUnit))
	return b, nil
}

// MarshalBinary implements encoding.BinaryMarshaler with [Signal.AppendBinary].
func (s Signal) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, signalSize))
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler with [ParseSignal].
func (s *Signal) UnmarshalBinary(b []byte) error {
	v, err := ParseSignal(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSignal decodes a signal made by [Signal.AppendBinary]. It rejects, with an error wrapping
// [ErrSignal], anything else: another version or length, unknown flags, a field out of range. It
// never panics, whatever b holds.
func ParseSignal(b []byte) (Signal, error) {
	if len(b) == 0 || b[0] != signalVersion {
		if len(b) == 0 {
			return Signal{}, signalError("empty")
		}
		return Signal{}, signalError("version %d", b[0])
	}
	if len(b) != signalSize {
		return Signal{}, signalError("%d bytes, want %d", len(b), signalSize)
	}
	if b[1]&^knownFlags != 0 {
		return Signal{}, signalError("unknown flags %#x", b[1])
	}
	be := binary.BigEndian
	u32 := func(i int) uint32 { return be.Uint32(b[i:]) }
	recent, demand := u32(42), u32(46)
	spacing, retryAfter, wait := u32(50), u32(54), u32(58)
	// Range-check the raw values before converting, so no conversion can overflow.
	if recent > maxSignalRecent || demand > maxSignalDemand {
		return Signal{}, signalError("recent %d or demand %d out of range", recent, demand)
	}
	if time.Duration(spacing)*signalSpacingUnit > maxSignalDuration ||
		time.Duration(retryAfter)*signalTimeUnit > maxSignalDuration || time.Duration(wait)*signalTimeUnit > maxSignalDuration {
		return Signal{}, signalError("duration out of range")
	}
	s := Signal{
		Gate:       be.Uint64(b[2:]),
		Seq:        be.Uint64(b[10:]),
		Epoch:      be.Uint64(b[18:]),
		Accepted:   be.Uint64(b[26:]),
		Rejected:   be.Uint64(b[34:]),
		Recent:     int(recent),
		Demand:     int(demand),
		Spacing:    time.Duration(spacing) * signalSpacingUnit,
		RetryAfter: time.Duration(retryAfter) * signalTimeUnit,
		Wait:       time.Duration(wait) * signalTimeUnit,
		Closed:     b[1]&flagClosed != 0,
		Started:    b[1]&flagStarted != 0,
	}
	if err := s.validate(); err != nil {
		return Signal{}, err
	}
	return s, nil
}
