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
	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/schemas"
	"github.com/codexpool/codexpool/worker"
	"github.com/codexpool/codexpool/worker/codex"
	"github.com/codexpool/codexpool/worker/codex/login"
)

// envPrefix is the prefix of every setting's environment variable.
const envPrefix = "CODEXPOOL"

// The process configuration comes in three layers, each overriding the one before: the defaults
// (written once, in defaultPoolConfig, defaultWorkerConfig and defaultGatewayConfig), the
// codexpool.yaml file (--config or CODEXPOOL_CONFIG) and the CODEXPOOL_* environment variables,
// read through run's getenv. The settings are section structs (PoolNATS, WorkerJobs, Codex, ...)
// embedded with their section's yaml tag; internal/config does the loading from one set of field
// tags: envconfig (the variable), yaml (the key in the section), secret and ms (an older variable
// in milliseconds), and each setting's help is in confighelp.go. They are the single source of the
// settings tables that `codexpool worker --help` prints and that README.md and docker-compose.yml
// are checked against. Library packages
// take plain values; only this package knows the variable names and the file keys.

// sectionOrder is the order of the file's sections.
var sectionOrder = []string{"nats", "codex", "accounts", "gate", "jobs", "gateway", "metrics", "log", "otel"}

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
	PoolNATS `yaml:"nats"`
	PoolJobs `yaml:"jobs"`
}

// PoolNATS is the pool's part of the nats section: the servers, how to log in, the subjects.
type PoolNATS struct {
	NATSURL       string `envconfig:"NATS_URL" yaml:"url" secret:"url"`
	NATSCreds     string `envconfig:"NATS_CREDS" yaml:"creds"`
	NATSNKey      string `envconfig:"NATS_NKEY" yaml:"nkey"`
	NATSUser      string `envconfig:"NATS_USER" yaml:"user"`
	NATSPassword  string `envconfig:"NATS_PASSWORD" yaml:"password" secret:"true"`
	NATSToken     string `envconfig:"NATS_TOKEN" yaml:"token" secret:"true"`
	NATSTLSCA     string `envconfig:"NATS_TLS_CA" yaml:"tls_ca"`
	NATSTLSCert   string `envconfig:"NATS_TLS_CERT" yaml:"tls_cert"`
	NATSTLSKey    string `envconfig:"NATS_TLS_KEY" yaml:"tls_key"`
	Subject       string `envconfig:"SUBJECT" yaml:"subject"`
	CancelSubject string `envconfig:"CANCEL_SUBJECT" yaml:"cancel_subject"`
}

// PoolJobs is the pool's part of the jobs section: where durable jobs and their results live.
type PoolJobs struct {
	JobsSubject   string `envconfig:"JOBS_SUBJECT" yaml:"subject"`
	JobsStream    string `envconfig:"JOBS_STREAM" yaml:"stream"`
	ResultsBucket string `envconfig:"RESULTS_BUCKET" yaml:"results_bucket"`
}

// defaultPoolConfig returns the documented defaults of the pool settings.
func defaultPoolConfig() PoolConfig {
	return PoolConfig{
		PoolNATS: PoolNATS{Subject: schemas.DefaultSubject, CancelSubject: schemas.DefaultCancelSubject},
		PoolJobs: PoolJobs{JobsSubject: schemas.DefaultJobsSubject, JobsStream: schemas.DefaultJobsStream,
			ResultsBucket: schemas.DefaultResultsBucket},
	}
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
	WorkerNATS `yaml:"nats"`
	WorkerJobs `yaml:"jobs"`
	Metrics    `yaml:"metrics"`
	Accounts   `yaml:"accounts"`
	Codex      `yaml:"codex"`
	Gate       `yaml:"gate"`
	Log        `yaml:"log"`
	Otel       `yaml:"otel"`
}

// WorkerNATS is the worker's part of the nats section: its embedded server, its queue group and
// what it accepts.
type WorkerNATS struct {
	EmbeddedNATSAddr  string        `envconfig:"EMBEDDED_NATS_ADDR" yaml:"embedded_addr"`
	QueueGroup        string        `envconfig:"QUEUE_GROUP" yaml:"queue_group"`
	WorkerID          string        `envconfig:"WORKER_ID" yaml:"worker_id"`
	EmbeddedNATSStore string        `envconfig:"EMBEDDED_NATS_STORE" yaml:"embedded_store"`
	ReplyPrefixes     string        `envconfig:"REPLY_PREFIXES" yaml:"reply_prefixes"`
	MaxInflight       int           `envconfig:"MAX_INFLIGHT" yaml:"max_inflight"`
	MaxRequestBytes   int           `envconfig:"MAX_REQUEST_BYTES" yaml:"max_request_bytes"`
	RequestTimeout    time.Duration `envconfig:"REQUEST_TIMEOUT" yaml:"request_timeout"`
	ShutdownGrace     time.Duration `envconfig:"SHUTDOWN_GRACE" yaml:"shutdown_grace"`
}

// WorkerJobs is the worker's part of the jobs section: consuming durable jobs.
type WorkerJobs struct {
	Jobs              string        `envconfig:"JOBS" yaml:"mode"`
	JobsReplicas      int           `envconfig:"JOBS_REPLICAS" yaml:"replicas"`
	JobsDedup         time.Duration `envconfig:"JOBS_DEDUP" yaml:"dedup"`
	JobsAckWait       time.Duration `envconfig:"JOBS_ACK_WAIT" yaml:"ack_wait"`
	JobsMaxAttempts   int           `envconfig:"JOBS_MAX_ATTEMPTS" yaml:"max_attempts"`
	JobsMaxAckPending int           `envconfig:"JOBS_MAX_ACK_PENDING" yaml:"max_ack_pending"`
	ResultsTTL        time.Duration `envconfig:"RESULTS_TTL" yaml:"results_ttl"`
}

// Metrics is the metrics section: Prometheus and the usage of requests sent straight over NATS.
type Metrics struct {
	MetricsAddr string `envconfig:"METRICS_ADDR" yaml:"addr"`
	Usage       bool   `envconfig:"USAGE" yaml:"usage"`
}

// Accounts is the accounts section: the accounts file and how requests are routed over it.
type Accounts struct {
	AccountsFile        string        `envconfig:"ACCOUNTS" yaml:"file"`
	AccountCooldown     time.Duration `envconfig:"ACCOUNT_COOLDOWN" yaml:"cooldown"`
	Sticky              bool          `envconfig:"STICKY" yaml:"sticky"`
	StickyTTL           time.Duration `envconfig:"STICKY_TTL" yaml:"sticky_ttl"`
	StickyBucket        string        `envconfig:"STICKY_BUCKET" yaml:"sticky_bucket"`
	AccountQueueTimeout time.Duration `envconfig:"ACCOUNT_QUEUE_TIMEOUT" yaml:"queue_timeout"`
	AccountLeaseTTL     time.Duration `envconfig:"ACCOUNT_LEASE_TTL" yaml:"lease_ttl"`
}

// Codex is the codex section: the origin, the one account without an accounts file, the login
// and its sharing, and the upstream sockets.
type Codex struct {
	CodexURL            string        `envconfig:"CODEX_URL" yaml:"url"`
	CodexToken          string        `envconfig:"CODEX_TOKEN" yaml:"token" secret:"true"`
	CodexAccountID      string        `envconfig:"CODEX_ACCOUNT_ID" yaml:"account_id"`
	CodexAuthFile       string        `envconfig:"CODEX_AUTH_FILE" yaml:"auth_file"`
	CodexRefreshURL     string        `envconfig:"CODEX_REFRESH_URL" yaml:"refresh_url"`
	ProxyURL            string        `envconfig:"PROXY_URL" yaml:"proxy_url" secret:"url"`
	CodexClientID       string        `envconfig:"CODEX_CLIENT_ID" yaml:"client_id"`
	CredentialsKeyFile  string        `envconfig:"CREDENTIALS_KEY_FILE" yaml:"credentials_key_file"`
	CredentialsReplicas int           `envconfig:"CREDENTIALS_REPLICAS" yaml:"credentials_replicas"`
	CredentialsBucket   string        `envconfig:"CREDENTIALS_BUCKET" yaml:"credentials_bucket"`
	CredentialsKey      string        `envconfig:"CREDENTIALS_KEY" yaml:"credentials_key" secret:"true"`
	WSRetryAfter        time.Duration `envconfig:"WS_RETRY_AFTER" yaml:"ws_retry_after"`
	Model               string        `envconfig:"MODEL" yaml:"model"`
	WSReuse             bool          `envconfig:"WS_REUSE" yaml:"ws_reuse"`
	ConnectTimeout      time.Duration `envconfig:"CONNECT_TIMEOUT" yaml:"connect_timeout"`
	IdleTimeout         time.Duration `envconfig:"IDLE_TIMEOUT" yaml:"idle_timeout"`
	SessionIdle         time.Duration `envconfig:"SESSION_IDLE_TIMEOUT" yaml:"session_idle_timeout"`
	MaxSessions         int           `envconfig:"MAX_SESSIONS" yaml:"max_sessions"`
}

// Gate is the gate section: how upgrades to the origin are paced.
type Gate struct {
	WSConnectSpacing  time.Duration `envconfig:"WS_CONNECT_SPACING" ms:"WS_CONNECT_SPACING_MS" yaml:"ws_connect_spacing"`
	GateMode          string        `envconfig:"GATE" yaml:"mode"`
	GateScope         string        `envconfig:"GATE_SCOPE" yaml:"scope"`
	ForbiddenBudget   time.Duration `envconfig:"FORBIDDEN_BUDGET" yaml:"forbidden_budget"`
	ForbiddenCooldown time.Duration `envconfig:"FORBIDDEN_COOLDOWN" ms:"FORBIDDEN_COOLDOWN_MS" yaml:"forbidden_cooldown"`
}

// Log is the log section, the worker's and the gateway's.
type Log struct {
	LogLevel  string `envconfig:"LOG_LEVEL" yaml:"level"`
	LogFormat string `envconfig:"LOG_FORMAT" yaml:"format"`
}

// defaultShutdownGrace is how long in-flight work may take after SIGTERM, worker and gateway
// alike (one variable, CODEXPOOL_SHUTDOWN_GRACE).
const defaultShutdownGrace = 30 * time.Second

// defaultLog returns the defaults of the log section.
func defaultLog() Log { return Log{LogLevel: "info", LogFormat: "auto"} }

// defaultWorkerConfig returns the documented defaults of `codexpool worker`: each written once,
// here or as the library's Default constant.
func defaultWorkerConfig() workerConfig {
	return workerConfig{
		PoolConfig: defaultPoolConfig(),
		WorkerNATS: WorkerNATS{EmbeddedNATSAddr: "127.0.0.1:4222", QueueGroup: queue.DefaultQueueGroup,
			ReplyPrefixes: queue.DefaultReplyPrefix, MaxInflight: queue.DefaultMaxInflight,
			RequestTimeout: queue.DefaultRequestTimeout, ShutdownGrace: defaultShutdownGrace},
		WorkerJobs: WorkerJobs{Jobs: "auto", JobsReplicas: 1, JobsDedup: queue.DefaultJobsDedup,
			JobsAckWait: queue.DefaultJobsAckWait, JobsMaxAttempts: queue.DefaultJobsMaxAttempts,
			JobsMaxAckPending: queue.DefaultJobsMaxAckPending, ResultsTTL: queue.DefaultResultsTTL},
		Metrics: Metrics{Usage: true},
		Accounts: Accounts{AccountCooldown: worker.DefaultCooldown, Sticky: true, StickyTTL: queue.DefaultSessionTTL,
			StickyBucket: queue.DefaultSessionsBucket, AccountQueueTimeout: worker.DefaultAccountQueueTimeout,
			AccountLeaseTTL: queue.DefaultLeaseTTL},
		Codex: Codex{CodexURL: codex.DefaultURL, CodexAuthFile: "~/.codex/auth.json",
			CodexRefreshURL: login.DefaultRefreshURL, CodexClientID: login.DefaultClientID,
			CredentialsReplicas: 1, CredentialsBucket: queue.DefaultCredentialsBucket,
			WSRetryAfter: codex.DefaultWSRetryAfter, Model: worker.DefaultModel, WSReuse: true,
			ConnectTimeout: gate.DefaultConnectTimeout, IdleTimeout: codex.DefaultIdleTimeout,
			SessionIdle: worker.DefaultSessionIdleTimeout, MaxSessions: worker.DefaultMaxSessions},
		Gate: Gate{GateMode: string(gate.Adaptive), GateScope: "host", ForbiddenBudget: gate.DefaultForbiddenBudget,
			ForbiddenCooldown: gate.DefaultForbiddenCooldown},
		Log:  defaultLog(),
		Otel: defaultOtel(),
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
	for _, check := range []func() error{c.validateJobs, c.validateLimits, c.validateOrigin, c.validateFormats,
		func() error { return c.Otel.validate("worker") }} {
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
	case c.MaxSessions <= 0:
		return bad("MAX_SESSIONS", "must be positive, got %d", c.MaxSessions)
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
	if c.ProxyURL != "" {
		if _, err := egress.Parse("proxy_url", c.ProxyURL); err != nil {
			return bad("PROXY_URL", "%s", strings.TrimPrefix(err.Error(), "proxy_url: "))
		}
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
	if _, err := gate.ParseMode(c.GateMode); err != nil {
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
	if c.AccountsFile == "" {
		return nil, nil
	}
	accts, err := worker.LoadAccounts(c.AccountsFile, getenv)
	if err != nil {
		return nil, settingError("ACCOUNTS", "%s", strings.TrimPrefix(err.Error(), "worker: "))
	}
	return accts, nil
}

// worker returns the worker's library configuration: accts (from the accounts file), or without
// them the one account of the CODEXPOOL_CODEX_* settings.
func (c workerConfig) worker(accts []worker.Account) worker.Config {
	mode, _ := gate.ParseMode(c.GateMode) // validated
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
		ProxyURL:       c.ProxyURL,
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
		MaxSessions:        c.MaxSessions,
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
