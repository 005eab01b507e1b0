package worker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codexpool/codexpool/internal/accountlist"
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
	items, err := accountlist.Items(data)
	if err != nil {
		return nil, err
	}
	accts := make([]Account, 0, len(items))
	lines := map[string]int{} // name -> index, for duplicates
	for i, n := range items {
		a, err := parseAccount(n, fmt.Sprintf("accounts[%d]", i), getenv)
		if err != nil {
			return nil, err
		}
		if j, dup := lines[a.Name]; dup {
			return nil, fmt.Errorf("accounts[%d].name (line %d): %q is also the name of accounts[%d]", i, nameLine(n), a.Name, j)
		}
		lines[a.Name] = i
		accts = append(accts, a)
	}
	return accts, nil
}

// nameLine is the line of an account's name (its own line when it has none).
func nameLine(n *yaml.Node) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			return n.Content[i+1].Line
		}
	}
	return n.Line
}

// fieldError names the field at path and the line of n.
func fieldError(path string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s (line %d): %s", path, n.Line, fmt.Sprintf(format, args...))
}

// scalar returns the text of a scalar node; secret keeps its value out of the error.
func scalar(n *yaml.Node, path string, secret bool) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fieldError(path, n, "want a single value")
	}
	if n.ShortTag() == "!!null" {
		return "", fieldError(path, n, "must not be empty")
	}
	v := strings.TrimSpace(n.Value)
	if v == "" {
		return "", fieldError(path, n, "must not be empty")
	}
	if n.ShortTag() != "!!str" && !secret {
		// A number or a boolean where a name or path belongs is a mistake worth pointing at.
		return "", fieldError(path, n, "want a string, got %s", n.Value)
	}
	return v, nil
}

func parseAccount(n *yaml.Node, path string, getenv func(string) string) (Account, error) {
	var a Account
	if n.Kind != yaml.MappingNode {
		return a, fieldError(path, n, "want an object with name and one of auth_file, token, token_env")
	}
	var creds []string // the credential fields given, in order
	var tokenEnv string
	var tokenEnvNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, v := n.Content[i].Value, n.Content[i+1]
		at := path + "." + key
		var err error
		switch key {
		case "name":
			a.Name, err = scalar(v, at, false)
		case "auth_file":
			a.AuthFile, err = scalar(v, at, false)
			creds = append(creds, key)
		case "token":
			a.Token, err = scalar(v, at, true)
			a.source = "token in the accounts file"
			creds = append(creds, key)
		case "token_env":
			tokenEnv, err = scalar(v, at, false)
			tokenEnvNode = v
			creds = append(creds, key)
		case "account_id":
			a.AccountID, err = scalar(v, at, true)
		case "max_used_percent":
			a.MaxUsedPercent, err = percent(v, at)
		case "max_concurrent":
			a.MaxConcurrent, err = positiveInt(v, at)
		default:
			err = fieldError(at, n.Content[i], "unknown field (want name, auth_file, token, token_env, account_id, max_used_percent, max_concurrent)")
		}
		if err != nil {
			return a, err
		}
	}
	switch {
	case a.Name == "":
		return a, fieldError(path+".name", n, "required")
	case len(creds) == 0:
		return a, fieldError(path, n, "account %q has no credentials: give one of auth_file, token, token_env", a.Name)
	case len(creds) > 1:
		return a, fieldError(path, n, "account %q has %s: give exactly one", a.Name, strings.Join(creds, " and "))
	}
	if tokenEnvNode != nil {
		if getenv == nil {
			getenv = os.Getenv
		}
		a.Token = strings.TrimSpace(getenv(tokenEnv))
		if a.Token == "" {
			return a, fieldError(path+".token_env", tokenEnvNode, "environment variable %s is not set or empty", tokenEnv)
		}
		a.source = "env " + tokenEnv
	}
	return a, nil
}

// percent decodes max_used_percent: a number above 0 and at most 100.
func percent(n *yaml.Node, at string) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return 0, fieldError(at, n, "want a number above 0 and at most 100, got %s", strconv.Quote(n.Value))
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 100 {
		return 0, fieldError(at, n, "want a number above 0 and at most 100, got %s", n.Value)
	}
	return f, nil
}

// positiveInt decodes max_concurrent: a whole number of at least 1.
func positiveInt(n *yaml.Node, at string) (int, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		if v, err := strconv.Atoi(n.Value); err == nil && v >= 1 {
			return v, nil
		}
	}
	return 0, fieldError(at, n, "want a whole number of at least 1, got %s", strconv.Quote(n.Value))
}
