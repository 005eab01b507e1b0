// Package gate paces the starts of new upstream WebSocket upgrades so that a burst of requests does
// not provoke the origin into rejecting them with HTTP 403.
//
// Call [New] once per process and origin, then wrap every new upgrade in [Connect], which waits in
// the gate, dials with a per-attempt timeout, reports the outcome and retries an origin 403 (paced
// by the gate in Adaptive mode, once after a cooldown in the others). Callers that need finer
// control use [Gate.Wait] and report on the returned [Permit] themselves.
//
// The package is pure logic: it does no I/O and imports nothing but the standard library.
//
// # The Adaptive controller
//
// An origin's upgrade limit behaves like a token bucket (a burst, then a rate). The gate probes
// for both instead of jumping, with two limits that a start must both pass:
//
//   - A window of upgrades in flight (granted, not yet reported). It starts at InitialWindow (2),
//     grows by one per success while below the slow-start threshold (so it doubles every round
//     of handshakes; loopback handshakes take about a millisecond, so a healthy origin sees it
//     at hundreds within milliseconds), and by one per window of successes above it. A rejection
//     halves it (never below 1) and sets the threshold there. It grows only while it limits
//     (callers are queued or it is at least half full), so a quiet period does not build up a
//     window that the next burst would storm the origin with. MaxWindow (1024) caps it.
//     Against a burst-5 origin a 60-burst loses a handful of upgrades instead of 55.
//   - A spacing between consecutive starts, for the rate. It is Floor (0) until the first
//     rejection, which sets it to the rate the origin was just measured to accept: RateWindow
//     (1s) divided by the upgrades accepted in the last RateWindow (1s when none were). Every
//     later rejection multiplies it by Backoff (1.25), never to below that measured value.
//     While callers are queued behind the spacing (the pace, not the demand, is what limits),
//     every RelaxRun (8) successes relax it: the first step since the last rejection cuts it by
//     1-Relax (1/16), the k-th by k times that, at most by half. So the gate probes gently just
//     above a rate that was rejected (a small bucket then costs one rejection per probe, not a
//     storm) and fast once the origin has clearly recovered (5/s to 50/s in about 3s). It never
//     snaps to 0 (below 1ms it becomes Floor: at that rate the window is the limit anyway), and
//     it stays within [Floor, max(Max, Floor)]; Max is 8s.
//
// Rejections of attempts that started before the last reaction are one signal, not one each
// (compare TCP, which cuts its window once per round trip, not once per lost packet): thirty
// attempts in flight that are refused together halve the window once. Every rejection pushes the
// next start to at least now + spacing, and a Retry-After to at least now + Retry-After:
// Retry-After always wins. Other failures ([Permit.Failed]) only free the slot. Waiting callers
// start in arrival order; [Connect] retries an origin 403 through the gate, in its original place
// in the line.
//
// Every Permit must be reported (Connect always does). An unreported one holds its window slot
// for at most Lease (1m), then the slot is reclaimed; a second report of a Permit, or one after
// its lease, changes only the counters (and a Retry-After it carries is still honoured).
//
// # The forbidden budget and a closed origin
//
// [Connect] retries a refused upgrade through the gate for at most Policy.ForbiddenBudget (10s)
// from the first refusal, or until ctx's deadline if that comes first, and then returns the last
// 403; a retry that the gate already knows cannot start in time (a Retry-After beyond it) is
// answered at once. A retry keeps its first arrival, so it goes before the callers that came
// after it, and before those that came with it but have not started yet.
//
// An origin that refuses everything (a blocked account, a WAF rule) is not a rate limit, and
// retrying each request until its budget ends only keeps clients waiting while the gate keeps
// knocking. Three refusals with nothing accepted, the first and the last at least two
// RateWindows apart, close the gate: with nothing accepted the gate spaces its attempts at least a
// RateWindow apart, so a token-bucket origin that takes one upgrade per second or more accepts the
// second or the third, while a burst refused in one instant counts as one signal, not three.
// While closed, waiting callers and refused retries get [ErrClosed] at once (Connect: the last
// 403); one new caller at a time probes, at the widest spacing (max(Max, Floor) after the last
// refusal), if that slot comes before its deadline (Connect: its budget), and every other caller
// is answered at once. The first accepted upgrade reopens the gate with the spacing it had. In
// virtual time against an origin that refuses everything: one request is answered after 2.26s and
// 3 attempts; 50 concurrent requests after 2.26s and 4 attempts; after the origin opens again, the
// next request is served within 8s (the probe slot).
//
// # Why the defaults are what they are
//
// Measured against a simulated token-bucket origin in virtual time (5/s burst 5, 1/s burst 1,
// unlimited, a rate that changes at run time, and demand at twice the rate for a minute; the
// package's TestSimulatedTargets): an initial window of 2 costs a healthy 30-burst no more
// handshake rounds than one of 4 (2+4+8+16 = 30), and loses fewer upgrades to a small bucket;
// Backoff 1.25 with the measured floor keeps goodput above 90% of the origin's rate with about 5%
// rejections; 1/16 steps every 8 successes keep a 60-burst against 5/s under 15% rejections, and
// the growing steps follow a tenfold rise within seconds.
//
// # The other modes
//
// ReferenceMode keeps the reference design for the A/B: spacing Floor, widened to Widen (1s) on
// a rejection and doubled up to Max (8s), halved after RelaxAfter (20) successes in a row, a half
// below Widen snapping to Floor. [Reference] and [ReferencePolicy] return its parameters. Fixed
// (spacing Floor forever) and Off (no pacing) exist for comparison and for operators.
package gate
