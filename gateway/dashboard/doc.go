// Package dashboard is the gateway's live operator page, GET /dashboard: workers, accounts, gates,
// jobs, and throughput, latency and errors over the last 15 minutes as charts.
//
// Call New with the gateway's NATS connection, start Run in a goroutine the caller waits for (it
// samples the fleet twice a second until its context ends), and mount the Dashboard as an
// http.Handler under /dashboard (gateway.Config.Dashboard; the gateway checks keys and the
// keyless Host/Origin rules before it is reached). It serves:
//
//   - GET /dashboard: the page (HTML, with its script and style sheet embedded in the binary; no
//     third-party code, no CDN);
//   - GET /dashboard/data: the latest sample as JSON, with the history points after ?since=<unix
//     ms> (all of them without it), which the page polls twice a second.
//
// Data comes only from what the fleet already publishes: every worker's micro STATS
// ($SRV.STATS.codexpool: schemas.Stats) and the JetStream info of
// the jobs stream and its consumer. The history is a ring in memory (a point a second for 15
// minutes by default): nothing is stored, so a restarted gateway starts with an empty chart.
// Nothing the page shows is a secret: the stats carry none, and the gateway's keys are never
// passed to this package.
package dashboard
