package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gate"
	"github.com/codexpool/codexpool/queue"
	"github.com/codexpool/codexpool/worker"
)

// envPrefix is the prefix of every setting's environment variable.
const envPrefix = "CODEXPOOL"

// The process configuration comes from CODEXPOOL_* environment variables through envconfig. The
// field tags are the single source of the settings tables that `codexpool worker --help` prints
// and that README.md and docker-compose.yml are checked against. Library packages take plain
// values; only this package knows the variable names.

// PoolConfig is how a process reaches the pool: the NATS server list, authentication and TLS, and
// the subjects. Every subcommand that connects (worker, ask, and the pool's other clients) reads it.
type PoolConfig struct {
	NATSURL      string `envconfig:"NATS_URL" desc:"NATS server URL(s), comma-separated; empty = start an embedded NATS server"`
	NATSCreds    string `envconfig:"NATS_CREDS" desc:"NATS credentials file (user JWT + nkey seed)"`
	NATSNKey     string `envconfig:"NATS_NKEY" desc:"NATS nkey seed file"`
	NATSUser     string `envconfig:"NATS_USER" desc:"NATS user name (with CODEXPOOL_NATS_PASSWORD)"`
	NATSPassword string `envconfig:"NATS_PASSWORD" desc:"NATS password"`
	NATSToken    string `envconfig:"NATS_TOKEN" desc:"NATS authorization token"`
	NATSTLSCA    string `envconfig:"NATS_TLS_CA" desc:"PEM file of the CA(s) that sign the NATS server's certificate; turns TLS on"`
	NATSTLSCert  string `envconfig:"NATS_TLS_CERT" desc:"PEM client certificate for NATS (with CODEXPOOL_NATS_TLS_KEY)"`
	NATSTLSKey   string `envconfig:"NATS_TLS_KEY" desc:"PEM key of the NATS client certificate"`
	Subject      string `envconfig:"SUBJECT" default:"codex.generate" desc:"subject of generation requests"`
}

// loadPoolConfig reads the pool settings of a client subcommand from the environment.
func loadPoolConfig(cmd string) (PoolConfig, error) {
	var c PoolConfig
	if err := envconfig.Process(envPrefix, &c); err != nil {
		return c, fmt.Errorf("%s: %w", cmd, err)
	}
	if c.Subject == "" || strings.ContainsAny(c.Subject, " \t\r\n") {
		return c, fmt.Errorf("%s: %s_SUBJECT: must be a NATS subject, got %q", cmd, envPrefix, c.Subject)
	}
	return c, nil
}

// dial connects a command-line client to url (default: the configured server, else the local
// default), failing fast instead of retrying: a person is waiting.
func (c PoolConfig) dial(name, url string) (*nats.Conn, error) {
	if url == "" {
		url = c.NATSURL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	opts, err := c.security().Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(url, append(opts, nats.Name(name), nats.Timeout(5*time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", queue.RedactURL(url), err)
	}
	return nc, nil
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
	EmbeddedNATSAddr string `envconfig:"EMBEDDED_NATS_ADDR" default:"127.0.0.1:4222" desc:"where the embedded NATS server listens, so clients and more workers can join"`
	QueueGroup       string `envconfig:"QUEUE_GROUP" default:"codexpool" desc:"queue group every worker joins"`
	WorkerID         string `envconfig:"WORKER_ID" desc:"this worker's id in replies, logs and stats; default <hostname>-<pid>"`

	MetricsAddr string `envconfig:"METRICS_ADDR" desc:"where to serve Prometheus /metrics, /healthz and /readyz, e.g. 127.0.0.1:9464; empty = off"`

	CodexURL        string        `envconfig:"CODEX_URL" default:"https://chatgpt.com/backend-api/codex/responses" desc:"Codex origin; http(s) and ws(s) accepted"`
	CodexToken      string        `envconfig:"CODEX_TOKEN" desc:"bearer token (API key or ChatGPT access token)"`
	CodexAccountID  string        `envconfig:"CODEX_ACCOUNT_ID" desc:"sent as ChatGPT-Account-Id"`
	CodexAuthFile   string        `envconfig:"CODEX_AUTH_FILE" default:"~/.codex/auth.json" desc:"Codex CLI login, read when no token is set"`
	Accounts        string        `envconfig:"ACCOUNTS" desc:"accounts file (YAML or JSON list of {name, auth_file | token | token_env, account_id, max_used_percent}); replaces the CODEXPOOL_CODEX_TOKEN/ACCOUNT_ID/AUTH_FILE account"`
	AccountCooldown time.Duration `envconfig:"ACCOUNT_COOLDOWN" default:"30s" desc:"with CODEXPOOL_ACCOUNTS: how long an account refused for limits or credentials stays out when the origin gives no reset time"`
	Model           string        `envconfig:"MODEL" default:"gpt-5.1-codex" desc:"model used when a request names none"`

	WSConnectSpacingMS  int    `envconfig:"WS_CONNECT_SPACING_MS" default:"0" desc:"the gate's floor in ms: spacing is never relaxed below it"`
	Gate                string `envconfig:"GATE" default:"adaptive" desc:"connect gate: adaptive (congestion control), reference (the reference proxy's rules), fixed (spacing = floor), off (no pacing)"`
	ForbiddenCooldownMS int    `envconfig:"FORBIDDEN_COOLDOWN_MS" default:"3000" desc:"reference, fixed and off gates: wait in ms before the one retry after a 403 (adaptive paces 403 retries through the gate until the request's deadline)"`
	WSReuse             bool   `envconfig:"WS_REUSE" default:"true" desc:"keep completed sockets for the next request"`

	MaxInflight     int           `envconfig:"MAX_INFLIGHT" default:"256" desc:"generations this worker runs at once; excess goes to other workers or gets worker_busy"`
	MaxRequestBytes int           `envconfig:"MAX_REQUEST_BYTES" default:"0" desc:"largest request payload; 0 = the NATS server's max payload"`
	RequestTimeout  time.Duration `envconfig:"REQUEST_TIMEOUT" default:"10m" desc:"longest a request may take"`
	ConnectTimeout  time.Duration `envconfig:"CONNECT_TIMEOUT" default:"15s" desc:"one upgrade attempt"`
	IdleTimeout     time.Duration `envconfig:"IDLE_TIMEOUT" default:"5m" desc:"longest gap between upstream events (and before the first)"`
	ShutdownGrace   time.Duration `envconfig:"SHUTDOWN_GRACE" default:"30s" desc:"on SIGTERM: stop taking work, finish in-flight within this"`

	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat string `envconfig:"LOG_FORMAT" default:"auto" desc:"auto (colour text on a terminal, JSON otherwise), text or json"`
}

// loadWorkerConfig reads the environment into a workerConfig with the documented defaults and
// checks it. Errors name the variable at fault.
func loadWorkerConfig() (workerConfig, error) {
	var c workerConfig
	if err := envconfig.Process(envPrefix, &c); err != nil {
		return c, fmt.Errorf("worker: %w", err)
	}
	return c, c.validate()
}

// defaultWorkerConfig returns the documented defaults, ignoring the environment.
func defaultWorkerConfig() workerConfig {
	return workerConfig{
		PoolConfig:       PoolConfig{Subject: "codex.generate"},
		EmbeddedNATSAddr: "127.0.0.1:4222", QueueGroup: "codexpool",
		CodexURL: "https://chatgpt.com/backend-api/codex/responses", CodexAuthFile: "~/.codex/auth.json",
		Model: "gpt-5.1-codex", Gate: "adaptive", ForbiddenCooldownMS: 3000, WSReuse: true,
		MaxInflight: 256, RequestTimeout: 10 * time.Minute, ConnectTimeout: 15 * time.Second,
		IdleTimeout: 5 * time.Minute, ShutdownGrace: 30 * time.Second, LogLevel: "info", LogFormat: "auto",
		AccountCooldown: 30 * time.Second,
	}
}

// settingError names the variable at fault.
func settingError(name, format string, args ...any) error {
	return fmt.Errorf("worker: %s_%s: %s", envPrefix, name, fmt.Sprintf(format, args...))
}

// validate checks values a type cannot: ranges and enumerations.
func (c workerConfig) validate() error {
	bad := settingError
	switch {
	case c.Subject == "" || strings.ContainsAny(c.Subject, " \t\r\n"):
		return bad("SUBJECT", "must be a NATS subject, got %q", c.Subject)
	case c.QueueGroup == "" || strings.ContainsAny(c.QueueGroup, " \t\r\n"):
		return bad("QUEUE_GROUP", "must be a non-empty name without spaces, got %q", c.QueueGroup)
	case c.MaxInflight < 1:
		return bad("MAX_INFLIGHT", "must be at least 1, got %d", c.MaxInflight)
	case c.MaxRequestBytes < 0:
		return bad("MAX_REQUEST_BYTES", "must be >= 0, got %d", c.MaxRequestBytes)
	case c.WSConnectSpacingMS < 0:
		return bad("WS_CONNECT_SPACING_MS", "must be >= 0, got %d", c.WSConnectSpacingMS)
	case c.ForbiddenCooldownMS < 0:
		return bad("FORBIDDEN_COOLDOWN_MS", "must be >= 0, got %d", c.ForbiddenCooldownMS)
	case c.RequestTimeout <= 0:
		return bad("REQUEST_TIMEOUT", "must be positive, got %s", c.RequestTimeout)
	case c.ConnectTimeout <= 0:
		return bad("CONNECT_TIMEOUT", "must be positive, got %s", c.ConnectTimeout)
	case c.IdleTimeout <= 0:
		return bad("IDLE_TIMEOUT", "must be positive, got %s", c.IdleTimeout)
	case c.ShutdownGrace < 0:
		return bad("SHUTDOWN_GRACE", "must be >= 0, got %s", c.ShutdownGrace)
	case c.AccountCooldown <= 0:
		return bad("ACCOUNT_COOLDOWN", "must be positive, got %s", c.AccountCooldown)
	case c.Model == "":
		return bad("MODEL", "must not be empty")
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return bad("METRICS_ADDR", "must be host:port, e.g. 127.0.0.1:9464, got %q", c.MetricsAddr)
		}
	}
	if _, err := gate.ParseMode(c.Gate); err != nil {
		return bad("GATE", "%v", err)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return bad("LOG_LEVEL", "%v", err)
	}
	switch c.LogFormat {
	case "auto", "text", "json":
	default:
		return bad("LOG_FORMAT", "must be auto, text or json, got %q", c.LogFormat)
	}
	return nil
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
		Gate:           gate.Config{Mode: mode, Floor: time.Duration(c.WSConnectSpacingMS) * time.Millisecond},
		Policy:         gate.Policy{ForbiddenCooldown: time.Duration(c.ForbiddenCooldownMS) * time.Millisecond, ConnectTimeout: c.ConnectTimeout},
		NoReuse:        !c.WSReuse,
		MaxIdleSockets: c.MaxInflight,
		IdleTimeout:    c.IdleTimeout,
	}
}

// queue returns the NATS service's configuration.
func (c workerConfig) queue() queue.Config {
	return queue.Config{
		Subject:         c.Subject,
		QueueGroup:      c.QueueGroup,
		WorkerID:        c.id(),
		Version:         serviceVersion(),
		MaxInflight:     c.MaxInflight,
		MaxRequestBytes: c.MaxRequestBytes,
		RequestTimeout:  c.RequestTimeout,
	}
}

// printSettings writes the settings table of spec (variable, default, meaning) to w.
func printSettings(w io.Writer, spec any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tMEANING")
	const format = `{{range .}}{{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`
	if err := envconfig.Usagef(envPrefix, spec, tw, format); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return tw.Flush()
}

// settingNames returns every CODEXPOOL_* variable name spec reads.
func settingNames(spec any) []string {
	var b strings.Builder
	const format = `{{range .}}{{usage_key .}}
{{end}}`
	_ = envconfig.Usagef(envPrefix, spec, &b, format)
	return strings.Fields(b.String())
}
