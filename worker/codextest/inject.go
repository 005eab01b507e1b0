package codextest

import (
	"sync"
	"time"
)

// Stage is where a queued [Fault] strikes: at a response or at an upgrade.
type Stage uint8

const (
	// AtResponse applies a fault to the next responses started, on any socket or HTTP stream.
	AtResponse Stage = iota
	// AtUpgrade applies an upgrade-level fault ([Fault.Upgrade]) to the next WebSocket upgrades.
	AtUpgrade
)

// Faults are the queued misbehaviours of a Server ([Server].Faults): rejections, upgrade- and
// response-level faults, refresh faults. Each queue is consumed in the order its calls were
// made; a call for n > 1 holds its place until n requests have met it. The zero Faults is empty.
// Its methods are safe for concurrent use.
type Faults struct {
	mu       sync.Mutex
	rejects  queue[refusal]
	upgrade  queue[Fault]
	response queue[Fault]
	refresh  queue[RefreshFault]
}

// Reject makes the next n upgrades or HTTP streaming requests fail with HTTP status (e.g. 401,
// 403, 426, 429, 500) and a JSON body {"error":{"message":...,"type":...,"code":...}}, with
// Retry-After (whole seconds, rounded up) when retryAfter > 0. A rejection is met before the
// token check, Options.MaxConns and the rate limits, and consumes no rate-limit token; an
// upgrade fault comes before it, and with WebSockets off upgrades get 426 and consume none.
func (f *Faults) Reject(n int, status int, retryAfter time.Duration) {
	f.mu.Lock()
	f.rejects.push(n, refusal{status: status, retryAfter: retryAfter})
	f.mu.Unlock()
}

// Next applies fault to the next n times the server reaches at.
//
// AtResponse: the next n responses started (a request's metadata "sim_fault" takes precedence
// and does not consume one). A fault that is upgrade-level only (FaultHangUpgrade) is queued
// AtUpgrade instead.
//
// AtUpgrade: the next n upgrades, with an upgrade-level fault: FaultHangUpgrade (never answer),
// FaultDrop (TCP close before answering), FaultClose1008 (101, then Close 1008 at once),
// FaultConnLimit (101, then the websocket_connection_limit_reached event and a close). Other
// faults are ignored.
func (f *Faults) Next(at Stage, n int, fault Fault) {
	if fault == FaultHangUpgrade {
		at = AtUpgrade
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case at == AtUpgrade && fault.Upgrade():
		f.upgrade.push(n, fault)
	case at == AtResponse:
		f.response.push(n, fault)
	}
}

// Refresh applies fault to the next n calls of the token endpoint; an unknown fault is ignored.
func (f *Faults) Refresh(n int, fault RefreshFault) {
	if _, err := ParseRefreshFault(string(fault)); err != nil {
		return
	}
	f.mu.Lock()
	f.refresh.push(n, fault)
	f.mu.Unlock()
}

// Clear forgets every queued rejection and fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	f.rejects, f.upgrade, f.response, f.refresh = nil, nil, nil, nil
	f.mu.Unlock()
}

// nextUpgrade takes what the next upgrade meets: an upgrade fault, else a rejection (status 0 =
// none), else neither.
func (f *Faults) nextUpgrade() (Fault, refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if uf, ok := f.upgrade.pop(); ok {
		return uf, refusal{}
	}
	rej, _ := f.rejects.pop()
	return FaultNone, rej
}

// nextReject takes the next rejection (status 0 = none).
func (f *Faults) nextReject() refusal {
	f.mu.Lock()
	defer f.mu.Unlock()
	rej, _ := f.rejects.pop()
	return rej
}

// nextResponse takes the next response fault (FaultNone = none).
func (f *Faults) nextResponse() Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	rf, _ := f.response.pop()
	return rf
}

// nextRefresh takes the next refresh fault ("" = none).
func (f *Faults) nextRefresh() RefreshFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	rf, _ := f.refresh.pop()
	return rf
}

// A queue holds values each to be taken n times, in order. Its owner guards it.
type queue[T any] []queued[T]

type queued[T any] struct {
	n int
	v T
}

func (q *queue[T]) push(n int, v T) {
	if n > 0 {
		*q = append(*q, queued[T]{n: n, v: v})
	}
}

// pop takes one use of the head value; false when q is empty.
func (q *queue[T]) pop() (T, bool) {
	if len(*q) == 0 {
		var zero T
		return zero, false
	}
	h := &(*q)[0]
	v := h.v
	if h.n--; h.n <= 0 {
		*q = (*q)[1:]
	}
	return v, true
}
