package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/queue/store"
)

const keysTrailer = `Manages the gateways' client keys live, in the JetStream key-value bucket CODEXPOOL_KEYS: every
gateway on the NATS server watches it and applies a change within a second, without a restart.
The bucket holds each key's name, the SHA-256 of its secret (never the secret), its limits,
models and admin right; each change is appended to the stream CODEXPOOL_AUDIT (who, what, when).

  keys add NAME [flags]     a new key; prints its secret once, on stdout (or --secret-sha256)
  keys set NAME [flags]     change the flags given (0 removes a limit, --models "" any model,
                            --admin=false), --new-secret gives it a new secret (printed once)
  keys revoke NAME          every gateway refuses the key from now on
  keys list                 the keys: name, digest prefix, limits, models, admin, last change
  keys seed FILE            add the keys of a keys file (CODEXPOOL_GATEWAY_KEYS_FILE's format)
                            whose names have no entry and were never revoked: the bucket wins
  keys log [NAME]           the audit records, oldest first: when, who, what, which key, the
                            fields changed (the last --last of them; of key NAME only if given)

Needs a NATS user that may write the bucket and the audit stream: the operator role of
docs/nats-roles.conf (the gateway role may only read it), or a worker's embedded server's
credential on this machine. Reads the CODEXPOOL_NATS_* settings.
`

// keyFlags are the flags of `keys add` and `keys set`: a key's fields.
type keyFlags struct {
	limits     map[string]*int64 // by keys-file field name
	models     *string
	admin      *bool
	digest     *string // add: the secret's SHA-256 instead of a new secret
	newSecret  *bool   // set: a new secret
	setByFlags map[string]bool
}

// limitFlags are the limit flags and the keys-file fields they set.
var limitFlags = []struct{ flag, field, what string }{
	{"requests-per-minute", "requests_per_minute", "requests admitted in any 60 s"},
	{"tokens-per-5h", "tokens_per_5h", "input + output tokens in the last 5 h"},
	{"tokens-per-day", "tokens_per_day", "input + output tokens in the last 24 h"},
	{"tokens-per-week", "tokens_per_week", "input + output tokens in the last 7 days"},
	{"max-concurrent", "max_concurrent", "requests in progress at once"},
}

func addKeyFlags(fs *flags, add bool) *keyFlags {
	kf := &keyFlags{limits: map[string]*int64{}}
	for _, l := range limitFlags {
		v := new(int64)
		kf.limits[l.field] = v
		fs.Func(l.flag, "at most `N` "+l.what+", across every gateway (0: no limit)", func(s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			small := l.field == "requests_per_minute" || l.field == "max_concurrent" // ints in the keys file
			if err != nil || n < 0 || small && n > math.MaxInt32 {
				return fmt.Errorf("want a whole number, 0 or more, got %q", s)
			}
			*v = n
			return nil
		})
	}
	kf.models = fs.String("models", "", "comma-separated `list` of the only models the key may request (default: any)")
	kf.admin = fs.Bool("admin", false, "the key may read GET /v1/usage")
	if add {
		kf.digest = fs.String("secret-sha256", "", "store this SHA-256 of a secret you made (64 `HEX` digits) instead of making and printing one")
	} else {
		kf.newSecret = fs.Bool("new-secret", false, "give the key a new secret (printed once); the old one stops working")
	}
	return kf
}

// apply sets the flags given on the command line in e, returning the fields they changed.
func (kf *keyFlags) apply(e *gateway.KeyEntry) []string {
	var fields []string
	for _, l := range limitFlags {
		if !kf.setByFlags[l.flag] {
			continue
		}
		v := *kf.limits[l.field]
		switch l.field {
		case "requests_per_minute":
			e.RequestsPerMinute = int(v)
		case "tokens_per_5h":
			e.TokensPer5h = v
		case "tokens_per_day":
			e.TokensPerDay = v
		case "tokens_per_week":
			e.TokensPerWeek = v
		case "max_concurrent":
			e.MaxConcurrent = int(v)
		}
		fields = append(fields, l.field)
	}
	if kf.setByFlags["models"] {
		e.Models = nil
		for _, m := range strings.Split(*kf.models, ",") {
			if m = strings.TrimSpace(m); m != "" {
				e.Models = append(e.Models, m)
			}
		}
		fields = append(fields, "models")
	}
	if kf.setByFlags["admin"] {
		e.Admin = *kf.admin
		fields = append(fields, "admin")
	}
	return fields
}

// keysArgs are a `codexpool keys` command line, parsed and checked.
type keysArgs struct {
	sub, name string // the subcommand and its NAME (seed: its FILE)
	fs        *flags
	last      *int  // log
	json      *bool // log
	natsURL   *string
	kf        *keyFlags     // add and set
	fileKeys  []gateway.Key // seed
}

var keysSynopsis = map[string]string{
	"add":    "keys add NAME [--requests-per-minute N] [--tokens-per-5h N] [--tokens-per-day N] [--tokens-per-week N] [--max-concurrent N] [--models LIST] [--admin] [--secret-sha256 HEX]",
	"set":    "keys set NAME [--requests-per-minute N] ... [--models LIST] [--admin=true|false] [--new-secret]",
	"revoke": "keys revoke NAME",
	"list":   "keys list",
	"seed":   "keys seed FILE",
	"log":    "keys log [NAME] [--last N] [--json]",
}

func runKeys(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "-help", "help"}, args[0]) {
		fs := newFlags(e, "keys", "keys add|set|revoke|list|seed|log [NAME|FILE] [flags]", keysTrailer)
		if len(args) == 0 {
			fs.printUsage(e.stderr)
			return exitError{code: 2, msg: "keys: give a subcommand: add, set, revoke, list, seed or log"}
		}
		fs.printUsage(e.stdout)
		return nil
	}
	a, err := parseKeysArgs(e, args[0], args[1:])
	if err != nil {
		return err
	}
	pool, err := loadPoolConfig(e, a.fs)
	if err != nil {
		return err
	}
	nc, err := pool.dial(e.getenv, "codexpool keys", *a.natsURL)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	js, err := store.JetStream(ctx, nc)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	admin, err := gateway.OpenKeyAdmin(ctx, js, operatorName(pool))
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	k := keysCmd{e: e, admin: admin, kf: a.kf}
	switch a.sub {
	case "add":
		return k.add(ctx, a.name)
	case "set":
		return k.set(ctx, a.name)
	case "revoke":
		return k.revoke(ctx, a.name)
	case "seed":
		return k.seed(ctx, a.fileKeys)
	case "log":
		return k.log(ctx, a.name, *a.last, *a.json)
	}
	return k.list(ctx)
}

// parseKeysArgs parses the flags and arguments of subcommand sub and checks them, so that a
// bad command line fails before anything connects.
func parseKeysArgs(e env, sub string, rest []string) (keysArgs, error) {
	a := keysArgs{sub: sub}
	synopsis := keysSynopsis[sub]
	if synopsis == "" {
		return a, exitError{code: 2, msg: fmt.Sprintf("keys: unknown subcommand %q (want add, set, revoke, list, seed or log; see codexpool keys --help)", sub)}
	}
	a.fs = newFlags(e, "keys", synopsis, keysTrailer)
	a.fs.config = a.fs.String("config", "", "read settings from `FILE` (YAML, see codexpool.example.yaml); default $"+envPrefix+"_CONFIG")
	a.natsURL = a.fs.String("nats", "", "NATS server `URL` (default $CODEXPOOL_NATS_URL, else "+nats.DefaultURL+")")
	if sub == "add" || sub == "set" {
		a.kf = addKeyFlags(a.fs, sub == "add")
	}
	if sub == "log" {
		a.last = a.fs.Int("last", 100, "show the last `N` records (0: every one)")
		a.json = a.fs.Bool("json", false, "one JSON audit record per line instead of a table")
	}
	// NAME may come before the flags (keys add alice --admin) or after them.
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		a.name, rest = rest[0], rest[1:]
	}
	if err := a.fs.parse(e, rest); err != nil {
		return a, err
	}
	rest = a.fs.Args()
	if a.name == "" && len(rest) > 0 {
		a.name, rest = rest[0], rest[1:]
	}
	switch {
	case sub == "list" && (a.name != "" || len(rest) > 0):
		return a, exitError{code: 2, msg: "keys list takes no arguments"}
	case sub == "log" && *a.last < 0:
		return a, exitError{code: 2, msg: fmt.Sprintf("keys log: --last must be 0 or more, got %d", *a.last)}
	case sub != "list" && sub != "log" && a.name == "":
		a.fs.printUsage(e.stderr)
		return a, exitError{code: 2, msg: fmt.Sprintf("keys %s: give the key's %s", sub, map[bool]string{true: "keys file", false: "name"}[sub == "seed"])}
	case len(rest) > 0:
		return a, exitError{code: 2, msg: fmt.Sprintf("keys %s: unexpected arguments %q (flags go before or right after NAME)", sub, rest)}
	}
	return a, a.check()
}

// check checks the name, the flags given, and reads the keys file of seed.
func (a *keysArgs) check() error {
	if a.kf != nil {
		a.kf.setByFlags = map[string]bool{}
		a.fs.Visit(func(f *flag.Flag) {
			if f.Name != "config" && f.Name != "nats" {
				a.kf.setByFlags[f.Name] = true
			}
		})
		if a.sub == "set" && len(a.kf.setByFlags) == 0 {
			return exitError{code: 2, msg: "keys set: give at least one field to change (see codexpool keys set --help)"}
		}
		if a.sub == "add" && *a.kf.digest != "" {
			if b, err := hex.DecodeString(*a.kf.digest); err != nil || len(b) != sha256.Size {
				return exitError{code: 2, msg: "keys add: --secret-sha256: want the secret's SHA-256 as 64 hex digits"}
			}
		}
	}
	switch a.sub {
	case "add", "set", "revoke", "log":
		if a.sub == "log" && a.name == "" {
			break
		}
		if err := gateway.CheckKeyName(a.name); err != nil {
			return exitError{code: 2, msg: fmt.Sprintf("keys %s: %v", a.sub, err)}
		}
	case "seed":
		var err error
		if a.fileKeys, err = gateway.LoadKeys(a.name); err != nil {
			return fmt.Errorf("keys seed: %w", err)
		}
	}
	return nil
}

// keysCmd runs one `codexpool keys` subcommand against the bucket.
type keysCmd struct {
	e     env
	admin *gateway.KeyAdmin
	kf    *keyFlags
}

func (k keysCmd) add(ctx context.Context, name string) error {
	var secret string
	e := gateway.KeyEntry{Name: name, SecretSHA256: *k.kf.digest}
	if e.SecretSHA256 == "" {
		secret = gateway.NewSecret()
		sum := gateway.Digest(secret)
		e.SecretSHA256 = hex.EncodeToString(sum[:])
	}
	k.kf.apply(&e)
	key, err := e.Key()
	if err != nil {
		return fmt.Errorf("keys add: %w", err)
	}
	if err := k.admin.Add(ctx, key); err != nil {
		return fmt.Errorf("keys add: %w", err)
	}
	if secret != "" {
		fmt.Fprintln(k.e.stdout, secret)
		fmt.Fprintf(k.e.stderr, "codexpool keys: added %q (sha256 %s…); its secret is above, shown this once: store it now\n", name, e.SecretSHA256[:12])
		return nil
	}
	fmt.Fprintf(k.e.stdout, "added %q (sha256 %s…)\n", name, e.SecretSHA256[:12])
	return nil
}

func (k keysCmd) set(ctx context.Context, name string) error {
	var secret string
	if *k.kf.newSecret {
		secret = gateway.NewSecret()
	}
	e, err := k.admin.Set(ctx, name, func(e *gateway.KeyEntry) []string {
		fields := k.kf.apply(e)
		if secret != "" {
			sum := gateway.Digest(secret)
			e.SecretSHA256 = hex.EncodeToString(sum[:])
			fields = append(fields, "secret_sha256")
		}
		return fields
	})
	if err != nil {
		return fmt.Errorf("keys set: %w", err)
	}
	if secret != "" {
		fmt.Fprintln(k.e.stdout, secret)
		fmt.Fprintf(k.e.stderr, "codexpool keys: %q has a new secret (above, shown this once); the old one no longer works\n", name)
		return nil
	}
	fmt.Fprintf(k.e.stdout, "changed %q: %s\n", name, describeKey(e))
	return nil
}

func (k keysCmd) revoke(ctx context.Context, name string) error {
	if err := k.admin.Revoke(ctx, name); err != nil {
		return fmt.Errorf("keys revoke: %w", err)
	}
	fmt.Fprintf(k.e.stdout, "revoked %q: every gateway refuses it within a second\n", name)
	return nil
}

func (k keysCmd) seed(ctx context.Context, keys []gateway.Key) error {
	added, kept, err := k.admin.Seed(ctx, keys)
	for _, n := range added {
		fmt.Fprintf(k.e.stdout, "added %q\n", n)
	}
	for _, n := range kept {
		fmt.Fprintf(k.e.stdout, "kept %q: the bucket has it already (or revoked it)\n", n)
	}
	if err != nil {
		return fmt.Errorf("keys seed: %w", err)
	}
	return nil
}

func (k keysCmd) list(ctx context.Context) error {
	entries, err := k.admin.List(ctx)
	if err != nil {
		return fmt.Errorf("keys list: %w", err)
	}
	tw := tabwriter.NewWriter(k.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHA256\tFIELDS\tUPDATED\tBY")
	for _, e := range entries {
		prefix := e.SecretSHA256
		if len(prefix) > 12 {
			prefix = prefix[:12] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, prefix, describeKey(e), e.Updated.Format(time.RFC3339), e.By)
	}
	return tw.Flush()
}

func (k keysCmd) log(ctx context.Context, name string, last int, asJSON bool) error {
	records, err := k.admin.Audit(ctx, name, last)
	if err != nil {
		return fmt.Errorf("keys log: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(k.e.stdout)
		for _, r := range records {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(k.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tBY\tACTION\tKEY\tCHANGES")
	for _, r := range records {
		var changes []string
		for _, f := range slices.Sorted(maps.Keys(r.Changes)) {
			v, _ := json.Marshal(r.Changes[f])
			changes = append(changes, f+"="+string(v))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Time.Format(time.RFC3339), r.Who, r.Action, r.Key, strings.Join(changes, " "))
	}
	return tw.Flush()
}

// describeKey lists e's limits, models and admin right, as the keys file names them.
func describeKey(e gateway.KeyEntry) string {
	var parts []string
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"requests_per_minute", int64(e.RequestsPerMinute)}, {"tokens_per_5h", e.TokensPer5h},
		{"tokens_per_day", e.TokensPerDay}, {"tokens_per_week", e.TokensPerWeek}, {"max_concurrent", int64(e.MaxConcurrent)},
	} {
		if f.v > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	if len(e.Models) > 0 {
		parts = append(parts, "models="+strings.Join(e.Models, ","))
	}
	if e.Admin {
		parts = append(parts, "admin")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// operatorName is who the audit records name: this machine's user and host, and the NATS
// identity the command connects with (never a password or token).
func operatorName(pool PoolConfig) string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		who += "@" + h
	}
	sec := pool.security()
	switch sec.Kind() {
	case "user":
		return who + " (nats user " + sec.User + ")"
	case "creds":
		return who + " (nats creds " + filepath.Base(sec.CredsFile) + ")"
	case "nkey", "token":
		return who + " (nats " + sec.Kind() + ")"
	}
	return who
}
