package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/internal/config"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker"
)

// envPrefix is the prefix of every setting's environment variable.
const envPrefix = "CODEXPOOL"

// The process configuration comes in three layers, each overriding the one before: the defaults
// (written once, in defaultPoolConfig, defaultWorkerConfig and defaultGatewayConfig), the
// codexpool.yaml file (--config or CODEXPOOL_CONFIG) and the CODEXPOOL_* environment variables,
// read through run's getenv. internal/config does the loading from one set of field tags: env
// (the variable), key (the file's section.name), desc, secret and ms (an older variable in
// milliseconds). The tags are the single source of the settings tables that `codexpool worker
// --help` prints and that README.md and docker-compose.yml are checked against. Library packages
// take plain values; only this package knows the variable names and the file keys.

// sectionOrder is the order of the file's sections.
var sectionOrder = []string{"nats", "codex", "accounts", "gate", "jobs", "gateway", "metrics", "log"}

// loader reads settings through getenv; any key of any subcommand is valid in the file.
func loader(getenv func(string) string) config.Loader {
	return config.Loader{Prefix: envPrefix, Getenv: getenv, Known: []any{&workerConfig{}, &gatewayConfig{}}}
}

// otherVariables are the CODEXPOOL_* variables that are read on purpose yet are no setting:
// they never get the unknown-variable warning.
var otherVariables = []string{
	envPrefix + "_CONFIG",        // the settings file, like --config
	envPrefix + "_GATEWAY_KEY",   // README's env_key of the Codex CLI: a client's key (the gateway refuses it)
	envPrefix + "_GATEWAY_URL",   // examples/openai-node: the gateway's URL for the SDK
	envPrefix + "_EXPECT_ANSWER", // examples/openai-node
	envPrefix + "_SOAK",          // test knobs
	envPrefix + "_OUTAGE",
	envPrefix + "_TEST_CODEX_CLI",
}

// gatewayKeysVar is the gateway's client keys setting, whose misspellings must never start a
// gateway: it would serve without authentication.
const gatewayKeysVar = envPrefix + "_GATEWAY_KEYS"

// checkEnviron warns (through warn) about each CODEXPOOL_* variable that no setting reads, besides
// otherVariables and the token_env names of the accounts file at accounts ("" = none). For the
// gateway, CODEXPOOL_GATEWAY_KEY and any unknown variable whose closest setting is
// CODEXPOOL_GATEWAY_KEYS are an error instead.
func checkEnviron(e env, cmd, accounts string, warn func(string)) error {
	if cmd == "gateway" && e.getenv(envPrefix+"_GATEWAY_KEY") != "" {
		return fmt.Errorf("gateway: %s_GATEWAY_KEY is set, but the gateway reads its client keys from %s (plural): "+
			"set %s instead (a gateway without keys serves without authentication); %s_GATEWAY_KEY is only a client's "+
			"variable, such as the Codex CLI's env_key: keep it out of the gateway's environment",
			envPrefix, gatewayKeysVar, gatewayKeysVar, envPrefix)
	}
	if e.environ == nil {
		return nil
	}
	unknown, err := loader(e.getenv).UnknownVars(e.environ(), append(tokenEnvNames(accounts), otherVariables...))
	if err != nil {
		return err
	}
	for _, u := range unknown {
		if cmd == "gateway" && u.Closest == gatewayKeysVar {
			return fmt.Errorf("gateway: %s is not a setting: did you mean %s? The gateway does not start with a misspelt key "+
				"setting, as it would serve without authentication", u.Var, u.Closest)
		}
		warn(fmt.Sprintf("%s is not a setting and is ignored: did you mean %s?", u.Var, u.Closest))
	}
	return nil
}

// tokenEnvNames returns the variables the accounts file at path names with token_env: they are
// read by name, not settings. nil without a file or when it cannot be read.
func tokenEnvNames(path string) []string {
	if path == "" {
		return nil
	}
	var names []string
	_, _ = worker.LoadAccounts(path, func(name string) string {
		names = append(names, name)
		return "set" // any value: only the names matter here
	})
	return names
}

// fieldError is a bad value of the variable CODEXPOOL_<name>, reported by the subcommand cmd.
func fieldError(cmd, name, format string, args ...any) error {
	return &config.FieldError{Prefix: cmd, Env: envPrefix + "_" + name, Msg: fmt.Sprintf(format, args...)}
}

// PoolConfig is how a process reaches the pool: the NATS server list, authentication and TLS, and
// the subjects. Every subcommand that connects (worker, ask, and the pool's other clients) reads it.
type PoolConfig struct {
	NATSURL       string `env:"NATS_URL" key:"nats.url" secret:"url" desc:"NATS server URL(s), comma-separated; empty: a worker starts an embedded NATS server (or joins this user's), every other command connects to nats://127.0.0.1:4222"`
	NATSCreds     string `env:"NATS_CREDS" key:"nats.creds" desc:"NATS credentials file (user JWT + nkey seed)"`
	NATSNKey      string `env:"NATS_NKEY" key:"nats.nkey" desc:"NATS nkey seed file"`
	NATSUser      string `env:"NATS_USER" key:"nats.user" desc:"NATS user name (with CODEXPOOL_NATS_PASSWORD)"`
	NATSPassword  string `env:"NATS_PASSWORD" key:"nats.password" secret:"true" desc:"NATS password"`
	NATSToken     string `env:"NATS_TOKEN" key:"nats.token" secret:"true" desc:"NATS authorization token"`
	NATSTLSCA     string `env:"NATS_TLS_CA" key:"nats.tls_ca" desc:"PEM file of the CA(s) that sign the NATS server's certificate; turns TLS on"`
	NATSTLSCert   string `env:"NATS_TLS_CERT" key:"nats.tls_cert" desc:"PEM client certificate for NATS (with CODEXPOOL_NATS_TLS_KEY)"`
	NATSTLSKey    string `env:"NATS_TLS_KEY" key:"nats.tls_key" desc:"PEM key of the NATS client certificate"`
	Subject       string `env:"SUBJECT" key:"nats.subject" desc:"subject of generation requests"`
	CancelSubject string `env:"CANCEL_SUBJECT" key:"nats.cancel_subject" desc:"a Codex-Request-Id published here stops that generation (every worker listens)"`

	JobsSubject   string `env:"JOBS_SUBJECT" key:"jobs.subject" desc:"durable jobs: the stream captures JOBS_SUBJECT.>, jobs are published to JOBS_SUBJECT.submit"`
	JobsStream    string `env:"JOBS_STREAM" key:"jobs.stream" desc:"durable jobs: the JetStream stream"`
	ResultsBucket string `env:"RESULTS_BUCKET" key:"jobs.results_bucket" desc:"durable jobs: the KV bucket of results (key = job id)"`
}

// defaultPoolConfig returns the documented defaults of the pool settings.
func defaultPoolConfig() PoolConfig {
	return PoolConfig{Subject: "codex.generate", CancelSubject: "codex.cancel", JobsSubject: "codex.jobs",
		JobsStream: "CODEXPOOL_JOBS", ResultsBucket: "CODEXPOOL_RESULTS"}
}

// loadPoolConfig reads the pool settings of a client subcommand (fs names it) from its settings
// file and the environment.
func loadPoolConfig(e env, fs *flags) (PoolConfig, error) {
	cmd := fs.Name()
	c := defaultPoolConfig()
	st, err := loader(e.getenv).Load(&c, fs.configPath(e))
	if err != nil {
		return c, fmt.Errorf("%s: %w", cmd, err)
	}
	err = checkEnviron(e, cmd, e.getenv(envPrefix+"_ACCOUNTS"), func(msg string) {
		fmt.Fprintf(e.stderr, "codexpool %s: warning: %s\n", cmd, msg)
	})
	if err != nil {
		return c, err
	}
	return c, st.Explain(c.validate(cmd))
}

// validate checks the subjects and names.
func (c PoolConfig) validate(cmd string) error {
	for _, v := range []struct{ name, value string }{
		{"SUBJECT", c.Subject}, {"CANCEL_SUBJECT", c.CancelSubject}, {"JOBS_SUBJECT", c.JobsSubject},
	} {
		if v.value == "" || strings.ContainsAny(v.value, " \t\r\n*>") {
			return fieldError(cmd, v.name, "must be a NATS subject without wildcards, got %q", v.value)
		}
	}
	// The jobs stream captures JOBS_SUBJECT.>: no other subject of the pool may fall under it.
	for _, v := range []struct{ name, value string }{
		{"SUBJECT", c.Subject}, {"CANCEL_SUBJECT", c.CancelSubject}, {"the gate-state subjects", queue.GateSubjectPrefix + ".x"},
	} {
		if strings.HasPrefix(v.value, c.JobsSubject+".") {
			return fieldError(cmd, "JOBS_SUBJECT", "%q would capture %s (%s) into the jobs stream; choose a prefix of its own",
				c.JobsSubject, v.name, v.value)
		}
	}
	if c.Subject == c.CancelSubject {
		return fieldError(cmd, "CANCEL_SUBJECT", "must differ from %s_SUBJECT (%q)", envPrefix, c.Subject)
	}
	for _, v := range []struct{ name, value string }{
		{"JOBS_STREAM", c.JobsStream}, {"RESULTS_BUCKET", c.ResultsBucket},
	} {
		if !validName(v.value) {
			return fieldError(cmd, v.name, "must be letters, digits, - and _, got %q", v.value)
		}
	}
	return nil
}

// validName reports whether s is a valid JetStream stream or KV bucket name.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// dial connects a command-line client to url (default: the configured server, else the local
// default), failing fast instead of retrying: a person is waiting.
func (c PoolConfig) dial(getenv func(string) string, name, url string) (*nats.Conn, error) {
	if url == "" {
		url = c.NATSURL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	opts, err := c.natsOptions(getenv, url)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name(name), nats.Timeout(5*time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w%s%s", queue.RedactURL(url), err, c.authHint(getenv, err), noServerHint(err))
	}
	return nc, nil
}

// noServerHint says how to get a server when none answered: most likely no worker runs yet.
func noServerHint(err error) string {
	if !errors.Is(err, nats.ErrNoServers) {
		return ""
	}
	return " (is a worker running? start one with `codexpool worker`, or set " + envPrefix + "_NATS_URL)"
}

// authHint says how to get in when a server refused a client that had no credential of its own:
// most likely a worker's embedded server, which admits its user's commands only.
func (c PoolConfig) authHint(getenv func(string) string, err error) string {
	if !errors.Is(err, nats.ErrAuthorization) || c.security().Kind() != "none" {
		return ""
	}
	return fmt.Sprintf(" (a worker's embedded server admits only clients with the credential in %s: run as the same user with the same XDG_STATE_HOME, or set CODEXPOOL_NATS_USER=%s and CODEXPOOL_NATS_PASSWORD to its content)",
		localAuthPath(getenv), queue.LocalUser)
}

// natsOptions are the connection options for the servers at url: the settings' authentication and
// TLS or, with none set and url on loopback, the credential of this user's embedded server.
func (c PoolConfig) natsOptions(getenv func(string) string, url string) ([]nats.Option, error) {
	sec, err := c.security().LocalAuth(url, localAuthPath(getenv))
	if err != nil {
		return nil, err
	}
	return sec.Options()
}

// stateDir is codexpool's state directory: $XDG_STATE_HOME/codexpool, else
// ~/.local/state/codexpool.
func stateDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "codexpool")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "codexpool")
	}
	return filepath.Join(os.TempDir(), "codexpool-state")
}

// localAuthPath is the file of the embedded server's credential, which every local command reads.
func localAuthPath(getenv func(string) string) string {
	return filepath.Join(stateDir(getenv), queue.LocalAuthFileName)
}

// security maps the settings to queue.Security. Secret values are never logged.
func (c PoolConfig) security() queue.Security {
	return queue.Security{
		CredsFile: c.NATSCreds, NKeyFile: c.NATSNKey, User: c.NATSUser, Password: c.NATSPassword,
		Token: c.NATSToken, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey,
	}
}

// workerConfig is `codexpool worker`'s configuration.
type workerConfig struct {
	PoolConfig
	EmbeddedNATSAddr string `env:"EMBEDDED_NATS_ADDR" key:"nats.embedded_addr" desc:"where the embedded NATS server listens, so clients and more workers can join"`
	QueueGroup       string `env:"QUEUE_GROUP" key:"nats.queue_group" desc:"queue group every worker joins"`
	WorkerID         string `env:"WORKER_ID" key:"nats.worker_id" desc:"this worker's id in replies, logs and stats; default <hostname>-<pid>"`

	EmbeddedNATSStore string `env:"EMBEDDED_NATS_STORE" key:"nats.embedded_store" desc:"JetStream store of the embedded NATS server; default $XDG_STATE_HOME/codexpool/nats (~/.local/state/codexpool/nats)"`

	MetricsAddr string `env:"METRICS_ADDR" key:"metrics.addr" desc:"where to serve Prometheus /metrics, /healthz and /readyz, e.g. 127.0.0.1:9464; empty = off"`
	Usage       bool   `env:"USAGE" key:"metrics.usage" desc:"record the usage of requests no gateway records (sent straight over NATS) per account in the JetStream stream CODEXPOOL_USAGE, for codexpool usage --by account; off without JetStream"`

	Jobs                string        `env:"JOBS" key:"jobs.mode" desc:"durable jobs: auto (consume them when the server has JetStream), on (fail at start without it), off"`
	JobsReplicas        int           `env:"JOBS_REPLICAS" key:"jobs.replicas" desc:"replicas of the jobs stream and the results bucket when this worker creates them (3 on a cluster)"`
	JobsDedup           time.Duration `env:"JOBS_DEDUP" key:"jobs.dedup" desc:"the stream's duplicate window: a Nats-Msg-Id seen within it is dropped"`
	JobsAckWait         time.Duration `env:"JOBS_ACK_WAIT" key:"jobs.ack_wait" desc:"a job whose worker went silent this long is delivered again"`
	JobsMaxAttempts     int           `env:"JOBS_MAX_ATTEMPTS" key:"jobs.max_attempts" desc:"deliveries of a job that fails with 403, 429, 5xx or 504 before its error is the result"`
	JobsMaxAckPending   int           `env:"JOBS_MAX_ACK_PENDING" key:"jobs.max_ack_pending" desc:"jobs in flight across the pool (the consumer's MaxAckPending): at least the sum of every worker's MAX_INFLIGHT"`
	ResultsTTL          time.Duration `env:"RESULTS_TTL" key:"jobs.results_ttl" desc:"how long a job's result stays in the results bucket"`
	Accounts            string        `env:"ACCOUNTS" key:"accounts.file" desc:"accounts file (YAML or JSON list of {name, auth_file | token | token_env, account_id, max_used_percent, max_concurrent}); replaces the CODEXPOOL_CODEX_TOKEN/ACCOUNT_ID/AUTH_FILE account"`
	AccountCooldown     time.Duration `env:"ACCOUNT_COOLDOWN" key:"accounts.cooldown" desc:"with CODEXPOOL_ACCOUNTS: how long an account refused for limits or credentials stays out when the origin gives no reset time"`
	Sticky              bool          `env:"STICKY" key:"accounts.sticky" desc:"sticky routing: requests of one session (X-Claude-Code-Session-Id with X-Claude-Code-Agent-Id, else session_id, else the body's prompt_cache_key) go to the same account, so its prompt cache serves them"`
	StickyTTL           time.Duration `env:"STICKY_TTL" key:"accounts.sticky_ttl" desc:"how long a session's binding to an account lasts after its last use (entries of the sticky bucket, when this worker creates it)"`
	StickyBucket        string        `env:"STICKY_BUCKET" key:"accounts.sticky_bucket" desc:"JetStream key-value bucket of the pool's session bindings, shared by every worker; without JetStream each worker keeps its own"`
	AccountQueueTimeout time.Duration `env:"ACCOUNT_QUEUE_TIMEOUT" key:"accounts.queue_timeout" desc:"longest a request waits when the accounts it may use are at their max_concurrent (accounts file), then 429 worker_busy with retry_after_ms"`
	AccountLeaseTTL     time.Duration `env:"ACCOUNT_LEASE_TTL" key:"accounts.lease_ttl" desc:"max_concurrent slots are leases in JetStream, renewed every third of this: a killed worker's slots come back this long after (when this worker creates the bucket)"`

	CodexURL            string        `env:"CODEX_URL" key:"codex.url" desc:"Codex origin; http(s) and ws(s) accepted"`
	CodexToken          string        `env:"CODEX_TOKEN" key:"codex.token" secret:"true" desc:"bearer token (API key or ChatGPT access token)"`
	CodexAccountID      string        `env:"CODEX_ACCOUNT_ID" key:"codex.account_id" desc:"sent as ChatGPT-Account-Id"`
	CodexAuthFile       string        `env:"CODEX_AUTH_FILE" key:"codex.auth_file" desc:"Codex CLI login, read when no token is set; re-read when it changes, refreshed before it expires"`
	CodexRefreshURL     string        `env:"CODEX_REFRESH_URL" key:"codex.refresh_url" desc:"OAuth token endpoint that refreshes the login of the auth file"`
	CodexClientID       string        `env:"CODEX_CLIENT_ID" key:"codex.client_id" desc:"OAuth client id sent with a refresh"`
	CredentialsKeyFile  string        `env:"CREDENTIALS_KEY_FILE" key:"codex.credentials_key_file" desc:"file holding the credentials key instead of CODEXPOOL_CREDENTIALS_KEY (the same content on every worker); with an embedded server and neither set, the state directory's credentials.key (made at first start, 0600)"`
	CredentialsReplicas int           `env:"CREDENTIALS_REPLICAS" key:"codex.credentials_replicas" desc:"replicas of the credentials bucket when a worker creates it (3 on a cluster)"`
	CredentialsBucket   string        `env:"CREDENTIALS_BUCKET" key:"codex.credentials_bucket" desc:"JetStream key-value bucket through which workers share logins (one refresher at a time, rotated tokens to all); used when the server has JetStream"`
	CredentialsKey      string        `env:"CREDENTIALS_KEY" key:"codex.credentials_key" secret:"true" desc:"secret that encrypts and authenticates the tokens in the credentials bucket (the same on every worker); empty and no key file = the login is not shared over NATS"`
	WSRetryAfter        time.Duration `env:"WS_RETRY_AFTER" key:"codex.ws_retry_after" desc:"after the origin refused WebSockets (426): use HTTP streaming this long, then try a WebSocket again"`
	Model               string        `env:"MODEL" key:"codex.model" desc:"model used when a request names none"`

	WSConnectSpacing  time.Duration `env:"WS_CONNECT_SPACING" ms:"WS_CONNECT_SPACING_MS" key:"gate.ws_connect_spacing" desc:"the gate's floor: spacing is never relaxed below it"`
	Gate              string        `env:"GATE" key:"gate.mode" desc:"connect gate: adaptive (congestion control), reference (the rules of the Rust proxy codexpool grew out of), fixed (spacing = floor), off (no pacing)"`
	GateScope         string        `env:"GATE_SCOPE" key:"gate.scope" desc:"adaptive gates that share state over NATS: host (workers on this machine with the same account), account (every worker with the same account), process (none), or any string (workers with the same string and account)"`
	ForbiddenBudget   time.Duration `env:"FORBIDDEN_BUDGET" key:"gate.forbidden_budget" desc:"adaptive gate: longest a request keeps retrying refused (403) upgrades, from the first refusal"`
	ForbiddenCooldown time.Duration `env:"FORBIDDEN_COOLDOWN" ms:"FORBIDDEN_COOLDOWN_MS" key:"gate.forbidden_cooldown" desc:"reference, fixed and off gates: wait before the one retry after a 403 (adaptive paces 403 retries through the gate until the request's deadline)"`
	WSReuse           bool          `env:"WS_REUSE" key:"codex.ws_reuse" desc:"keep completed sockets for the next request"`

	ReplyPrefixes   string        `env:"REPLY_PREFIXES" key:"nats.reply_prefixes" desc:"comma list: replies, stream events and errors go only to reply subjects (and a job's Codex-Reply-To) that start with one of these; anything else is never generated nor answered"`
	MaxInflight     int           `env:"MAX_INFLIGHT" key:"nats.max_inflight" desc:"generations this worker runs at once; excess goes to other workers or gets worker_busy"`
	MaxRequestBytes int           `env:"MAX_REQUEST_BYTES" key:"nats.max_request_bytes" desc:"largest request payload; 0 = the NATS server's max payload"`
	RequestTimeout  time.Duration `env:"REQUEST_TIMEOUT" key:"nats.request_timeout" desc:"longest a request may take"`
	ConnectTimeout  time.Duration `env:"CONNECT_TIMEOUT" key:"codex.connect_timeout" desc:"one upgrade attempt"`
	IdleTimeout     time.Duration `env:"IDLE_TIMEOUT" key:"codex.idle_timeout" desc:"longest gap between upstream events (and before the first)"`
	ShutdownGrace   time.Duration `env:"SHUTDOWN_GRACE" key:"nats.shutdown_grace" desc:"on SIGTERM: stop taking work, finish in-flight within this"`
	SessionIdle     time.Duration `env:"SESSION_IDLE_TIMEOUT" key:"codex.session_idle_timeout" desc:"a session (Codex-Session-Id) idle this long gives its reserved upstream socket back; its next continuation gets previous_response_not_found"`

	LogLevel  string `env:"LOG_LEVEL" key:"log.level" desc:"debug, info, warn or error"`
	LogFormat string `env:"LOG_FORMAT" key:"log.format" desc:"auto (colour text on a terminal, JSON otherwise), text or json"`
}

// defaultWorkerConfig returns the documented defaults of `codexpool worker`.
func defaultWorkerConfig() workerConfig {
	return workerConfig{
		PoolConfig: defaultPoolConfig(),
		Jobs:       "auto", JobsReplicas: 1, JobsDedup: 2 * time.Minute, JobsAckWait: 60 * time.Second,
		JobsMaxAttempts: 5, JobsMaxAckPending: 10000, ResultsTTL: 24 * time.Hour,
		EmbeddedNATSAddr: "127.0.0.1:4222", QueueGroup: "codexpool",
		CodexURL: "https://chatgpt.com/backend-api/codex/responses", CodexAuthFile: "~/.codex/auth.json",
		CodexRefreshURL: "https://auth.openai.com/oauth/token", CodexClientID: "app_EMoamEEZ73f0CkXaXp7hrann",
		CredentialsBucket: "CODEXPOOL_CREDENTIALS", CredentialsReplicas: 1, WSRetryAfter: 10 * time.Minute,
		Model: "gpt-5.1-codex", Gate: "adaptive", ForbiddenCooldown: 3 * time.Second, WSReuse: true,
		GateScope: "host", ForbiddenBudget: 10 * time.Second, ReplyPrefixes: "_INBOX.", MaxInflight: 256, RequestTimeout: 10 * time.Minute,
		ConnectTimeout: 15 * time.Second, IdleTimeout: 5 * time.Minute, ShutdownGrace: 30 * time.Second,
		LogLevel: "info", LogFormat: "auto", AccountCooldown: 30 * time.Second, SessionIdle: 5 * time.Minute,
		Sticky: true, StickyTTL: time.Hour, StickyBucket: "CODEXPOOL_SESSIONS",
		AccountQueueTimeout: 30 * time.Second, AccountLeaseTTL: 6 * time.Second, Usage: true,
	}
}

// loadWorkerConfig reads the worker's settings: the defaults, then the file at path ("" = none),
// then the environment; and checks them. Errors name the variable at fault, and the file key and
// line when the value came from the file.
func loadWorkerConfig(getenv func(string) string, path string) (workerConfig, config.Settings, error) {
	c, st, err := loadWorkerSettings(getenv, path)
	if err != nil {
		return c, st, err
	}
	return c, st, st.Explain(c.validate())
}

// loadWorkerSettings reads the worker's settings without checking them.
func loadWorkerSettings(getenv func(string) string, path string) (workerConfig, config.Settings, error) {
	c := defaultWorkerConfig()
	st, err := loader(getenv).Load(&c, path)
	if err != nil {
		return c, st, fmt.Errorf("worker: %w", err)
	}
	return c, st, nil
}

// settingError names the variable at fault.
func settingError(name, format string, args ...any) error {
	return fieldError("worker", name, format, args...)
}

// validate checks values a type cannot: ranges and enumerations.
func (c workerConfig) validate() error {
	if err := c.PoolConfig.validate("worker"); err != nil {
		return err
	}
	for _, check := range []func() error{c.validateJobs, c.validateLimits, c.validateOrigin, c.validateFormats} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c workerConfig) validateJobs() error {
	bad := settingError
	switch {
	case c.Jobs != "auto" && c.Jobs != "on" && c.Jobs != "off":
		return bad("JOBS", "must be auto, on or off, got %q", c.Jobs)
	case c.JobsReplicas < 1 || c.JobsReplicas > 5:
		return bad("JOBS_REPLICAS", "must be 1 to 5, got %d", c.JobsReplicas)
	case c.JobsDedup <= 0:
		return bad("JOBS_DEDUP", "must be positive, got %s", c.JobsDedup)
	case c.JobsAckWait < time.Second:
		return bad("JOBS_ACK_WAIT", "must be at least 1s, got %s", c.JobsAckWait)
	case c.JobsMaxAttempts < 1:
		return bad("JOBS_MAX_ATTEMPTS", "must be at least 1, got %d", c.JobsMaxAttempts)
	case c.JobsMaxAckPending < 1:
		return bad("JOBS_MAX_ACK_PENDING", "must be at least 1, got %d", c.JobsMaxAckPending)
	case c.ResultsTTL < time.Second:
		return bad("RESULTS_TTL", "must be at least 1s, got %s", c.ResultsTTL)
	}
	return nil
}

// validateLimits checks the gate's and the service's numbers and durations.
func (c workerConfig) validateLimits() error {
	bad := settingError
	switch {
	case c.GateScope == "" || strings.ContainsAny(c.GateScope, "\x00\r\n"):
		return bad("GATE_SCOPE", "must be host, account, process or a name, got %q", c.GateScope)
	case c.ForbiddenBudget <= 0:
		return bad("FORBIDDEN_BUDGET", "must be positive, got %s", c.ForbiddenBudget)
	case c.QueueGroup == "" || strings.ContainsAny(c.QueueGroup, " \t\r\n"):
		return bad("QUEUE_GROUP", "must be a non-empty name without spaces, got %q", c.QueueGroup)
	case !validReplyPrefixes(c.replyPrefixes()):
		return bad("REPLY_PREFIXES", "must be a comma list of subject prefixes without spaces or wildcards, none starting with $ (system subjects), got %q", c.ReplyPrefixes)
	case c.MaxInflight < 1:
		return bad("MAX_INFLIGHT", "must be at least 1, got %d", c.MaxInflight)
	case c.MaxRequestBytes < 0:
		return bad("MAX_REQUEST_BYTES", "must be >= 0, got %d", c.MaxRequestBytes)
	case c.WSConnectSpacing < 0:
		return bad("WS_CONNECT_SPACING", "must be >= 0, got %s", c.WSConnectSpacing)
	case c.ForbiddenCooldown < 0:
		return bad("FORBIDDEN_COOLDOWN", "must be >= 0, got %s", c.ForbiddenCooldown)
	case c.RequestTimeout <= 0:
		return bad("REQUEST_TIMEOUT", "must be positive, got %s", c.RequestTimeout)
	case c.ConnectTimeout <= 0:
		return bad("CONNECT_TIMEOUT", "must be positive, got %s", c.ConnectTimeout)
	case c.IdleTimeout <= 0:
		return bad("IDLE_TIMEOUT", "must be positive, got %s", c.IdleTimeout)
	case c.SessionIdle <= 0:
		return bad("SESSION_IDLE_TIMEOUT", "must be positive, got %s", c.SessionIdle)
	case c.ShutdownGrace < 0:
		return bad("SHUTDOWN_GRACE", "must be >= 0, got %s", c.ShutdownGrace)
	case c.AccountCooldown <= 0:
		return bad("ACCOUNT_COOLDOWN", "must be positive, got %s", c.AccountCooldown)
	}
	return nil
}

// validateOrigin checks the Codex origin and login settings.
func (c workerConfig) validateOrigin() error {
	bad := settingError
	switch {
	case c.Model == "":
		return bad("MODEL", "must not be empty")
	case c.WSRetryAfter <= 0:
		return bad("WS_RETRY_AFTER", "must be positive, got %s", c.WSRetryAfter)
	case c.CodexClientID == "":
		return bad("CODEX_CLIENT_ID", "must not be empty")
	case c.CredentialsKey != "" && c.CredentialsKeyFile != "":
		return bad("CREDENTIALS_KEY_FILE", "set CODEXPOOL_CREDENTIALS_KEY or CODEXPOOL_CREDENTIALS_KEY_FILE, not both")
	case c.CredentialsReplicas < 1 || c.CredentialsReplicas > 5:
		return bad("CREDENTIALS_REPLICAS", "must be 1 to 5, got %d", c.CredentialsReplicas)
	case c.CredentialsBucket == "" || strings.ContainsAny(c.CredentialsBucket, " \t\r\n.*>"):
		return bad("CREDENTIALS_BUCKET", "must be a bucket name (letters, digits, - and _), got %q", c.CredentialsBucket)
	case c.StickyBucket == "" || strings.ContainsAny(c.StickyBucket, " \t\r\n.*>"):
		return bad("STICKY_BUCKET", "must be a bucket name (letters, digits, - and _), got %q", c.StickyBucket)
	case c.StickyTTL < time.Second:
		return bad("STICKY_TTL", "must be at least 1s, got %s", c.StickyTTL)
	case c.AccountQueueTimeout <= 0:
		return bad("ACCOUNT_QUEUE_TIMEOUT", "must be positive, got %s", c.AccountQueueTimeout)
	case c.AccountLeaseTTL < time.Second:
		return bad("ACCOUNT_LEASE_TTL", "must be at least 1s, got %s", c.AccountLeaseTTL)
	}
	if u, err := url.Parse(c.CodexRefreshURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("CODEX_REFRESH_URL", "must be an http(s) URL, got %q", c.CodexRefreshURL)
	}
	return nil
}

// validateFormats checks the settings parsed elsewhere: addresses, the gate mode, logging.
func (c workerConfig) validateFormats() error {
	bad := settingError
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return bad("METRICS_ADDR", "must be host:port, e.g. 127.0.0.1:9464, got %q", c.MetricsAddr)
		}
	}
	if _, err := gate.ParseMode(c.Gate); err != nil {
		return bad("GATE", "%v", err)
	}
	return validateLog("worker", c.LogLevel, c.LogFormat)
}

// validateLog checks CODEXPOOL_LOG_LEVEL and CODEXPOOL_LOG_FORMAT for the subcommand cmd.
func validateLog(cmd, level, format string) error {
	if _, err := parseLevel(level); err != nil {
		return fieldError(cmd, "LOG_LEVEL", "%v", err)
	}
	switch format {
	case "auto", "text", "json":
		return nil
	}
	return fieldError(cmd, "LOG_FORMAT", "must be auto, text or json, got %q", format)
}

// id returns WorkerID, or queue's default <hostname>-<pid> when it is empty.
func (c workerConfig) id() string {
	if c.WorkerID != "" {
		return c.WorkerID
	}
	return queue.DefaultWorkerID()
}

// authFilePath returns CodexAuthFile with a leading "~" expanded.
func (c workerConfig) authFilePath() string {
	p := c.CodexAuthFile
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p[1:], "/"))
		}
	}
	return p
}

// accounts reads the CODEXPOOL_ACCOUNTS file (nil without one), resolving token_env with
// getenv. Errors name the variable, the file, the field and the line, never a secret.
func (c workerConfig) accounts(getenv func(string) string) ([]worker.Account, error) {
	if c.Accounts == "" {
		return nil, nil
	}
	accts, err := worker.LoadAccounts(c.Accounts, getenv)
	if err != nil {
		return nil, settingError("ACCOUNTS", "%s", strings.TrimPrefix(err.Error(), "worker: "))
	}
	return accts, nil
}

// worker returns the worker's library configuration: accts (from the accounts file), or without
// them the one account of the CODEXPOOL_CODEX_* settings.
func (c workerConfig) worker(accts []worker.Account) worker.Config {
	mode, _ := gate.ParseMode(c.Gate) // validated
	return worker.Config{
		ID:             c.id(),
		Model:          c.Model,
		URL:            c.CodexURL,
		Accounts:       accts,
		Cooldown:       c.AccountCooldown,
		Token:          c.CodexToken,
		AccountID:      c.CodexAccountID,
		AuthFile:       c.authFilePath(),
		RefreshURL:     c.CodexRefreshURL,
		ClientID:       c.CodexClientID,
		CredentialsKey: c.CredentialsKey,
		WSRetryAfter:   c.WSRetryAfter,
		Gate:           gate.Config{Mode: mode, Floor: c.WSConnectSpacing},
		Policy: gate.Policy{ForbiddenCooldown: c.ForbiddenCooldown,
			ConnectTimeout: c.ConnectTimeout, ForbiddenBudget: c.ForbiddenBudget},
		NoReuse:             !c.WSReuse,
		MaxIdleSockets:      c.MaxInflight,
		IdleTimeout:         c.IdleTimeout,
		NoSticky:            !c.Sticky,
		StickyRefresh:       max(c.StickyTTL/4, time.Second),
		AccountQueueTimeout: c.AccountQueueTimeout,

		SessionIdleTimeout: c.SessionIdle,
	}
}

// queue returns the NATS service's configuration.
func (c workerConfig) queue() queue.Config {
	return queue.Config{
		Subject:         c.Subject,
		CancelSubject:   c.CancelSubject,
		QueueGroup:      c.QueueGroup,
		WorkerID:        c.id(),
		Version:         serviceVersion(),
		MaxInflight:     c.MaxInflight,
		MaxRequestBytes: c.MaxRequestBytes,
		RequestTimeout:  c.RequestTimeout,
		ReplyPrefixes:   c.replyPrefixes(),
	}
}

// validReplyPrefixes: at least one prefix, none a wildcard or a system subject ($KV, $JS, ...).
func validReplyPrefixes(ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(p, "$") || strings.ContainsAny(p, " \t\r\n*>") {
			return false
		}
	}
	return len(ps) > 0
}

// replyPrefixes splits REPLY_PREFIXES.
func (c workerConfig) replyPrefixes() []string {
	var out []string
	for _, p := range strings.Split(c.ReplyPrefixes, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// jobs returns the durable jobs configuration.
func (c workerConfig) jobs() queue.JobsConfig {
	return queue.JobsConfig{
		Subject: c.JobsSubject, Stream: c.JobsStream, Bucket: c.ResultsBucket, Replicas: c.JobsReplicas,
		Dedup: c.JobsDedup, AckWait: c.JobsAckWait, MaxAttempts: c.JobsMaxAttempts,
		ResultsTTL: c.ResultsTTL, MaxAckPending: c.JobsMaxAckPending,
	}
}

// embeddedStore returns the embedded server's JetStream store directory.
func (c workerConfig) embeddedStore(getenv func(string) string) string {
	if c.EmbeddedNATSStore != "" {
		return c.EmbeddedNATSStore
	}
	return filepath.Join(stateDir(getenv), "nats")
}

// printSettings writes the settings table of spec (variable, file key, default, meaning) to w,
// grouped by file section; spec points to the defaults.
func printSettings(w io.Writer, spec any) error {
	list, err := config.Fields(envPrefix, spec)
	if err != nil {
		return err
	}
	return config.PrintHelp(w, config.Settings{List: list}.Sorted(sectionOrder).List)
}

// settingNames returns every CODEXPOOL_* variable name spec reads, older names included.
func settingNames(spec any) []string {
	list, _ := config.Fields(envPrefix, spec)
	var names []string
	for _, s := range list {
		names = append(names, s.Env)
		if s.MSEnv != "" {
			names = append(names, s.MSEnv)
		}
	}
	return names
}
