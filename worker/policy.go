package worker

import "log/slog"

// policy is what a worker does with its accounts' limits and refusals. It is the one difference
// between Config.Accounts (accountsPolicy) and the one-account shortcut (shortcutPolicy), set
// once in New; the router, the limit state and the generation read it as data and have one
// path for both.
type policy struct {
	// enforce: usage reports at the ceiling and the origin's refusals cool an account down, and
	// an account on its last call runs one generation at a time (see limitState). Off, usage is
	// only recorded (stats, metrics) and every request goes upstream, as before accounts existed.
	enforce bool
	// move: a generation the origin refused for the account's limits or credentials before any
	// other event moves on to the next account, its leading error event held back meanwhile.
	move bool
	// name: errors, and the logs of generations, gates and usage reports, name the account.
	name bool
}

var (
	accountsPolicy = policy{enforce: true, move: true, name: true}
	shortcutPolicy = policy{}
)

// accountAttrs are the attributes that name a in a log line: none unless the policy names
// accounts.
func (p policy) accountAttrs(a *account) []slog.Attr {
	if !p.name || a == nil {
		return nil
	}
	return []slog.Attr{slog.String("account", a.name)}
}
