package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Profiles    []string          `yaml:"profiles"`
		Ports       []string          `yaml:"ports"`
		StopGrace   string            `yaml:"stop_grace_period"`
	} `yaml:"services"`
}

// TestComposeFile checks docker-compose.yml: NATS with JetStream, a buildable worker that only
// sets real settings, a gateway that only sets gateway settings, and the simulator behind an
// opt-in profile.
func TestComposeFile(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	nats, ok := cf.Services["nats"]
	if !ok {
		t.Fatal("no nats service")
	}
	natsConfigured(t, nats.Command)
	for name, svc := range cf.Services {
		for _, p := range svc.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes port %q beyond the host's loopback", name, p)
			}
		}
		if url := svc.Environment["CODEXPOOL_NATS_URL"]; url != "" && svc.Environment["CODEXPOOL_NATS_USER"] == "" {
			t.Errorf("service %s connects to NATS without a role user", name)
		}
	}
	w, ok := cf.Services["worker"]
	if !ok {
		t.Fatal("no worker service")
	}
	if w.Build == nil {
		t.Error("worker has no build section")
	}
	if len(w.Profiles) != 0 {
		t.Errorf("worker is behind profiles %q; it must start by default", w.Profiles)
	}
	if grace, err := time.ParseDuration(w.StopGrace); err != nil || grace < 90*time.Second {
		t.Errorf("worker stop_grace_period %q: want at least the 30 s grace plus a 60 s refresh in flight", w.StopGrace)
	}
	if scope := w.Environment["CODEXPOOL_GATE_SCOPE"]; scope == "" || scope == "host" {
		t.Errorf("worker CODEXPOOL_GATE_SCOPE %q: replicas have hostnames of their own, so host would keep every gate alone", scope)
	}
	if w.Environment["CODEXPOOL_NATS_URL"] == "" {
		t.Error("worker does not set CODEXPOOL_NATS_URL, so each replica would embed its own NATS server")
	}
	known := settingNames(&workerConfig{})
	for _, name := range []string{"worker", "sim", "nats"} {
		for k := range cf.Services[name].Environment {
			if strings.HasPrefix(k, "CODEXPOOL_") && !slices.Contains(known, k) {
				t.Errorf("service %s sets %s, which is not a worker setting (known: %v)", name, k, known)
			}
		}
	}
	gw, ok := cf.Services["gateway"]
	if !ok {
		t.Fatal("no gateway service")
	}
	if len(gw.Command) == 0 || gw.Command[0] != "gateway" {
		t.Errorf("gateway command = %q, want it to run `codexpool gateway`", gw.Command)
	}
	gwKnown := settingNames(&gatewayConfig{})
	for k := range gw.Environment {
		if strings.HasPrefix(k, "CODEXPOOL_") && !slices.Contains(gwKnown, k) {
			t.Errorf("service gateway sets %s, which is not a gateway setting (known: %v)", k, gwKnown)
		}
	}
	for _, k := range []string{"CODEXPOOL_NATS_URL", "CODEXPOOL_GATEWAY_ADDR", "CODEXPOOL_GATEWAY_KEYS"} {
		if _, ok := gw.Environment[k]; !ok {
			t.Errorf("gateway does not set %s", k)
		}
	}
	sim, ok := cf.Services["sim"]
	if !ok {
		t.Fatal("no sim service")
	}
	if !slices.Contains(sim.Profiles, "sim") {
		t.Errorf("sim profiles = %q, want it behind the opt-in profile \"sim\"", sim.Profiles)
	}
	if len(sim.Command) == 0 || sim.Command[0] != "sim" {
		t.Errorf("sim command = %q, want it to run `codexpool sim`", sim.Command)
	}
}

// natsConfigured checks that compose's NATS server runs the config that turns JetStream on and
// admits only the four roles.
func natsConfigured(t *testing.T, command []string) {
	t.Helper()
	if !slices.Equal(command, []string{"--config", "/etc/nats/nats-compose.conf"}) {
		t.Fatalf("nats command %q, want --config /etc/nats/nats-compose.conf", command)
	}
	conf, err := os.ReadFile("../../docs/nats-compose.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"jetstream", "include ./nats-roles.conf"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("docs/nats-compose.conf lacks %q", want)
		}
	}
}

// TestSecurityPageShowsTheRoles keeps docs/security.md's copy of the roles file in step with the
// file that TestE2ERoles runs.
func TestSecurityPageShowsTheRoles(t *testing.T) {
	readme, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	roles, err := os.ReadFile(rolesFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```\n"+string(roles)+"```") {
		t.Error("docs/security.md does not show docs/nats-roles.conf as it is")
	}
}

// TestConfigurationPageListsEverySetting keeps docs/configuration.md's settings tables in step
// with the code.
func TestConfigurationPageListsEverySetting(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(settingNames(&workerConfig{}), settingNames(&gatewayConfig{})...) {
		if !strings.Contains(string(raw), name) {
			t.Errorf("docs/configuration.md does not document %s", name)
		}
	}
}
