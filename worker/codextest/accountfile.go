package codextest

import (
	"fmt"
	"os"
	"time"

	"github.com/codexpool/codexpool/internal/yamlfile"
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
	items, err := yamlfile.List(data, "accounts", "token")
	if err != nil {
		return nil, err
	}
	accts := make([]Account, 0, len(items))
	for _, n := range items {
		a, err := parseAccount(n)
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

// fields calls f for each key and value of the mapping n, rejecting anything else.
func fields(n yamlfile.Node, f func(key string, v yamlfile.Node) error) error {
	if !n.IsMapping() {
		return n.Errorf("want an object")
	}
	return n.Fields(func(k, v yamlfile.Node) error { return f(k.Text(), v) })
}

// decode decodes the scalar v into dst, naming its path on failure.
func decode(v yamlfile.Node, dst any) error {
	if !v.IsScalar() {
		return v.Errorf("want a single value")
	}
	// yaml truncates 1.5 into an int; a count must be written as one.
	if _, isInt := dst.(*int); isInt && v.Tag() != "!!int" {
		return v.Errorf("want an integer, got %q", v.Text())
	}
	if err := v.Decode(dst); err != nil {
		return v.Errorf("cannot read %q as %s", v.Text(), kindName(dst))
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

func parseAccount(n yamlfile.Node) (Account, error) {
	var a Account
	err := fields(n, func(key string, v yamlfile.Node) error {
		switch key {
		case "name":
			return decode(v, &a.Name)
		case "token":
			return decode(v, &a.Token)
		case "account_id":
			return decode(v, &a.AccountID)
		case "upgrade_rate":
			return decode(v, &a.UpgradeRate)
		case "upgrade_burst":
			return decode(v, &a.UpgradeBurst)
		case "plan_type":
			return decode(v, &a.PlanType)
		case "windows":
			if !v.IsList() {
				return v.Errorf("want a list of {length, budget}")
			}
			for _, wn := range v.Items() {
				w, err := parseWindow(wn)
				if err != nil {
					return err
				}
				a.Windows = append(a.Windows, w)
			}
			return nil
		}
		return v.Errorf("unknown field")
	})
	return a, err
}

func parseWindow(n yamlfile.Node) (Window, error) {
	var w Window
	err := fields(n, func(key string, v yamlfile.Node) error {
		switch key {
		case "length":
			var s string
			if err := decode(v, &s); err != nil {
				return err
			}
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return v.Errorf("want a positive duration such as 5h or 300ms, got %q", s)
			}
			w.Length = d
			return nil
		case "budget":
			return decode(v, &w.Budget)
		}
		return v.Errorf("unknown field")
	})
	if err == nil && w.Length == 0 {
		return w, n.At(n.Path + ".length").Errorf("required")
	}
	return w, err
}
