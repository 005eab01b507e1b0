// Package gate paces the starts of new upstream WebSocket upgrades so that a burst of requests does
// not provoke the origin into rejecting them with HTTP 403.
//
// The package is pure logic: it does no I/O and imports nothing but the standard library.
//
// # Call order
//
//  1. [New] once per process and origin (or use a zero [Gate]).
//  2. Wrap every new upgrade in [Connect]: it waits in the gate, dials with a per-attempt timeout,
//     reports the outcome and retries an origin 403 (paced by the gate in Adaptive mode, once
//     after a cooldown in the others). Callers that need finer control call [Gate.Wait] and
//     report exactly once on the returned [Permit] ([Permit.Succeeded], [Permit.Forbidden],
//     [Permit.Failed]).
//  3. Optionally, to share one upgrade limit between processes, a transport drives
//     [Gate.NextSignal] (at once, then after every [Gate.NextSignalDelay] and whenever
//     [Gate.Pending] fires), publishes [Signal.AppendBinary]'s bytes, and hands every message it
//     receives to [Gate.ObserveBinary]. Without one, each gate is on its own.
//  4. [Gate.Snapshot] for logs and metrics; [Gate.Estimate] for a worker deciding whether to hand
//     a request back to a queue its peers serve.
//
// # Rules (Adaptive, the default mode)
//
//   - A start must pass two limits: a window of upgrades in flight (InitialWindow 2, grown by
//     slow start while it limits, halved on a rejection, at most MaxWindow) and a spacing between
//     starts (Floor 0 until the first rejection, then the rate the origin was measured to accept,
//     multiplied by Backoff on later rejections, relaxed step by step while callers queue).
//   - An idle, healthy gate never waits; nothing sleeps while holding the gate's lock.
//   - Rejections of attempts that started before the last reaction are one signal, not one each.
//   - Every rejection pushes the next start to at least now + spacing; a Retry-After pushes it to
//     at least now + Retry-After (Retry-After always wins). Other failures only free the slot.
//   - Waiting callers start in arrival order; a retry keeps its place in the line.
//   - Every Permit must be reported; an unreported one holds its slot for at most Lease (1m).
//   - [Connect] retries a refused upgrade for at most Policy.ForbiddenBudget (10s) from the first
//     refusal (or ctx's deadline), then returns the last 403.
//   - An origin that refuses everything (three refusals, nothing accepted, spread over two
//     RateWindows) closes the gate: waiting callers get [ErrClosed] at once, one caller at a
//     time probes at the widest spacing (max(Max, Floor)), and the first acceptance reopens it.
//   - With peers, the spacing is the fleet's (the median of the gates' proposals) and each gate
//     takes its share by demand; reactions carry epochs, so a fleet-wide burst of rejections
//     widens once. A peer's signal can delay this gate only by bounded amounts (see
//     [Gate.Observe]); with no live peer a gate is exactly the per-process one.
//
// ReferenceMode keeps the reference design for A/B runs (spacing widened to Widen, doubled up to
// Max, halved after RelaxAfter successes; see [Reference] and [ReferencePolicy]); Fixed spaces
// starts Floor apart forever; Off never waits.
//
// # Zero value and concurrency
//
// The zero [Gate] is a ready-to-use Adaptive gate with the defaults, as is New(Config{}); zero
// [Config] fields are the documented defaults. A Gate is safe for concurrent use by multiple
// goroutines and must not be copied after first use. Outcome reports never block on I/O or a
// wait; cancelling a wait returns the context's error at once.
//
// The rules in full, the reasons for the defaults and the measurements behind them are in
// docs/gate-design.md.
package gate
