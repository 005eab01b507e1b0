package gate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codexpool/codexpool/gate"
)

// Most callers wrap each new upgrade in Connect: it waits in the gate, dials with a per-attempt
// timeout, reports the outcome, and retries an origin 403 (in the default Adaptive mode through
// the gate, which the rejection has slowed down; in the others once, after a cooldown).
func Example() {
	g := gate.New(gate.Config{}) // one per process and origin
	dial := func(ctx context.Context) (string, error) {
		return "socket", nil // e.g. a websocket.Dialer.DialContext(ctx, ...)
	}
	conn, res, err := gate.Connect(context.Background(), g, gate.Policy{}, dial)
	fmt.Println(conn, res.Attempts, err)
	// Output: socket 1 <nil>
}

// A caller that dials by itself waits for a permit and reports the outcome on it. A 403 widens the
// spacing between later starts; a long enough run of successes relaxes it again.
func ExampleGate_Wait() {
	g := gate.New(gate.Config{})
	for _, rejected := range []bool{false, true} {
		p, err := g.Wait(context.Background())
		if err != nil {
			return
		}
		if rejected {
			p.Forbidden(0) // no Retry-After
		} else {
			p.Succeeded()
		}
		s := g.Snapshot()
		fmt.Printf("starts %d, rejections %d, spacing %v\n", s.Starts, s.Rejections, s.Spacing)
	}
	// Output:
	// starts 1, rejections 0, spacing 0s
	// starts 2, rejections 1, spacing 1s
}

// An error type that means "the origin answered the upgrade with 403" implements Forbidden, so
// Connect can find it with errors.As however it is wrapped.
func ExampleForbidden() {
	var err error = fmt.Errorf("codex: upgrade: %w", &upgradeError{status: 403})
	var f gate.Forbidden
	fmt.Println(errors.As(err, &f))
	// Output: true
}

type upgradeError struct{ status int }

func (e *upgradeError) Error() string { return fmt.Sprintf("upgrade rejected: HTTP %d", e.status) }

func (e *upgradeError) OriginForbidden() time.Duration { return 0 }

// A transport shares a gate's state with the gates of other processes that share its upgrade
// limit: it publishes NextSignal every ReportInterval and whenever Pending fires, and gives every
// message it receives to ObserveBinary. Here the bus is a channel from one gate to another; in
// codexpool it is a NATS subject per limit.
func ExampleGate_NextSignal() {
	a, b := gate.New(gate.Config{}), gate.New(gate.Config{}) // two processes' gates
	bus := make(chan []byte, 1)
	tick := time.NewTicker(gate.DefaultReportInterval)
	defer tick.Stop()
	var buf []byte
	for range 6 { // a transport loops until it is stopped
		select {
		case <-tick.C:
		case <-a.Pending(): // urgent news: a rejection, a burst, a closed origin...
		}
		if s, ok := a.NextSignal(); ok {
			buf, _ = s.AppendBinary(buf[:0])
			bus <- buf
		}
		if err := b.ObserveBinary(<-bus); err != nil { // the peer's side of the bus
			fmt.Println(err)
		}
	}
	// b counts a as a peer once it has heard it consistently for a few intervals.
	s := b.Snapshot()
	fmt.Println("peers", s.Peers, "applied", s.SignalsApplied > 0)
	// Output: peers 1 applied true
}
