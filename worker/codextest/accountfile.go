package codextest

import (
	"fmt"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codexpool/codexpool/internal/accountlist"
)

// LoadAccounts reads an accounts file for `codexpool sim --accounts`: see ParseAccounts. Errors
// name the file.
func LoadAccounts(path string) ([]Account, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codextest: %w", err)
	}
	accts, err := parseAccounts(data)
	if err != nil {
		return nil, fmt.Errorf("codextest: %s: %w", path, err)
	}
	return accts, nil
}

// ParseAccounts decodes an accounts file, YAML or JSON: a list of accounts (or an object whose
// "accounts" key is that list), each with the fields of [Account] in snake case:
//
//	accounts:                  # or the list alone at the top level
//	  - name: alice
//	    token: sk-alice          # optional with logins
//	    account_id: 6f1c...      # optional
//	    upgrade_rate: 2          # optional, per second
//	    upgrade_burst: 4         # optional
//	    plan_type: plus          # optional, default pro
//	    windows:                 # optional, at most two: primary, secondary
//	      - {length: 5h, budget: 100}
//	      - {length: 168h, budget: 1000}
//
// Lengths are Go durations ("5h", "300ms"). Unknown fields are errors; every error names the
// field ("accounts[1].windows[0].length") and its line.
func ParseAccounts(data []byte) ([]Account, error) {
	accts, err := parseAccounts(data)
	if err != nil {
		return nil, fmt.Errorf("codextest: accounts file: %w", err)
	}
	return accts, nil
}

func parseAccounts(data []byte) ([]Account, error) {
	items, err := accountlist.Items(data)
	if err != nil {
		return nil, err
	}
	accts := make([]Account, 0, len(items))
	for i, n := range items {
		a, err := parseAccount(n, fmt.Sprintf("accounts[%d]", i))
		if err != nil {
			return nil, err
		}
		accts = append(accts, a)
	}

	if err := validateAccounts(accts); err != nil {
		return nil, err
	}
	return accts, nil
}

// fieldError names the field at path and the line of value.
func fieldError(path string, value *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s (line %d): %s", path, value.Line, fmt.Sprintf(format, args...))
}

// fields calls f for each key and value of the mapping n, rejecting anything else.
func fields(n *yaml.Node, path string, f func(key string, v *yaml.Node, at string) error) error {
	if n.Kind != yaml.MappingNode {
		return fieldError(path, n, "want an object")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i].Value
		if err := f(key, n.Content[i+1], path+"."+key); err != nil {
			return err
		}
	}
	return nil
}

// decode decodes the scalar v into dst, naming path on failure.
func decode(v *yaml.Node, at string, dst any) error {
	if v.Kind != yaml.ScalarNode {
		return fieldError(at, v, "want a single value")
	}
	// yaml truncates 1.5 into an int; a count must be written as one.
	if _, isInt := dst.(*int); isInt && v.ShortTag() != "!!int" {
		return fieldError(at, v, "want an integer, got %q", v.Value)
	}
	if err := v.Decode(dst); err != nil {
		return fieldError(at, v, "cannot read %q as %s", v.Value, kindName(dst))
	}
	return nil
}

func kindName(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *float64:
		return "a number"
	}
	return "an integer"
}

func parseAccount(n *yaml.Node, path string) (Account, error) {
	var a Account
	err := fields(n, path, func(key string, v *yaml.Node, at string) error {
		switch key {
		case "name":
			return decode(v, at, &a.Name)
		case "token":
			return decode(v, at, &a.Token)
		case "account_id":
			return decode(v, at, &a.AccountID)
		case "upgrade_rate":
			return decode(v, at, &a.UpgradeRate)
		case "upgrade_burst":
			return decode(v, at, &a.UpgradeBurst)
		case "plan_type":
			return decode(v, at, &a.PlanType)
		case "windows":
			if v.Kind != yaml.SequenceNode {
				return fieldError(at, v, "want a list of {length, budget}")
			}
			for k, wn := range v.Content {
				w, err := parseWindow(wn, fmt.Sprintf("%s[%d]", at, k))
				if err != nil {
					return err
				}
				a.Windows = append(a.Windows, w)
			}
			return nil
		}
		return fieldError(at, v, "unknown field")
	})
	return a, err
}

func parseWindow(n *yaml.Node, path string) (Window, error) {
	var w Window
	err := fields(n, path, func(key string, v *yaml.Node, at string) error {
		switch key {
		case "length":
			var s string
			if err := decode(v, at, &s); err != nil {
				return err
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return fieldError(at, v, "want a positive duration such as 5h or 300ms, got %q", s)
			}
			w.Length = d
			return nil
		case "budget":
			return decode(v, at, &w.Budget)
		}
		return fieldError(at, v, "unknown field")
	})
	if err == nil && w.Length == 0 {
		return w, fieldError(path+".length", n, "required")
	}
	return w, err
}
