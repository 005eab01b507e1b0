package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// snapshots is the collector that turns the pool's snapshots into series at scrape time.
type snapshots struct {
	m *Metrics

	info, ready                                   *prometheus.Desc
	requests, received, forwarded, busy, noReply  *prometheus.Desc
	inflight, maxInflight, draining               *prometheus.Desc
	gateSpacing, gateWaited, gateStarts, gateRejs *prometheus.Desc
	gatePeers, gateFleet, gateClosed, gateSignals *prometheus.Desc
	dials, upgrades, retries                      *prometheus.Desc
	socketsOpen, socketsIdle, reused, discarded   *prometheus.Desc
	natsReconnects, natsConnected                 *prometheus.Desc
	jobs, jobsRunning                             *prometheus.Desc
	transport, httpResponses, unauthorized        *prometheus.Desc
	refreshes, outOfService                       *prometheus.Desc
	refused                                       *prometheus.Desc

	acctUsed, acctCooling, acctCooldown, acctLastCall, acctInflight *prometheus.Desc
	acctRequests, acctCompleted, acctRejections, acctMoved          *prometheus.Desc
	acctUpgrades, acctGateSpacing                                   *prometheus.Desc
}

func newSnapshots(m *Metrics, worker, version string) *snapshots {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
	}
	return &snapshots{
		m: m,
		info: prometheus.NewDesc(Namespace+"_worker_info", "Always 1; labels name the worker and its version.",
			nil, prometheus.Labels{"worker": worker, "version": version}),
		ready: d("ready", "1 when /readyz answers 200: connected to NATS, subscribed and not draining."),

		requests:    d("requests_total", "Requests answered, by outcome code: ok, or the contract's error code (refusals, worker_busy and failed generations).", "code"),
		received:    d("requests_received_total", "Messages the service received on the request subject, of any kind."),
		forwarded:   d("forwarded_total", "Requests handed back to the queue group because this worker was full or draining."),
		busy:        d("busy_total", "Requests answered 429 worker_busy after the hop limit."),
		noReply:     d("no_reply_total", "Requests without a reply subject, dropped."),
		refused:     d("refused_total", "Requests and jobs refused without a generation or an answer, by reason: reply_subject (outside CODEXPOOL_REPLY_PREFIXES).", "reason"),
		inflight:    d("inflight", "Generations running now."),
		maxInflight: d("max_inflight", "The configured cap on generations run at once."),
		draining:    d("draining", "1 once shutdown has begun."),

		gateSpacing: d("gate_spacing_seconds", "The connect gate's current spacing between new upstream connections."),
		gateWaited:  d("gate_waited_seconds_total", "Total time callers spent waiting in the connect gate, including cancelled waits."),
		gateStarts:  d("gate_starts_total", "Permits the connect gate granted (every upgrade attempt)."),
		gateRejs:    d("gate_rejections_total", "Origin rejections (403 on the upgrade) reported to the gate."),
		gatePeers:   d("gate_peers", "Gates of other workers sharing this gate's upgrade limit (CODEXPOOL_GATE_SCOPE) heard recently."),
		gateFleet:   d("gate_fleet_accepted_per_second", "Upgrades accepted per second in the last second, here and at the peers."),
		gateClosed:  d("gate_closed", "1 while the gate sees a closed origin (upgrades refused, none accepted)."),
		gateSignals: d("gate_signals_total", "Gate-state messages from peers by fate: applied, or dropped as invalid, stale, flooded or from an unknown peer.", "result"),

		dials:    d("upstream_dials_total", "WebSocket upgrade attempts to the origin."),
		upgrades: d("upstream_upgrades_total", "Finished upgrade attempts by result: ok, forbidden (403).", "result"),
		retries:  d("upstream_retries_total", "Pooled sockets that failed before the first event; the generation ran again on a new socket."),

		socketsOpen: d("upstream_sockets_open", "Open upstream sockets (idle and in use)."),
		socketsIdle: d("upstream_sockets_idle", "Idle pooled upstream sockets."),
		reused:      d("upstream_sockets_reused_total", "Generations run on a pooled socket."),
		discarded:   d("upstream_sockets_discarded_total", "Idle sockets closed because they were found dead or expired."),

		transport:     d("upstream_transport", "1 for the transport new generations use: ws, or http after the origin refused WebSockets (426).", "transport"),
		httpResponses: d("upstream_http_responses_total", "HTTP streaming responses the origin accepted."),
		unauthorized:  d("upstream_unauthorized_total", "401s from the origin (upgrades and HTTP requests)."),
		refreshes:     d("credentials_refreshes_total", "Refreshes of the login this worker made, by result: ok, failed.", "result"),
		outOfService:  d("account_out_of_service", "1 while the login is refused for good (log in again)."),

		natsReconnects: d("nats_reconnects_total", "Reconnections of the worker's NATS connection."),
		natsConnected:  d("nats_connected", "1 while the NATS connection is up."),

		jobs:            d("jobs_total", "Durable jobs by event: pulled, acked (result written first), skipped (result existed), retried (handed back with a delay), released (handed back at shutdown), terminated (no result possible), redelivered (received again).", "event"),
		jobsRunning:     d("jobs_running", "Durable jobs running now (each holds an in-flight slot)."),
		acctUsed:        d("account_used_percent", "Share of a usage window used, as the origin last reported it, per account, limit family and window length.", "account", "limit", "window_minutes"),
		acctCooling:     d("account_cooling_down", "1 while the account is cooling down (exhausted or refused): no request goes to it.", "account"),
		acctCooldown:    d("account_cooldown_seconds", "Seconds left of the account's cooldown; 0 when it is not cooling down.", "account"),
		acctLastCall:    d("account_last_call", "1 while the next generation could reach the account's max_used_percent: it runs one at a time.", "account"),
		acctInflight:    d("account_inflight", "Generations running on the account now.", "account"),
		acctRequests:    d("account_requests_total", "Generations started on the account (a request that moved counts on every account it tried).", "account"),
		acctCompleted:   d("account_completed_total", "Generations the account completed.", "account"),
		acctRejections:  d("account_rejections_total", "Generations the origin refused for the account's limits (429) or credentials (401), by reason: limits, credentials.", "account", "reason"),
		acctMoved:       d("account_moved_total", "Refused generations that moved on to another account.", "account"),
		acctUpgrades:    d("account_upgrades_total", "The account's upgrade attempts by result: ok, forbidden (403).", "account", "result"),
		acctGateSpacing: d("account_gate_spacing_seconds", "The account's connect gate spacing.", "account"),
	}
}

func (s *snapshots) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		s.info, s.ready, s.requests, s.received, s.forwarded, s.busy, s.noReply, s.inflight,
		s.maxInflight, s.draining, s.gateSpacing, s.gateWaited, s.gateStarts, s.gateRejs, s.dials,
		s.gatePeers, s.gateFleet, s.gateClosed, s.gateSignals,
		s.upgrades, s.retries, s.socketsOpen, s.socketsIdle, s.reused, s.discarded,
		s.natsReconnects, s.natsConnected, s.jobs, s.jobsRunning,
		s.transport, s.httpResponses, s.unauthorized, s.refreshes, s.outOfService, s.refused,
		s.acctUsed, s.acctCooling, s.acctCooldown, s.acctLastCall, s.acctInflight, s.acctRequests,
		s.acctCompleted, s.acctRejections, s.acctMoved, s.acctUpgrades, s.acctGateSpacing,
	} {
		ch <- d
	}
}

func (s *snapshots) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	src := s.m.sources()
	gauge(s.info, 1)
	gauge(s.ready, b(s.m.Ready()))

	if src.Service != nil {
		st := src.Service()
		counter(s.requests, float64(st.Completed), "ok")
		for code, n := range st.Errors {
			counter(s.requests, float64(n), string(code))
		}
		counter(s.received, float64(st.Requests))
		counter(s.forwarded, float64(st.Forwarded))
		counter(s.busy, float64(st.Busy))
		counter(s.noReply, float64(st.NoReply))
		counter(s.refused, float64(st.RefusedReply), "reply_subject")
		gauge(s.inflight, float64(st.Inflight))
		gauge(s.maxInflight, float64(st.MaxInflight))
		gauge(s.draining, b(st.Draining))
		if j := st.Jobs; j != nil {
			for event, n := range map[string]uint64{
				"pulled": j.Pulled, "acked": j.Acked, "skipped": j.Skipped, "retried": j.Retried,
				"released": j.Released, "terminated": j.Terminated, "redelivered": j.Redelivered,
			} {
				counter(s.jobs, float64(n), event)
			}
			gauge(s.jobsRunning, float64(j.Running))
		}
	}
	if src.Gate != nil {
		g := src.Gate()
		gauge(s.gateSpacing, g.Spacing.Seconds())
		counter(s.gateWaited, g.Waited.Seconds())
		counter(s.gateStarts, float64(g.Starts))
		counter(s.gateRejs, float64(g.Rejections))
		gauge(s.gatePeers, float64(g.Peers))
		gauge(s.gateFleet, g.FleetAccepted)
		gauge(s.gateClosed, b(g.Closed))
		for result, n := range map[string]int64{"applied": g.SignalsApplied, "invalid": g.SignalsInvalid,
			"stale": g.SignalsStale, "flooded": g.SignalsFlooded, "unknown": g.SignalsUnknown} {
			counter(s.gateSignals, float64(n), result)
		}
	}
	if src.Upstream != nil {
		u := src.Upstream()
		counter(s.dials, float64(u.Dials))
		counter(s.upgrades, float64(u.Upgrades), "ok")
		counter(s.upgrades, float64(u.Forbidden), "forbidden")
		counter(s.retries, float64(u.Retries))
		gauge(s.socketsOpen, float64(u.Open))
		gauge(s.socketsIdle, float64(u.Idle))
		counter(s.reused, float64(u.Reused))
		counter(s.discarded, float64(u.Discarded+u.Expired))
		gauge(s.transport, b(u.Transport != "http"), "ws")
		gauge(s.transport, b(u.Transport == "http"), "http")
		counter(s.httpResponses, float64(u.HTTPResponses))
		counter(s.unauthorized, float64(u.Unauthorized))
		if c := u.Credentials; c != nil {
			counter(s.refreshes, float64(c.Refreshes), "ok")
			counter(s.refreshes, float64(c.RefreshFailures), "failed")
			gauge(s.outOfService, b(c.OutOfService))
		}
	}
	if src.Accounts != nil {
		now := time.Now()
		for _, a := range src.Accounts() {
			for _, w := range a.Windows {
				gauge(s.acctUsed, w.UsedPercent, a.Name, w.Limit, strconv.Itoa(w.Minutes))
			}
			gauge(s.acctCooling, b(a.CoolingDown), a.Name)
			gauge(s.acctCooldown, a.CooldownLeft(now).Seconds(), a.Name)
			gauge(s.acctLastCall, b(a.LastCall), a.Name)
			gauge(s.acctInflight, float64(a.Inflight), a.Name)
			counter(s.acctRequests, float64(a.Requests), a.Name)
			counter(s.acctCompleted, float64(a.Completed), a.Name)
			counter(s.acctRejections, float64(a.Limited), a.Name, "limits")
			counter(s.acctRejections, float64(a.Unauthorized), a.Name, "credentials")
			counter(s.acctMoved, float64(a.Moved), a.Name)
			counter(s.acctUpgrades, float64(a.Upstream.Upgrades), a.Name, "ok")
			counter(s.acctUpgrades, float64(a.Upstream.Forbidden), a.Name, "forbidden")
			gauge(s.acctGateSpacing, a.Gate.Spacing.Seconds(), a.Name)
		}
	}
	if src.NATS != nil {
		counter(s.natsReconnects, float64(src.NATS.Stats().Reconnects))
		gauge(s.natsConnected, b(src.NATS.IsConnected()))
	}
}
