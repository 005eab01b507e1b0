package config

import (
	"slices"
	"strings"
)

// Unknown is a variable with the program's prefix that no setting reads: most likely a typo.
type Unknown struct {
	Var     string // e.g. CODEXPOOL_MAX_INFLIGT
	Closest string // the setting's variable nearest to it, e.g. CODEXPOOL_MAX_INFLIGHT
}

// UnknownVars returns the variables of environ ("NAME=value" entries, as os.Environ lists them)
// that start with the prefix and an underscore, are not empty (an empty variable counts as unset),
// and are neither a setting of a Known struct (older names in milliseconds included) nor one of
// other, in environ's order, each with the closest setting's variable.
func (l Loader) UnknownVars(environ, other []string) ([]Unknown, error) {
	known, err := l.knownVars()
	if err != nil {
		return nil, err
	}
	var out []Unknown
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" || !strings.HasPrefix(name, l.Prefix+"_") ||
			slices.Contains(known, name) || slices.Contains(other, name) {
			continue
		}
		out = append(out, Unknown{Var: name, Closest: closest(name, known)})
	}
	return out, nil
}

// knownVars returns the sorted variables of every Known struct.
func (l Loader) knownVars() ([]string, error) {
	var vars []string
	for _, spec := range l.Known {
		list, err := Fields(l.Prefix, spec)
		if err != nil {
			return nil, err
		}
		for _, s := range list {
			vars = append(vars, s.Env)
			if s.MSEnv != "" {
				vars = append(vars, s.MSEnv)
			}
		}
	}
	slices.Sort(vars)
	return slices.Compact(vars), nil
}
