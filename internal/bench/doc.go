// Package bench is the load engine behind `codexpool bench` and `codexpool demo`: it starts the
// origin simulator, NATS (unless it joins one) and real worker processes, drives closed-loop
// (requests at a concurrency) or open-loop (arrivals at a rate) load through the Go client,
// checks every answer against the simulator's deterministic one, and measures throughput,
// latency, upgrades, 403s, socket reuse, gate wait and worker memory.
//
// Call [Run] with a [Config]; print its results with [PrintTable] (and [PrintTimeline],
// [PlotSVG]). Scenarios run one after another with fresh worker processes, so one gate mode's
// state never helps another, and ratios between modes come from one run on the same machine.
package bench
