package gate

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// validSignal has every field set, within range.
func validSignal() Signal {
	return Signal{Gate: 0x0123456789abcdef, Seq: 42, Epoch: 7, Accepted: 1000, Rejected: 12, Recent: 5,
		Demand: 17, Spacing: 1600 * time.Millisecond, RetryAfter: 3 * time.Second, Wait: 2500 * time.Millisecond, Closed: true, Started: true}
}

func TestSignalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   Signal
		want Signal // after the encoding's units
	}{
		{"every field", validSignal(), validSignal()},
		{"smallest", Signal{Gate: 1, Seq: 1}, Signal{Gate: 1, Seq: 1}},
		{"largest", Signal{Gate: ^uint64(0), Seq: maxSignalCount - 1, Epoch: maxSignalEpoch - 1, Accepted: maxSignalCount - 1,
			Rejected: maxSignalCount - 1, Recent: maxSignalRecent, Demand: maxSignalDemand, Spacing: time.Hour, RetryAfter: time.Hour, Wait: time.Hour},
			Signal{Gate: ^uint64(0), Seq: maxSignalCount - 1, Epoch: maxSignalEpoch - 1, Accepted: maxSignalCount - 1,
				Rejected: maxSignalCount - 1, Recent: maxSignalRecent, Demand: maxSignalDemand, Spacing: time.Hour, RetryAfter: time.Hour, Wait: time.Hour}},
		{"truncated to the units", Signal{Gate: 1, Seq: 1, Spacing: 1500 * time.Nanosecond, RetryAfter: 1999 * time.Microsecond, Wait: 999 * time.Microsecond},
			Signal{Gate: 1, Seq: 1, Spacing: time.Microsecond, RetryAfter: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.in.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if len(b) != signalSize {
				t.Errorf("got %d bytes, want %d", len(b), signalSize)
			}
			got, err := ParseSignal(b)
			if err != nil || got != tt.want {
				t.Errorf("ParseSignal = %+v, %v; want %+v", got, err, tt.want)
			}
			var u Signal
			if err := u.UnmarshalBinary(b); err != nil || u != tt.want {
				t.Errorf("UnmarshalBinary = %+v, %v; want %+v", u, err, tt.want)
			}
		})
	}
}

func TestParseSignalRejects(t *testing.T) {
	good, err := validSignal().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put := func(off int, v ...byte) []byte { return with(func(b []byte) []byte { copy(b[off:], v); return b }) }
	ones := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	zeros := make([]byte, 8)
	tests := []struct {
		name string
		in   []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"version 0", put(0, 0)},
		{"version 2", put(0, 2)},
		{"short", good[:signalSize-1]},
		{"long", append(bytes.Clone(good), 0)},
		{"unknown flag", put(1, 0x04)},
		{"gate 0", put(2, zeros...)},
		{"seq 0", put(10, zeros...)},
		{"seq too large", put(10, ones...)},
		{"epoch too large", put(18, ones...)},
		{"accepted too large", put(26, ones...)},
		{"rejected too large", put(34, ones...)},
		{"recent too large", put(42, 0xff, 0xff, 0xff, 0xff)},
		{"demand too large", put(46, 0xff, 0xff, 0xff, 0xff)},
		{"spacing too large", put(50, 0xff, 0xff, 0xff, 0xff)},
		{"retry-after too large", put(54, 0xff, 0xff, 0xff, 0xff)},
		{"wait too large", put(58, 0xff, 0xff, 0xff, 0xff)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSignal(tt.in)
			if !errors.Is(err, ErrSignal) || s != (Signal{}) {
				t.Errorf("ParseSignal = %+v, %v; want a zero Signal and an error wrapping ErrSignal", s, err)
			}
		})
	}
}

func TestAppendBinaryRejectsInvalid(t *testing.T) {
	tests := []struct {
		name string
		s    Signal
	}{
		{"gate 0", Signal{Seq: 1}},
		{"seq 0", Signal{Gate: 1}},
		{"negative demand", Signal{Gate: 1, Seq: 1, Demand: -1}},
		{"negative recent", Signal{Gate: 1, Seq: 1, Recent: -1}},
		{"negative spacing", Signal{Gate: 1, Seq: 1, Spacing: -1}},
		{"retry-after over an hour", Signal{Gate: 1, Seq: 1, RetryAfter: time.Hour + time.Millisecond}},
		{"epoch out of range", Signal{Gate: 1, Seq: 1, Epoch: maxSignalEpoch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.s.AppendBinary([]byte("x"))
			if !errors.Is(err, ErrSignal) || string(b) != "x" {
				t.Errorf("AppendBinary = %q, %v; want the buffer unchanged and an error wrapping ErrSignal", b, err)
			}
		})
	}
}

func TestAppendBinaryDoesNotAllocate(t *testing.T) {
	s := validSignal()
	buf := make([]byte, 0, signalSize)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = s.AppendBinary(buf[:0]); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSignal(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendBinary and ParseSignal allocate %v times, want 0", allocs)
	}
}

// FuzzParseSignal: ParseSignal never panics, and whatever it accepts is valid and encodes back to
// the very same bytes (the encoding is canonical, so a signal cannot be smuggled in two forms).
func FuzzParseSignal(f *testing.F) {
	for _, s := range []Signal{validSignal(), {Gate: 1, Seq: 1}} {
		b, err := s.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{signalVersion})
	g := New(Config{}) // one gate takes every accepted signal: applying them must not panic either
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSignal(b)
		if err != nil {
			if !errors.Is(err, ErrSignal) || s != (Signal{}) {
				t.Fatalf("ParseSignal(%x) = %+v, %v; want a zero Signal and ErrSignal", b, s, err)
			}
			return
		}
		if err := s.validate(); err != nil {
			t.Fatalf("ParseSignal(%x) accepted an invalid signal: %v", b, err)
		}
		again, err := s.AppendBinary(nil)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("ParseSignal(%x) = %+v, which encodes to %x, %v", b, s, again, err)
		}
		g.observeAt(s, time.Now())
	})
}
