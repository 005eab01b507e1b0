package schemas

import "time"

// Stats is the endpoint data of a worker's `$SRV.STATS.codexpool` reply (`nats micro stats
// codexpool`, the contract's "discovery and live stats"): the request service's counters and the
// worker's gate, upstream and accounts, flattened into one JSON object. The worker writes it and
// the gateway, the dashboard, the metrics and `codexpool bench` read it; its JSON field names are
// part of the contract.
type Stats struct {
	ServiceStats
	WorkerStats
}

// ServiceStats are the request service's true counters.
type ServiceStats struct {
	Worker      string `json:"worker"`       // Codex-Worker id
	MaxInflight int    `json:"max_inflight"` // configured cap
	Draining    bool   `json:"draining"`     // shutdown has begun
	Requests    uint64 `json:"requests"`     // messages the handler received, of any kind
	NoReply     uint64 `json:"no_reply"`     // messages without a reply subject, dropped
	// RefusedReply counts requests and jobs whose reply subject (Codex-Reply-To) starts with none
	// of the allowed reply prefixes: never generated, never answered (a job's result is 400).
	RefusedReply uint64 `json:"refused_reply_subject"`
	Forwarded    uint64 `json:"forwarded"` // handed back to the queue group (full or draining)
	Busy         uint64 `json:"busy"`      // answered 429 worker_busy after the last hop
	Started      uint64 `json:"started"`   // generations started
	Inflight     int64  `json:"inflight"`  // generations running now
	Completed    uint64 `json:"completed"` // generations answered successfully
	Failed       uint64 `json:"failed"`    // generations answered with an error
	Cancelled    uint64 `json:"cancelled"` // generations stopped on the cancel subject
	// Errors counts every error reply by contract code: refusals, busy, and failed generations.
	Errors map[Code]uint64 `json:"errors"`
	// LatencySum is the summed time from receipt to the last reply message of finished
	// generations; LatencyAvg is LatencySum / (Completed+Failed).
	LatencySum time.Duration `json:"latency_sum_ns"`
	LatencyAvg time.Duration `json:"latency_avg_ns"`
	// Jobs counts durable jobs; nil when the service does not consume them.
	Jobs *JobStats `json:"jobs,omitempty"`
}

// JobStats are a worker's durable-job counters.
type JobStats struct {
	Pulled      uint64        `json:"pulled"`      // jobs received from the consumer
	Running     int64         `json:"running"`     // jobs running now (each holds a slot)
	Acked       uint64        `json:"acked"`       // finished: result written, then acked
	Skipped     uint64        `json:"skipped"`     // acked without a generation: the result existed
	Retried     uint64        `json:"retried"`     // handed back with a delay after a retryable error
	Terminated  uint64        `json:"terminated"`  // ended without a result: an invalid job id, or a result that could not be stored
	Redelivered uint64        `json:"redelivered"` // received with a delivery count above 1
	Released    uint64        `json:"released"`    // handed back at once (shutdown)
	KVWrites    uint64        `json:"kv_writes"`
	KVWriteSum  time.Duration `json:"kv_write_sum_ns"`
	KVWriteAvg  time.Duration `json:"kv_write_avg_ns"`
}

// WorkerStats are the worker's part of Stats: gate and upstream over all accounts, and every
// account in configuration order.
type WorkerStats struct {
	Gate     GateStats      `json:"gate"`
	Upstream UpstreamStats  `json:"upstream"`
	Accounts []AccountStats `json:"accounts"`
}

// AccountStats is one account of a worker: its usage windows, cooldown, counters, gate and
// upstream counters.
type AccountStats struct {
	Name string `json:"name"`
	// Windows are the usage windows the origin last reported, by family and length.
	Windows     []WindowUsage `json:"windows,omitempty"`
	CoolingDown bool          `json:"cooling_down"`
	*Cooldown                 // only while cooling down
	// LastCall is true when the next generation could reach the account's ceiling: it runs one
	// at a time.
	LastCall       bool    `json:"last_call"`
	MaxUsedPercent float64 `json:"max_used_percent"`
	Inflight       int     `json:"inflight"`

	Requests     int64 `json:"requests"`       // generations started on the account
	Completed    int64 `json:"completed"`      // of those, completed
	Limited      int64 `json:"limited"`        // refused for a usage or rate limit (429)
	Unauthorized int64 `json:"unauthorized"`   // refused for its credentials (401)
	Proxy        int64 `json:"proxy_failures"` // tries its proxy failed (unreachable, 407, no answer in time)
	Moved        int64 `json:"moved"`          // refused ones that moved to another account
	Cooldowns    int64 `json:"cooldowns"`      // cooldowns begun or extended
	// Answered counts requests answered at once, naming this account, because every account was
	// cooling down.
	Answered int64 `json:"answered_cooling"`

	Gate     GateStats     `json:"gate"`
	Upstream UpstreamStats `json:"upstream"`
}

// Cooldown is the cooldown of an account.
type Cooldown struct {
	Until  time.Time `json:"cooldown_until"`
	LeftMS int64     `json:"cooldown_left_ms"` // after the stats were taken
	Reason string    `json:"cooldown_reason"`  // never a secret
}

// WindowUsage is one usage window of an account as the worker knows it.
type WindowUsage struct {
	Limit       string    `json:"limit"`          // limit family, "codex" by default
	Minutes     int       `json:"window_minutes"` // window length; 0 = not reported
	UsedPercent float64   `json:"used_percent"`   // as last reported
	ResetAt     time.Time `json:"reset_at,omitzero"`
	// Projected adds what this worker completed since the report and runs now (the origin's
	// report comes before a response, so it lags by one).
	Projected float64 `json:"projected_percent"`
}

// GateStats is a connect gate's state, durations in milliseconds.
type GateStats struct {
	Mode          string      `json:"mode"` // adaptive, reference, fixed or off
	SpacingMS     int64       `json:"spacing_ms"`
	Streak        int         `json:"streak"`
	Rejections    int64       `json:"rejections"`
	Starts        int64       `json:"starts"`
	WaitedMS      int64       `json:"waited_ms"`
	Successes     int64       `json:"successes"`
	Failures      int64       `json:"failures"`
	Window        int         `json:"window"`
	InFlight      int         `json:"in_flight"`
	Queued        int         `json:"queued"`
	Closed        bool        `json:"closed"`
	Epoch         uint64      `json:"epoch"`
	Peers         int         `json:"peers"`
	FleetAccepted float64     `json:"fleet_accepted_per_s"`
	Signals       GateSignals `json:"signals"`
}

// GateSignals counts the peers' gate-state messages by fate.
type GateSignals struct {
	Applied int64 `json:"applied"`
	Invalid int64 `json:"invalid"`
	Stale   int64 `json:"stale"`
	Flooded int64 `json:"flooded"`
	Unknown int64 `json:"unknown"`
	Doubted int64 `json:"doubted"`
	// PeersDoubted counts peers found out (claims that did not add up), HoldsContradicted the
	// peers' Retry-After holds that an accepted probe ended (see docs/gate-design.md).
	PeersDoubted      int64 `json:"peers_doubted"`
	HoldsContradicted int64 `json:"holds_contradicted"`
}

// UpstreamStats are the counters of a worker's sockets to the origin.
type UpstreamStats struct {
	Dials       int64 `json:"dials"`       // upgrade attempts
	Upgrades    int64 `json:"upgrades"`    // successful upgrades
	Forbidden   int64 `json:"forbidden"`   // upgrades rejected with 403
	Generations int64 `json:"generations"` // generations run
	Completed   int64 `json:"completed"`   // generations that ended with response.completed
	Reused      int64 `json:"reused"`      // generations run on a pooled socket
	Retries     int64 `json:"retries"`     // pooled sockets that failed before the first event and were retried
	Discarded   int64 `json:"discarded"`   // idle sockets found closed or unhealthy
	Expired     int64 `json:"expired"`     // idle sockets closed for idle expiry or age
	Idle        int   `json:"idle"`        // idle pooled sockets now
	Pinned      int   `json:"pinned"`      // sockets reserved for sessions between their turns
	Open        int64 `json:"open"`        // open sockets now (idle and in use)

	// Transport is what a new generation uses now: "ws", or "http" after a 426 until the
	// WebSocket retry time has passed.
	Transport     string `json:"transport"`
	HTTPResponses int64  `json:"http_responses"` // HTTP streaming responses the origin accepted (200)
	HTTPFallbacks int64  `json:"http_fallbacks"` // 426s that switched (or kept) the client on HTTP
	Unauthorized  int64  `json:"unauthorized"`   // 401s from the origin, upgrades and HTTP
	// Credentials are the login's lifecycle counters; nil with a fixed token.
	Credentials *CredentialStats `json:"credentials,omitempty"`
}

// CredentialStats are a login's lifecycle counters (the login file, refreshes, the pool).
type CredentialStats struct {
	Refreshes       int64     `json:"refreshes"`        // refreshes this worker made that succeeded
	RefreshFailures int64     `json:"refresh_failures"` // refreshes this worker made that failed
	Reloads         int64     `json:"reloads"`          // newer tokens read from the auth file
	FromPool        int64     `json:"from_pool"`        // newer tokens received from another worker
	OutOfService    bool      `json:"out_of_service"`   // the login was refused for good: log in again
	Shared          bool      `json:"shared"`           // coordinated with the pool (a coordinator and a key)
	Ignored         int64     `json:"shared_ignored"`   // shared values that did not open under the pool key
	StoreDown       bool      `json:"store_down"`       // the pool's store does not answer: refreshing alone
	StoreOutages    int64     `json:"store_outages"`    // times the pool's store stopped answering
	AloneRefreshes  int64     `json:"alone_refreshes"`  // refreshes made without the pool (its store down)
	ExpiresAt       time.Time `json:"expires_at,omitzero"`
}
