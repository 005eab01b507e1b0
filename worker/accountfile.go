package worker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/codexpool/codexpool/internal/egress"
	"github.com/codexpool/codexpool/internal/yamlfile"
)

// LoadAccounts reads the accounts file at path (see ParseAccounts). A relative auth_file is
// relative to the file's directory. getenv resolves token_env (os.Getenv in a process). Errors
// name the file, and the field and line at fault.
func LoadAccounts(path string, getenv func(string) string) ([]Account, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("worker: accounts file: %w", err)
	}
	accts, err := parseAccounts(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("worker: accounts file %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range accts {
		if f := accts[i].AuthFile; f != "" && !filepath.IsAbs(f) && f != "~" && !strings.HasPrefix(f, "~/") {
			accts[i].AuthFile = filepath.Join(dir, f)
		}
	}
	return accts, nil
}

// ParseAccounts decodes an accounts file, YAML or JSON: a list of accounts, or an object whose
// "accounts" key is that list.
//
//	accounts:                          # or the list alone at the top level
//	  - name: team-a                   # required, unique: shown in logs, metrics and errors
//	    auth_file: ~/.codex/auth.json  # a Codex CLI login, or:
//	  - name: team-b
//	    token_env: CODEX_TOKEN_B       # the name of an environment variable holding the token, or:
//	  - name: api
//	    token: sk-...                  # the token itself (keep the file private)
//	    account_id: 6f1c...            # optional: sent as ChatGPT-Account-Id
//	    max_used_percent: 80           # optional: never use it above 80% of a usage window
//	    max_concurrent: 2              # optional: at most 2 generations at once, over every worker
//	    proxy_url: socks5h://u:pw@h:1080 # optional: every byte of the account through it (default: Config.ProxyURL)
//
// Each account has exactly one of auth_file, token and token_env. getenv resolves token_env; an
// unset or empty variable is an error. Unknown fields are errors. Every error names the field
// (accounts[1].token_env) and its line, and never holds a token or a variable's value.
func ParseAccounts(data []byte, getenv func(string) string) ([]Account, error) {
	accts, err := parseAccounts(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("worker: accounts file: %w", err)
	}
	return accts, nil
}

func parseAccounts(data []byte, getenv func(string) string) ([]Account, error) {
	items, err := yamlfile.List(data, "accounts", "token", "account_id", "proxy_url")
	if err != nil {
		return nil, err
	}
	accts := make([]Account, 0, len(items))
	lines := map[string]int{} // name -> index, for duplicates
	for i, n := range items {
		a, err := parseAccount(n, getenv)
		if err != nil {
			return nil, err
		}
		if j, dup := lines[a.Name]; dup {
			name, _ := n.Value("name")
			return nil, name.Errorf("%q is also the name of accounts[%d]", a.Name, j)
		}
		lines[a.Name] = i
		accts = append(accts, a)
	}
	return accts, nil
}

// scalar returns the text of a scalar node; secret keeps its value out of the error.
func scalar(n yamlfile.Node, secret bool) (string, error) {
	if !n.IsScalar() {
		return "", n.Errorf("want a single value")
	}
	if n.IsNull() {
		return "", n.Errorf("must not be empty")
	}
	v := strings.TrimSpace(n.Text())
	if v == "" {
		return "", n.Errorf("must not be empty")
	}
	if n.Tag() != "!!str" && !secret {
		// A number or a boolean where a name or path belongs is a mistake worth pointing at.
		return "", n.Errorf("want a string, got %s", n.Text())
	}
	return v, nil
}

func parseAccount(n yamlfile.Node, getenv func(string) string) (Account, error) {
	var a Account
	if !n.IsMapping() {
		return a, n.Errorf("want an object with name and one of auth_file, token, token_env")
	}
	var creds []string // the credential fields given, in order
	var tokenEnv string
	var tokenEnvNode *yamlfile.Node
	err := n.Fields(func(k, v yamlfile.Node) error {
		var err error
		switch key := k.Text(); key {
		case "name":
			a.Name, err = scalar(v, false)
		case "auth_file":
			a.AuthFile, err = scalar(v, false)
			creds = append(creds, key)
		case "token":
			a.Token, err = scalar(v, true)
			a.source = "token in the accounts file"
			creds = append(creds, key)
		case "token_env":
			tokenEnv, err = scalar(v, false)
			tokenEnvNode = &v
			creds = append(creds, key)
		case "account_id":
			a.AccountID, err = scalar(v, true)
		case "max_used_percent":
			a.MaxUsedPercent, err = percent(v)
		case "max_concurrent":
			a.MaxConcurrent, err = positiveInt(v)
		case "proxy_url":
			if a.ProxyURL, err = scalar(v, true); err == nil {
				if _, perr := egress.Parse("proxy_url", a.ProxyURL); perr != nil {
					err = v.Errorf("%s", strings.TrimPrefix(perr.Error(), "proxy_url: "))
				}
			}
		default:
			err = k.Errorf("unknown field (want name, auth_file, token, token_env, account_id, max_used_percent, max_concurrent, proxy_url)")
		}
		return err
	})
	if err != nil {
		return a, err
	}
	switch {
	case a.Name == "":
		return a, n.At(n.Path + ".name").Errorf("required")
	case len(creds) == 0:
		return a, n.Errorf("account %q has no credentials: give one of auth_file, token, token_env", a.Name)
	case len(creds) > 1:
		return a, n.Errorf("account %q has %s: give exactly one", a.Name, strings.Join(creds, " and "))
	}
	if tokenEnvNode != nil {
		if getenv == nil {
			getenv = os.Getenv
		}
		a.Token = strings.TrimSpace(getenv(tokenEnv))
		if a.Token == "" {
			return a, tokenEnvNode.Errorf("environment variable %s is not set or empty", tokenEnv)
		}
		a.source = "env " + tokenEnv
	}
	return a, nil
}

// percent decodes max_used_percent: a number above 0 and at most 100.
func percent(n yamlfile.Node) (float64, error) {
	if !n.IsScalar() || (n.Tag() != "!!int" && n.Tag() != "!!float") {
		return 0, n.Errorf("want a number above 0 and at most 100, got %s", strconv.Quote(n.Text()))
	}
	f, err := strconv.ParseFloat(n.Text(), 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 100 {
		return 0, n.Errorf("want a number above 0 and at most 100, got %s", n.Text())
	}
	return f, nil
}

// positiveInt decodes max_concurrent: a whole number of at least 1.
func positiveInt(n yamlfile.Node) (int, error) {
	if n.IsScalar() && n.Tag() == "!!int" {
		if v, err := strconv.Atoi(n.Text()); err == nil && v >= 1 {
			return v, nil
		}
	}
	return 0, n.Errorf("want a whole number of at least 1, got %s", strconv.Quote(n.Text()))
}
