// Package gate paces the starts of new upstream WebSocket upgrades so that a burst of requests does
// not provoke the origin into rejecting them with HTTP 403.
//
// Call [New] once per process and origin, then wrap every new upgrade in [Connect], which waits in
// the gate, dials with a per-attempt timeout, reports the outcome and retries an origin 403 (paced
// by the gate in Adaptive mode, once after a cooldown in the others). Callers that need finer
// control use [Gate.Wait] and report on the returned [Permit] themselves. Gates of several
// processes that share one upgrade limit can share what they learn through a transport that
// carries [Signal] values (see "Sharing a limit" below); without one, each gate is on its own.
//
// The package is pure logic: it does no I/O and imports nothing but the standard library.
//
// # The Adaptive controller
//
// An origin's upgrade limit behaves like a token bucket (a burst, then a rate). The gate probes
// for both instead of jumping, with two limits that a start must both pass:
//
//   - A window of upgrades in flight (granted, not yet reported). It starts at InitialWindow (2),
//     grows by one per two successes while below the slow-start threshold (so it grows by half
//     every round of handshakes; loopback handshakes take about a millisecond, so a healthy origin
//     sees it at hundreds within tens of milliseconds), and by one per window of successes above
//     it. (Doubling, as TCP does, leaves twice what the origin just accepted in flight when a
//     small bucket runs dry; by half costs a healthy 30-burst one more round.) A rejection
//     halves it (never below 1) and sets the threshold there. It grows only while it limits
//     (callers are queued or it is at least half full), so a quiet period does not build up a
//     window that the next burst would storm the origin with. MaxWindow (1024) caps it.
//     Against a burst-5 origin a 60-burst loses 4 to 7 upgrades instead of 55.
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
// is answered at once. The first accepted upgrade reopens the gate with the spacing it had. A gate
// that lost its last peer less than the widest spacing ago does not close: its refusals may be the
// fleet using the limit up, which it no longer hears of (a worker cut off from the transport, still
// reaching the origin; in virtual time, such a gate of 8 closed and failed half its requests in
// about one run in 160). In
// virtual time against an origin that refuses everything: one request is answered after 2.26s and
// 3 attempts; 50 concurrent requests after 2.26s and 4 attempts; after the origin opens again, the
// next request is served within 8s (the probe slot).
//
// # Sharing a limit between processes
//
// N gates that share one origin limit (workers on one machine, or using one account) each
// rediscover it on their own: measured with 4 workers, a 60-request burst against a 5/s origin
// took 20.2s where 11.5s is the limit. They need not share a lock (that would be the
// process-wide serializer this package replaced, at fleet scale); they share what they see, and
// each still decides for itself. A transport (NATS, in this module; the package knows none)
// drives it:
//
//   - as soon as it starts, then after every [Gate.NextSignalDelay] (ReportInterval, 100ms; a
//     quarter of it while the gate joins a fleet, so that gates that meet trust each other within
//     an interval), and whenever [Gate.Pending] fires, it calls [Gate.NextSignal] and, if ok,
//     publishes [Signal.AppendBinary]'s bytes to the peers;
//   - it hands every message it receives to [Gate.ObserveBinary] (or a decoded one to
//     [Gate.Observe]); its own come back harmlessly;
//   - a worker that can give a request back to a queue its peers serve may ask [Gate.Estimate].
//
// A Signal carries the gate's random id, a sequence number, its reaction epoch, its totals of
// accepted and refused upgrades, those accepted in the last RateWindow, its demand (callers
// queued plus upgrades in flight), the fleet spacing it proposes, the rest of a Retry-After, the
// wait it expects for a new caller, whether it sees a closed origin, and whether it started an
// upgrade since its last signal (sent only while paced). Durations are relative and counts are
// totals, so no two clocks are compared and a lost signal costs only time.
//
// From its live peers a gate knows the fleet's picture, and paces by it:
//
//   - The spacing is the fleet's: the gap between starts for all the gates together, set at a
//     reaction from the upgrades the fleet accepted in the last RateWindow (the sum of the
//     peers' counts and its own). Each gate proposes a value, and uses the median of its own and
//     those of its live peers in the same epoch: left to themselves, gates that reacted before
//     they trusted each other, or relaxed on different successes, were measured drifting apart
//     tenfold (26ms to 546ms in one fleet), and a gate left with the widest served the last
//     requests of a burst one a second while the origin took five. Reactions and relaxations
//     start from the median, and every gate relaxes on the fleet's successes (its peers'
//     acceptances count), so the proposals stay together, and one far off, late or hostile moves
//     the median little. A gate's own gap is that spacing divided by its share, its
//     demand over the fleet's: requests are served at the same rate wherever they queue. (An
//     equal share among busy gates was measured too: for 8 gates, a 60-burst took 15.2s
//     instead of 11.5s and sustained load had a 47s p95 instead of 37.5s, since a gate with few
//     requests kept a rate its requests did not need.) No gate starts within one fleet spacing
//     of the last start it heard of: while the fleet is paced, a gate announces each start in a
//     signal sent at once, not when its handshake ends. Gates that the same news frees take
//     turns: each waits ReportInterval/32 (3ms) more for every busy peer between the gate that
//     started and itself in id order (wrapping), so the first one's start, announced, holds the
//     others for another spacing. Peers delay a start by at most a spacing per gate, and at
//     most Max, beyond the gate's own pace. (Measured with 8 worker processes: gates freed by
//     the same news, or by the earlier bound of one spacing beyond their own pace, started
//     within a millisecond of each other and all but one were refused; that was about half the
//     refusals of a 60-burst after its first second.) When the fleet first becomes paced (its
//     gates all started within moments, in slow start), each gate takes the slot rank+1
//     spacings after that first reaction (rank: its place among the busy gates by id) for its
//     next start instead of its own pace: left in step, they would all start together again an
//     own spacing later.
//   - Reactions have epochs, a Lamport clock: a gate's rejection widens only if its attempt
//     started in the gate's current epoch, and a widening bumps the epoch; a signal with a
//     higher epoch is a peer's reaction, applied once (window halved, spacing backed off, never
//     below the measured floor), and its epoch adopted. So a burst of rejections across the
//     fleet widens once, as a burst within one gate does, and nothing compares times across
//     machines. Peers report acceptances up to an interval late, so a reaction made before they
//     arrived is refined down to the fleet's count for two intervals.
//   - The window is the fleet's too: the peers' acceptances grow it, and a gate uses its share of
//     it (counting a peer as at least one caller, since at a burst's start every gate's news is
//     a moment old). While the fleet is not paced yet and a gate's share is below one upgrade,
//     the window's slots go one each to the busy gates in id order: a fresh fleet in slow start
//     has about one window in flight, not one upgrade per gate. A burst reaches every gate
//     before any has heard of the others' callers, so for ReportInterval/10 (10ms) after it
//     becomes busy a gate counts a peer it has not heard from since as busy; and in slow start
//     an acceptance that grows the window is urgent news too. (With worker processes on a
//     2-core machine, 10ms instead of 5ms cut the refusals of a 60-burst from 9.2 to 7.9 on
//     average over 8 workers (18 and 12 runs) and from 8.0 to 6.8 over 4 (6 runs each), with the
//     same wall time; it delays the first start of a burst at a gate whose rank is past the
//     window by at most those 10ms.)
//   - A peer's Retry-After holds this gate too; a peer's acceptance reopens a closed gate; its
//     refusals count towards closing one (but one refusal must be the gate's own: a gate that
//     hears a peer report a closed origin and was not refused itself starts at once, once per
//     Max, to see for itself, instead of after its share of the fleet's spacing); and a closed
//     fleet probes about once per Max, since a peer's refusal moves every gate's probe slot and
//     a fixed offset per gate lets the same one go first.
//
// With no live peer (none ever heard, or all silent for 3 intervals: a worker cut off from the
// transport) a gate is exactly the per-process one: every rule above reduces to it.
//
// # What a signal can do, and what bounds it
//
// A garbled or hostile signal must not stall a gate. [ParseSignal] accepts only version 1, 62
// bytes, known flags and every field in range, and encodings are canonical. A new id enters the
// peer table (32 entries) only once heard in two generations of an admission filter (two
// report intervals each), and counts only after 3 more increasing seqs over a quarter interval
// at least: a flood of random ids never does, and cannot evict a live peer. A peer's signals beyond 30 per interval
// are dropped (a gate makes at most 29), as are stale and inconsistent ones (a total going
// back); peers expire after 3 silent intervals. What an established but hostile peer can do is
// bounded too: its Retry-After holds this gate for at most Max in any 2·Max; this gate's own
// spacing never exceeds max(Max, Floor) whatever demand it claims; it can trigger at most one
// reaction per interval; its claimed acceptances at most double the window per signal, and relax
// the spacing at most one step per RelaxRun half-spacings; its proposed spacing is one vote in a
// median; the slot order and the slots after a reaction delay a start by at most an interval or
// a spacing, the fleet's pace and the turns by at most min(peers+1 spacings, Max) beyond its own
// pace; peers alone cannot close a gate, a claimed closed origin gets one
// unpaced start per Max, and they push its probes at most (peers+1)·Max after its own refusal. So
// Wait never blocks forever on a signal. Snapshot counts what was applied and what was dropped.
//
// Measured in virtual time (TestFleetTargets: 1, 4 and 8 gates on a 5/s burst-5 origin with 1ms
// handshakes, requests spread at random, an in-memory bus with ~1ms latency, in the world of the
// bench with worker processes: gates linked 250ms before the load, requests, signals and
// handshakes with the delays measured there; mean of 10 runs, req/s as the bench counts it): a
// 60-burst on 4 gates takes 11.4s with 8.8% of attempts rejected (on their own: 18.0s, 17.1%,
// 56 of 60 served), on 8 gates 11.6s with 8.8% (on their own only 44 of 60 succeed within the
// budget); 10 req/s for 30s serves 4.97 req/s through 4 gates and 4.93 through 8, with 5-6%
// rejected (on their own 3.7 req/s, and 8 gates fail 26 of 300 requests). In that world the
// previous rules (no median, doubling slow start, trust after 300ms) took 15.4s for the 4-gate
// burst with 18.1% rejected, rejected 24.8% on 8 gates, and served 4.25 req/s through 8: what the
// bench showed, and what the ideal world of the first simulations (links a second before the
// load, no delays) hid. 10% lost signals or a flood of 10,000 bogus signals a second change
// little; a gate cut off from the bus serves all its requests, slowly (its requests' wall up to
// 36s: alone, it paces by its own acceptances). Handing a request back when Estimate says it
// would wait over a second longer here than at the best peer showed no clear effect (bursts never
// triggered it; under sustained load its effect on the p95 changed sign from one set of runs to
// the next): demand-weighted shares already serve requests at about one rate wherever they queue.
//
// Measured with `codexpool bench` (worker processes, real NATS, a 2-core machine; 10 runs of
// the final rules), a 60-burst took 12.0-12.4s with 5-7 of ~66 attempts refused on 8 workers,
// and (6 runs) 12.0-12.4s with 4-7 on 4 workers. Before the turns and announced starts: 12.3-13.7s
// with 6-11 and 12.1-12.9s with 4-9; before the median and the gentler slow start: 12.3-13.0s
// with 18-23 on 8 and 12.1-13.1s with 11-15 on 4, and runs of 38.9s and 42s whose requests ran
// out of budget. 10 req/s for 30s served 4.9-5.0 req/s with 5-6% refused.
//
// # Why the defaults are what they are
//
// Measured against a simulated token-bucket origin in virtual time (5/s burst 5, 1/s burst 1,
// unlimited, a rate that changes at run time, and demand at twice the rate for a minute; the
// package's TestSimulatedTargets): an initial window of 2 growing by half a round takes a healthy
// 30-burst in six rounds of handshakes (2+3+4+6+9+14; 13ms in virtual time, 11ms when it
// doubled), and loses 7 upgrades of a 60-burst to a 5/s burst-5 bucket where doubling lost 10;
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
