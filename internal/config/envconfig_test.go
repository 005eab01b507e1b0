package config

import (
	"strings"
	"testing"

	"github.com/kelseyhightower/envconfig"
)

// What envconfig.Process (v1.4.0) does that the environment layer must not: each test pins one
// reason the values are read through Loader.Getenv instead (envconfig.go). If one starts failing,
// envconfig changed: see whether Process can serve now.

// ProcSection is a section as the settings structs declare one.
type ProcSection struct {
	URL   string `envconfig:"NATS_URL" yaml:"url"`
	Count int    `envconfig:"COUNT" yaml:"count"`
}

type procSpec struct {
	ProcSection `yaml:"nats"`
}

// Process reads the process's environment: there is no way to hand it run's getenv, so tests of
// run could not stay hermetic (nor run in parallel), while Loader reads only what Getenv gives.
func TestEnvconfigReadsOnlyTheProcessEnvironment(t *testing.T) {
	t.Setenv("P_NATS_URL", "nats://from-os:4222")
	var c procSpec
	if err := envconfig.Process("P", &c); err != nil || c.URL != "nats://from-os:4222" {
		t.Fatalf("Process: %q, %v; want the process's P_NATS_URL", c.URL, err)
	}
	var ours procSpec
	if _, err := (Loader{Prefix: "P", Getenv: func(string) string { return "" }}).Load(&ours, ""); err != nil || ours.URL != "" {
		t.Fatalf("Load: %q, %v; want only what getenv gives (nothing)", ours.URL, err)
	}
}

// Process falls back to the tag without the prefix: NATS_URL, MODEL, GATE, ACCOUNTS ... of any
// other program would become codexpool settings.
func TestEnvconfigFallsBackToTheUnprefixedName(t *testing.T) {
	t.Setenv("NATS_URL", "nats://another-program:4222")
	var c procSpec
	if err := envconfig.Process("P", &c); err != nil || c.URL != "nats://another-program:4222" {
		t.Fatalf("Process: %q, %v; want the unprefixed NATS_URL taken", c.URL, err)
	}
}

// Process counts a variable set empty as set: it would blank a default; ours counts it as unset.
func TestEnvconfigTakesAnEmptyVariable(t *testing.T) {
	t.Setenv("P_NATS_URL", "")
	c := procSpec{ProcSection{URL: "default"}}
	if err := envconfig.Process("P", &c); err != nil || c.URL != "" {
		t.Fatalf("Process: %q, %v; want the default blanked", c.URL, err)
	}
}

// Process's errors quote the value: a secret pasted into the wrong variable would be printed.
func TestEnvconfigErrorsQuoteTheValue(t *testing.T) {
	t.Setenv("P_COUNT", "sk-secret-123")
	var c procSpec
	err := envconfig.Process("P", &c)
	if err == nil || !strings.Contains(err.Error(), "sk-secret-123") {
		t.Fatalf("Process: %v; want an error quoting the value", err)
	}
}

// The names are envconfig's: Fields takes each variable from envconfig's own list.
func TestFieldsNamesAreEnvconfigs(t *testing.T) {
	list, err := Fields("P", &procSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.Key+"="+s.Env)
	}
	if want := "nats.url=P_NATS_URL nats.count=P_COUNT"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}
