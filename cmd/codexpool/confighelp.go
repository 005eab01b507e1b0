package main

// The help line of every setting, by file key: what `codexpool worker --help`, `codexpool gateway
// --help`, `codexpool config --example` and docs/configuration.md show. Kept here, out of the
// struct tags of config.go, so that a tag line stays short.

// settingHelp is the help of each setting.
var settingHelp = map[string]string{
	"nats.url": "NATS server URL(s), comma-separated; empty: a worker starts an embedded NATS server (or " +
		"joins this user's), every other command connects to nats://127.0.0.1:4222",
	"nats.creds":          "NATS credentials file (user JWT + nkey seed)",
	"nats.nkey":           "NATS nkey seed file",
	"nats.user":           "NATS user name (with CODEXPOOL_NATS_PASSWORD)",
	"nats.password":       "NATS password",
	"nats.token":          "NATS authorization token",
	"nats.tls_ca":         "PEM file of the CA(s) that sign the NATS server's certificate; turns TLS on",
	"nats.tls_cert":       "PEM client certificate for NATS (with CODEXPOOL_NATS_TLS_KEY)",
	"nats.tls_key":        "PEM key of the NATS client certificate",
	"nats.subject":        "subject of generation requests",
	"nats.cancel_subject": "a Codex-Request-Id published here stops that generation (every worker listens)",
	"jobs.subject": "durable jobs: the stream captures JOBS_SUBJECT.>, jobs are published to " +
		"JOBS_SUBJECT.submit",
	"jobs.stream":         "durable jobs: the JetStream stream",
	"jobs.results_bucket": "durable jobs: the KV bucket of results (key = job id)",
	"nats.embedded_addr":  "where the embedded NATS server listens, so clients and more workers can join",
	"nats.queue_group":    "queue group every worker joins",
	"nats.worker_id":      "this worker's id in replies, logs and stats; default <hostname>-<pid>",
	"nats.embedded_store": "JetStream store of the embedded NATS server; default $XDG_STATE_HOME/codexpool/nats " +
		"(~/.local/state/codexpool/nats)",
	"metrics.addr": "where to serve Prometheus /metrics, /healthz and /readyz, e.g. 127.0.0.1:9464; empty = " +
		"off",
	"metrics.usage": "record the usage of requests no gateway records (sent straight over NATS) per account in " +
		"the JetStream stream CODEXPOOL_USAGE, for codexpool usage --by account; off without " +
		"JetStream",
	"jobs.mode": "durable jobs: auto (consume them when the server has JetStream), on (fail at start " +
		"without it), off",
	"jobs.replicas": "replicas of the jobs stream and the results bucket when this worker creates them (3 on a " +
		"cluster)",
	"jobs.dedup":        "the stream's duplicate window: a Nats-Msg-Id seen within it is dropped",
	"jobs.ack_wait":     "a job whose worker went silent this long is delivered again",
	"jobs.max_attempts": "deliveries of a job that fails with 403, 429, 5xx or 504 before its error is the result",
	"jobs.max_ack_pending": "jobs in flight across the pool (the consumer's MaxAckPending): at least the sum of every " +
		"worker's MAX_INFLIGHT",
	"jobs.results_ttl": "how long a job's result stays in the results bucket",
	"accounts.file": "accounts file (YAML or JSON list of {name, auth_file | token | token_env, account_id, " +
		"max_used_percent, max_concurrent}); replaces the " +
		"CODEXPOOL_CODEX_TOKEN/ACCOUNT_ID/AUTH_FILE account",
	"accounts.cooldown": "with CODEXPOOL_ACCOUNTS: how long an account refused for limits or credentials stays out " +
		"when the origin gives no reset time",
	"accounts.sticky": "sticky routing: requests of one session (X-Claude-Code-Session-Id with " +
		"X-Claude-Code-Agent-Id, else session_id, else the body's prompt_cache_key) go to the " +
		"same account, so its prompt cache serves them",
	"accounts.sticky_ttl": "how long a session's binding to an account lasts after its last use (entries of the " +
		"sticky bucket, when this worker creates it)",
	"accounts.sticky_bucket": "JetStream key-value bucket of the pool's session bindings, shared by every worker; " +
		"without JetStream each worker keeps its own",
	"accounts.queue_timeout": "longest a request waits when the accounts it may use are at their max_concurrent " +
		"(accounts file), then 429 worker_busy with retry_after_ms",
	"accounts.lease_ttl": "max_concurrent slots are leases in JetStream, renewed every third of this: a killed " +
		"worker's slots come back this long after (when this worker creates the bucket)",
	"codex.url":        "Codex origin; http(s) and ws(s) accepted",
	"codex.token":      "bearer token (API key or ChatGPT access token)",
	"codex.account_id": "sent as ChatGPT-Account-Id",
	"codex.auth_file": "Codex CLI login, read when no token is set; re-read when it changes, refreshed before it " +
		"expires",
	"codex.refresh_url": "OAuth token endpoint that refreshes the login of the auth file",
	"codex.proxy_url":   "default proxy for every account without its own proxy_url: http://, https://, socks5:// or socks5h://, optional user:password (shown as <redacted>); carries upgrades, the HTTP fallback and token refresh; a failing proxy cools its account down (reason proxy)",
	"codex.client_id":   "OAuth client id sent with a refresh",
	"codex.credentials_key_file": "file holding the credentials key instead of CODEXPOOL_CREDENTIALS_KEY (the same content " +
		"on every worker); with an embedded server and neither set, the state directory's " +
		"credentials.key (made at first start, 0600)",
	"codex.credentials_replicas": "replicas of the credentials bucket when a worker creates it (3 on a cluster)",
	"codex.credentials_bucket": "JetStream key-value bucket through which workers share logins (one refresher at a time, " +
		"rotated tokens to all); used when the server has JetStream",
	"codex.credentials_key": "secret that encrypts and authenticates the tokens in the credentials bucket (the same on " +
		"every worker); empty and no key file = the login is not shared over NATS",
	"codex.ws_retry_after": "after the origin refused WebSockets (426): use HTTP streaming this long, then try a " +
		"WebSocket again",
	"codex.model":             "model used when a request names none",
	"gate.ws_connect_spacing": "the gate's floor: spacing is never relaxed below it",
	"gate.mode": "connect gate: adaptive (congestion control), reference (the rules of the Rust proxy " +
		"codexpool grew out of), fixed (spacing = floor), off (no pacing)",
	"gate.scope": "adaptive gates that share state over NATS: host (workers on this machine with the same " +
		"account), account (every worker with the same account), process (none), or any string " +
		"(workers with the same string and account)",
	"gate.forbidden_budget": "adaptive gate: longest a request keeps retrying refused (403) upgrades, from the first " +
		"refusal",
	"gate.forbidden_cooldown": "reference, fixed and off gates: wait before the one retry after a 403 (adaptive paces " +
		"403 retries through the gate until the request's deadline)",
	"codex.ws_reuse": "keep completed sockets for the next request",
	"nats.reply_prefixes": "comma list: replies, stream events and errors go only to reply subjects (and a job's " +
		"Codex-Reply-To) that start with one of these; anything else is never generated nor " +
		"answered",
	"nats.max_inflight":      "generations this worker runs at once; excess goes to other workers or gets worker_busy",
	"nats.max_request_bytes": "largest request payload; 0 = the NATS server's max payload",
	"nats.request_timeout":   "longest a request may take",
	"codex.connect_timeout":  "one upgrade attempt",
	"codex.idle_timeout":     "longest gap between upstream events (and before the first)",
	"nats.shutdown_grace":    "on SIGTERM: stop taking work, finish in-flight within this",
	"codex.session_idle_timeout": "a session (Codex-Session-Id) idle this long gives its reserved upstream socket back; its " +
		"next continuation gets previous_response_not_found",
	"codex.max_sessions": "most sessions a worker owns (each may hold an upstream socket); a new one beyond it replaces the one idle longest, " +
		"or, when all are in a turn, is handed back to the other workers (429 worker_busy when none has room)",
	"log.level":  "debug, info, warn or error",
	"log.format": "auto (colour text on a terminal, JSON otherwise), text or json",
	"otel.endpoint": "OTLP/HTTP collector base URL for OpenTelemetry traces, e.g. http://127.0.0.1:4318 " +
		"(spans go to /v1/traces); empty = tracing off (trace context is still passed on)",
	"otel.protocol":     "OTLP protocol: http/protobuf (the only one this build exports with)",
	"otel.service_name": "service.name of this process's spans; empty = codexpool-worker or codexpool-gateway",
	"otel.sampler": "always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or " +
		"parentbased_traceidratio",
	"otel.sampler_arg": "the sampling ratio (0 to 1) of the traceidratio samplers; empty = 1",
	"gateway.addr":     "where the gateway listens (host:port); without keys only a loopback address is accepted",
	"gateway.keys": "client keys (Authorization: Bearer <key>), comma-separated, or @/path/to/file with one " +
		"key per line; empty = no authentication, loopback only",
	"gateway.keys_file": "keys file (YAML or JSON): named client keys with per-key limits (requests per minute, " +
		"tokens per 5h/day/week, concurrent requests, models) and admin rights, next to " +
		"GATEWAY_KEYS (those are unlimited, not admin); see docs/usage.md",
	"gateway.usage": "record each request's usage (per key and account, in the JetStream stream " +
		"CODEXPOOL_USAGE) and enforce the keys file's limits across gateways; needs JetStream " +
		"(without it, off, and a keys file with limits is refused)",
	"gateway.models": "models GET /v1/models lists, comma-separated (requests may name any: the workers decide)",
	"gateway.model_map": "maps /v1/messages model names not in GATEWAY_MODELS (e.g. claude-*) to pool models: " +
		"pattern=model,... (path.Match patterns, first match wins); unmatched names get the " +
		"workers' default model",
	"gateway.max_body_bytes":  "largest request body, 413 above it; 0 = the NATS server's max payload",
	"gateway.keepalive":       "a stream silent this long gets an SSE keep-alive comment; a WebSocket gets a ping this often, and is closed after 3 unanswered",
	"gateway.request_timeout": "longest a request may take (the pool request's deadline, sent as Codex-Timeout)",
	"gateway.write_timeout": "longest one write of a stream may wait for a client that does not read; then it is cut " +
		"off and its request cancelled",
	"gateway.unavailable_wait": "how long a request waits for a NATS connection that is down before it is answered 503 " +
		"unavailable with retry-after",
	"gateway.shutdown_grace": "on SIGTERM: stop accepting, let requests and streams in progress finish within this",
}

// gatewayHelp is the gateway's help where it differs from settingHelp.
var gatewayHelp = map[string]string{
	"log.level": "debug (adds request bodies), info (one line per request), warn or error",
}

// Describe is the help of the setting whose file key is key.
func (PoolConfig) Describe(key string) string { return settingHelp[key] }

// Describe is the help of the setting whose file key is key.
func (workerConfig) Describe(key string) string { return settingHelp[key] }

// Describe is the help of the gateway's setting whose file key is key.
func (gatewayConfig) Describe(key string) string {
	if h, ok := gatewayHelp[key]; ok {
		return h
	}
	return settingHelp[key]
}
