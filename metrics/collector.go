package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
)

// snapshots is the collector that turns the pool's snapshots into series at scrape time: one
// group of series per source (Sources), each with its descriptions and what it reads.
type snapshots struct {
	m *Metrics

	info, ready *prometheus.Desc
	service     serviceSeries
	gate        gateSeries
	upstream    upstreamSeries
	accounts    accountSeries
	nats        natsSeries
}

// newDesc describes one codexpool series.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

func newSnapshots(m *Metrics, worker, version string) *snapshots {
	return &snapshots{
		m: m,
		info: prometheus.NewDesc(Namespace+"_worker_info", "Always 1; labels name the worker and its version.",
			nil, prometheus.Labels{"worker": worker, "version": version}),
		ready:    newDesc("ready", "1 when /readyz answers 200: connected to NATS, subscribed and not draining."),
		service:  newServiceSeries(),
		gate:     newGateSeries(),
		upstream: newUpstreamSeries(),
		accounts: newAccountSeries(),
		nats:     newNATSSeries(),
	}
}

func (s *snapshots) Describe(ch chan<- *prometheus.Desc) {
	for _, group := range [][]*prometheus.Desc{
		{s.info, s.ready}, s.service.descs(), s.gate.descs(), s.upstream.descs(), s.accounts.descs(), s.nats.descs(),
	} {
		for _, d := range group {
			ch <- d
		}
	}
}

func (s *snapshots) Collect(ch chan<- prometheus.Metric) {
	e := emit(ch)
	src := s.m.sources()
	e.gauge(s.info, 1)
	e.gauge(s.ready, b(s.m.Ready()))
	if src.Service != nil {
		s.service.collect(e, src.Service())
	}
	if src.Gate != nil {
		s.gate.collect(e, src.Gate())
	}
	if src.Upstream != nil {
		s.upstream.collect(e, src.Upstream())
	}
	if src.Accounts != nil {
		s.accounts.collect(e, src.Accounts(), time.Now())
	}
	if src.NATS != nil {
		s.nats.collect(e, src.NATS)
	}
}

// emit writes constant metrics to a scrape's channel.
type emit chan<- prometheus.Metric

func (e emit) counter(d *prometheus.Desc, v float64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func (e emit) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// b is a boolean as a gauge's value.
func b(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// serviceSeries are read from schemas.ServiceStats.
type serviceSeries struct {
	requests, received, forwarded, busy, noReply *prometheus.Desc
	refused                                      *prometheus.Desc
	inflight, maxInflight, draining              *prometheus.Desc
	jobs, jobsRunning                            *prometheus.Desc
}

func newServiceSeries() serviceSeries {
	return serviceSeries{
		requests:    newDesc("requests_total", "Requests answered, by outcome code: ok, or the contract's error code (refusals, worker_busy and failed generations).", "code"),
		received:    newDesc("requests_received_total", "Messages the service received on the request subject, of any kind."),
		forwarded:   newDesc("forwarded_total", "Requests handed back to the queue group because this worker was full or draining."),
		busy:        newDesc("busy_total", "Requests answered 429 worker_busy after the hop limit."),
		noReply:     newDesc("no_reply_total", "Requests without a reply subject, dropped."),
		refused:     newDesc("refused_total", "Requests and jobs refused without a generation or an answer, by reason: reply_subject (outside CODEXPOOL_REPLY_PREFIXES).", "reason"),
		inflight:    newDesc("inflight", "Generations running now."),
		maxInflight: newDesc("max_inflight", "The configured cap on generations run at once."),
		draining:    newDesc("draining", "1 once shutdown has begun."),
		jobs:        newDesc("jobs_total", "Durable jobs by event: pulled, acked (result written first), skipped (result existed), retried (handed back with a delay), released (handed back at shutdown), terminated (no result possible), redelivered (received again).", "event"),
		jobsRunning: newDesc("jobs_running", "Durable jobs running now (each holds an in-flight slot)."),
	}
}

func (s serviceSeries) descs() []*prometheus.Desc {
	return []*prometheus.Desc{s.requests, s.received, s.forwarded, s.busy, s.noReply, s.refused, s.inflight,
		s.maxInflight, s.draining, s.jobs, s.jobsRunning}
}

func (s serviceSeries) collect(e emit, st schemas.ServiceStats) {
	e.counter(s.requests, float64(st.Completed), "ok")
	for code, n := range st.Errors {
		e.counter(s.requests, float64(n), string(code))
	}
	e.counter(s.received, float64(st.Requests))
	e.counter(s.forwarded, float64(st.Forwarded))
	e.counter(s.busy, float64(st.Busy))
	e.counter(s.noReply, float64(st.NoReply))
	e.counter(s.refused, float64(st.RefusedReply), "reply_subject")
	e.gauge(s.inflight, float64(st.Inflight))
	e.gauge(s.maxInflight, float64(st.MaxInflight))
	e.gauge(s.draining, b(st.Draining))
	if j := st.Jobs; j != nil {
		for event, n := range map[string]uint64{
			"pulled": j.Pulled, "acked": j.Acked, "skipped": j.Skipped, "retried": j.Retried,
			"released": j.Released, "terminated": j.Terminated, "redelivered": j.Redelivered,
		} {
			e.counter(s.jobs, float64(n), event)
		}
		e.gauge(s.jobsRunning, float64(j.Running))
	}
}

// gateSeries are read from the gates' snapshot over all accounts.
type gateSeries struct {
	spacing, waited, starts, rejections *prometheus.Desc
	peers, fleet, closed, signals       *prometheus.Desc
}

func newGateSeries() gateSeries {
	return gateSeries{
		spacing:    newDesc("gate_spacing_seconds", "The connect gate's current spacing between new upstream connections."),
		waited:     newDesc("gate_waited_seconds_total", "Total time callers spent waiting in the connect gate, including cancelled waits."),
		starts:     newDesc("gate_starts_total", "Permits the connect gate granted (every upgrade attempt)."),
		rejections: newDesc("gate_rejections_total", "Origin rejections (403 on the upgrade) reported to the gate."),
		peers:      newDesc("gate_peers", "Gates of other workers sharing this gate's upgrade limit (CODEXPOOL_GATE_SCOPE) heard recently."),
		fleet:      newDesc("gate_fleet_accepted_per_second", "Upgrades accepted per second in the last second, here and at the peers."),
		closed:     newDesc("gate_closed", "1 while the gate sees a closed origin (upgrades refused, none accepted)."),
		signals:    newDesc("gate_signals_total", "Gate-state messages from peers by fate: applied, or dropped as invalid, stale, flooded, from an unknown peer or from one found out (doubted).", "result"),
	}
}

func (s gateSeries) descs() []*prometheus.Desc {
	return []*prometheus.Desc{s.spacing, s.waited, s.starts, s.rejections, s.peers, s.fleet, s.closed, s.signals}
}

func (s gateSeries) collect(e emit, g gate.Snapshot) {
	e.gauge(s.spacing, g.Spacing.Seconds())
	e.counter(s.waited, g.Waited.Seconds())
	e.counter(s.starts, float64(g.Starts))
	e.counter(s.rejections, float64(g.Rejections))
	e.gauge(s.peers, float64(g.Peers))
	e.gauge(s.fleet, g.FleetAccepted)
	e.gauge(s.closed, b(g.Closed))
	for result, n := range map[string]int64{"applied": g.SignalsApplied, "invalid": g.SignalsInvalid,
		"stale": g.SignalsStale, "flooded": g.SignalsFlooded, "unknown": g.SignalsUnknown, "doubted": g.SignalsDoubted} {
		e.counter(s.signals, float64(n), result)
	}
}

// upstreamSeries are read from the Codex clients' counters over all accounts.
type upstreamSeries struct {
	dials, upgrades, retries                    *prometheus.Desc
	socketsOpen, socketsIdle, reused, discarded *prometheus.Desc
	transport, httpResponses, unauthorized      *prometheus.Desc
	refreshes, outOfService                     *prometheus.Desc
}

func newUpstreamSeries() upstreamSeries {
	return upstreamSeries{
		dials:         newDesc("upstream_dials_total", "WebSocket upgrade attempts to the origin."),
		upgrades:      newDesc("upstream_upgrades_total", "Finished upgrade attempts by result: ok, forbidden (403).", "result"),
		retries:       newDesc("upstream_retries_total", "Pooled sockets that failed before the first event; the generation ran again on a new socket."),
		socketsOpen:   newDesc("upstream_sockets_open", "Open upstream sockets (idle and in use)."),
		socketsIdle:   newDesc("upstream_sockets_idle", "Idle pooled upstream sockets."),
		reused:        newDesc("upstream_sockets_reused_total", "Generations run on a pooled socket."),
		discarded:     newDesc("upstream_sockets_discarded_total", "Idle sockets closed because they were found dead or expired."),
		transport:     newDesc("upstream_transport", "1 for the transport new generations use: ws, or http after the origin refused WebSockets (426).", "transport"),
		httpResponses: newDesc("upstream_http_responses_total", "HTTP streaming responses the origin accepted."),
		unauthorized:  newDesc("upstream_unauthorized_total", "401s from the origin (upgrades and HTTP requests)."),
		refreshes:     newDesc("credentials_refreshes_total", "Refreshes of the login this worker made, by result: ok, failed.", "result"),
		outOfService:  newDesc("account_out_of_service", "1 while the login is refused for good (log in again)."),
	}
}

func (s upstreamSeries) descs() []*prometheus.Desc {
	return []*prometheus.Desc{s.dials, s.upgrades, s.retries, s.socketsOpen, s.socketsIdle, s.reused,
		s.discarded, s.transport, s.httpResponses, s.unauthorized, s.refreshes, s.outOfService}
}

func (s upstreamSeries) collect(e emit, u schemas.UpstreamStats) {
	e.counter(s.dials, float64(u.Dials))
	e.counter(s.upgrades, float64(u.Upgrades), "ok")
	e.counter(s.upgrades, float64(u.Forbidden), "forbidden")
	e.counter(s.retries, float64(u.Retries))
	e.gauge(s.socketsOpen, float64(u.Open))
	e.gauge(s.socketsIdle, float64(u.Idle))
	e.counter(s.reused, float64(u.Reused))
	e.counter(s.discarded, float64(u.Discarded+u.Expired))
	e.gauge(s.transport, b(u.Transport != "http"), "ws")
	e.gauge(s.transport, b(u.Transport == "http"), "http")
	e.counter(s.httpResponses, float64(u.HTTPResponses))
	e.counter(s.unauthorized, float64(u.Unauthorized))
	if c := u.Credentials; c != nil {
		e.counter(s.refreshes, float64(c.Refreshes), "ok")
		e.counter(s.refreshes, float64(c.RefreshFailures), "failed")
		e.gauge(s.outOfService, b(c.OutOfService))
	}
}

// accountSeries are the codexpool_account_* series, one per account.
type accountSeries struct {
	used, cooling, cooldown, lastCall, inflight *prometheus.Desc
	requests, completed, rejections, moved      *prometheus.Desc
	upgrades, gateSpacing                       *prometheus.Desc
}

func newAccountSeries() accountSeries {
	return accountSeries{
		used:        newDesc("account_used_percent", "Share of a usage window used, as the origin last reported it, per account, limit family and window length.", "account", "limit", "window_minutes"),
		cooling:     newDesc("account_cooling_down", "1 while the account is cooling down (exhausted or refused): no request goes to it.", "account"),
		cooldown:    newDesc("account_cooldown_seconds", "Seconds left of the account's cooldown; 0 when it is not cooling down.", "account"),
		lastCall:    newDesc("account_last_call", "1 while the next generation could reach the account's max_used_percent: it runs one at a time.", "account"),
		inflight:    newDesc("account_inflight", "Generations running on the account now.", "account"),
		requests:    newDesc("account_requests_total", "Generations started on the account (a request that moved counts on every account it tried).", "account"),
		completed:   newDesc("account_completed_total", "Generations the account completed.", "account"),
		rejections:  newDesc("account_rejections_total", "Generations refused for the account's limits (429) or credentials (401) by the origin, or failed by the account's proxy (unreachable, 407, no answer in time), by reason: limits, credentials, proxy.", "account", "reason"),
		moved:       newDesc("account_moved_total", "Refused generations that moved on to another account.", "account"),
		upgrades:    newDesc("account_upgrades_total", "The account's upgrade attempts by result: ok, forbidden (403).", "account", "result"),
		gateSpacing: newDesc("account_gate_spacing_seconds", "The account's connect gate spacing.", "account"),
	}
}

func (s accountSeries) descs() []*prometheus.Desc {
	return []*prometheus.Desc{s.used, s.cooling, s.cooldown, s.lastCall, s.inflight, s.requests,
		s.completed, s.rejections, s.moved, s.upgrades, s.gateSpacing}
}

func (s accountSeries) collect(e emit, accounts []worker.AccountStats, now time.Time) {
	for _, a := range accounts {
		for _, w := range a.Windows {
			e.gauge(s.used, w.UsedPercent, a.Name, w.Limit, strconv.Itoa(w.Minutes))
		}
		e.gauge(s.cooling, b(a.CoolingDown), a.Name)
		e.gauge(s.cooldown, a.CooldownLeft(now).Seconds(), a.Name)
		e.gauge(s.lastCall, b(a.LastCall), a.Name)
		e.gauge(s.inflight, float64(a.Inflight), a.Name)
		e.counter(s.requests, float64(a.Requests), a.Name)
		e.counter(s.completed, float64(a.Completed), a.Name)
		e.counter(s.rejections, float64(a.Limited), a.Name, "limits")
		e.counter(s.rejections, float64(a.Unauthorized), a.Name, "credentials")
		e.counter(s.rejections, float64(a.Proxy), a.Name, "proxy")
		e.counter(s.moved, float64(a.Moved), a.Name)
		e.counter(s.upgrades, float64(a.Upstream.Upgrades), a.Name, "ok")
		e.counter(s.upgrades, float64(a.Upstream.Forbidden), a.Name, "forbidden")
		e.gauge(s.gateSpacing, a.Gate.Spacing.Seconds(), a.Name)
	}
}

// natsSeries are read from the worker's NATS connection.
type natsSeries struct {
	reconnects, connected *prometheus.Desc
}

func newNATSSeries() natsSeries {
	return natsSeries{
		reconnects: newDesc("nats_reconnects_total", "Reconnections of the worker's NATS connection."),
		connected:  newDesc("nats_connected", "1 while the NATS connection is up."),
	}
}

func (s natsSeries) descs() []*prometheus.Desc { return []*prometheus.Desc{s.reconnects, s.connected} }

func (s natsSeries) collect(e emit, nc NATSConn) {
	e.counter(s.reconnects, float64(nc.Stats().Reconnects))
	e.gauge(s.connected, b(nc.IsConnected()))
}
