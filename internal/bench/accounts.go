package bench

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/codexpool/codexpool/worker/codextest"
)

// accountCounts are the scenarios' account counts: Config.AccountCounts, else every account of
// Config.Accounts; [0] without accounts (the workers use CODEXPOOL_CODEX_TOKEN).
func accountCounts(cfg Config) []int {
	switch {
	case len(cfg.Accounts) == 0:
		return []int{0}
	case len(cfg.AccountCounts) == 0:
		return []int{len(cfg.Accounts)}
	}
	return cfg.AccountCounts
}

// checkAccounts refuses account counts the simulator's accounts cannot serve.
func checkAccounts(cfg Config) error {
	for _, n := range cfg.AccountCounts {
		if n < 1 || n > len(cfg.Accounts) {
			return fmt.Errorf("bench: %d accounts asked for, the simulator has %d", n, len(cfg.Accounts))
		}
	}
	for _, a := range cfg.Accounts {
		if a.Token == "" {
			return fmt.Errorf("bench: account %q has no token: the workers need one", a.Name)
		}
	}
	return nil
}

// writeAccountsFile writes the workers' CODEXPOOL_ACCOUNTS file for the first n simulator
// accounts (name and token) into dir.
func writeAccountsFile(dir string, accts []codextest.Account, n int) (string, error) {
	type entry struct {
		Name  string `yaml:"name"`
		Token string `yaml:"token"`
	}
	list := make([]entry, n)
	for i, a := range accts[:n] {
		list[i] = entry{Name: a.Name, Token: a.Token}
	}
	b, err := yaml.Marshal(list)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("accounts-%d.yaml", n))
	return path, os.WriteFile(path, b, 0o600)
}

// label is the mode column of a result: the gate mode, and the accounts when there are some.
func (r Result) label() string {
	l := r.Mode
	if r.Accounts > 0 {
		l = fmt.Sprintf("%s×%dacct", l, r.Accounts)
	}
	if r.Hosts > 0 {
		l = fmt.Sprintf("%s@%dh+%gms", l, r.Hosts, r.HostDelayMS)
	}
	return l
}
