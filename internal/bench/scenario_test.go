package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codexpool/codexpool/worker/codextest"
)

// TestPlan: one scenario per (mode, workers, accounts, concurrency, scope), in that nesting.
func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "defaults", cfg: Config{Modes: []string{"adaptive"}, Workers: 2, Concurrency: []int{30}},
			want: "[{adaptive 2 0 30 }]"},
		{name: "sweep", cfg: Config{Modes: []string{"fixed", "adaptive"}, WorkerCounts: []int{1, 2}, Concurrency: []int{10, 20}},
			want: "[{fixed 1 0 10 } {fixed 1 0 20 } {fixed 2 0 10 } {fixed 2 0 20 } {adaptive 1 0 10 } {adaptive 1 0 20 } {adaptive 2 0 10 } {adaptive 2 0 20 }]"},
		{name: "accounts and scopes", cfg: Config{Modes: []string{"off"}, Workers: 1, Concurrency: []int{5},
			Accounts: []codextest.Account{{Name: "a"}, {Name: "b"}}, AccountCounts: []int{1, 2}, Scopes: []string{"process", "host"}},
			want: "[{off 1 1 5 process} {off 1 1 5 host} {off 1 2 5 process} {off 1 2 5 host}]"},
		{name: "all accounts by default", cfg: Config{Modes: []string{"off"}, Workers: 1, Concurrency: []int{5},
			Accounts: []codextest.Account{{Name: "a"}, {Name: "b"}}},
			want: "[{off 1 2 5 }]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(plan(tt.cfg)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestScenarioTotal: --requests wins; else rounds x concurrency, at least one round.
func TestScenarioTotal(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		conc int
		want int
	}{
		{name: "requests", cfg: Config{Requests: 7, Rounds: 3}, conc: 10, want: 7},
		{name: "rounds", cfg: Config{Rounds: 3}, conc: 10, want: 30},
		{name: "zero rounds is one", cfg: Config{}, conc: 10, want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scenarioTotal(tt.cfg, tt.conc); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// TestWithScope: no scope changes nothing; process is passed as is and floods nothing; a
// shared scope is made unique to the row, labelled with its name, and floods its subject.
func TestWithScope(t *testing.T) {
	tests := []struct {
		name, scope, wantLabel, wantEnv string
		wantFlood                       bool
	}{
		{name: "none", wantLabel: "adaptive"},
		{name: "process", scope: "process", wantLabel: "adaptive/process", wantEnv: "CODEXPOOL_GATE_SCOPE=process"},
		{name: "shared", scope: "host", wantLabel: "adaptive/host", wantEnv: "CODEXPOOL_GATE_SCOPE=host-", wantFlood: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := []string{"CODEXPOOL_X=1"}
			cfg, label, flood := withScope(Config{scope: tt.scope, WorkerEnv: base, Timeout: time.Second}, "adaptive")
			if label != tt.wantLabel || (flood != "") != tt.wantFlood {
				t.Errorf("got label %q, flood subject %q; want %q, flood %v", label, flood, tt.wantLabel, tt.wantFlood)
			}
			env := strings.Join(cfg.WorkerEnv, " ")
			if tt.wantEnv != "" && !strings.Contains(env, tt.wantEnv) || tt.wantEnv == "" && len(cfg.WorkerEnv) != 1 {
				t.Errorf("got worker env %q, want %q added", env, tt.wantEnv)
			}
			if len(base) != 1 {
				t.Errorf("the caller's WorkerEnv changed: %q", base)
			}
		})
	}
}
