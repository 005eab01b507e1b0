package config

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, secret, value, want string
	}{
		{"not secret", "", "abc", "abc"},
		{"secret", "true", "sk-123", "<redacted>"},
		{"empty secret", "true", "", ""},
		{"url without user", "url", "nats://n1:4222", "nats://n1:4222"},
		{"url with password", "url", "nats://u:pw@n1:4222,tls://tok@n2:4222", "nats://<redacted>@n1:4222,tls://<redacted>@n2:4222"},
		{"url without scheme", "url", "u:pw@n1:4222", "<redacted>@n1:4222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.secret, tt.value); got != tt.want {
				t.Errorf("Redact(%q, %q) = %q, want %q", tt.secret, tt.value, got, tt.want)
			}
		})
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"codex.model", "gate.mode", "log.level", "nats.max_inflight", "nats.url"}
	tests := []struct{ name, in, want string }{
		{"typo", "nats.ulr", "nats.url"},
		{"wrong section", "codex.max_inflight", "nats.max_inflight"},
		{"typo in section", "natz.url", "nats.url"},
		{"typo in name", "log.levle", "log.level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := closest(tt.in, keys); got != tt.want {
				t.Errorf("closest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 2 * time.Minute: "2m", 24 * time.Hour: "24h", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

type (
	unexported struct {
		A string `envconfig:"A" yaml:"a"`
	}
	MSOnInt struct {
		A int `envconfig:"A" yaml:"a" ms:"A_MS"`
	}
	FloatField struct {
		A float64 `envconfig:"A" yaml:"a"`
	}
)

func TestFieldsRejectsBadTags(t *testing.T) {
	tests := []struct {
		name string
		spec any
		want string
	}{
		{"no section", &struct {
			A string `envconfig:"A" yaml:"a"`
		}{}, "section.name"},
		{"ms on an int", &struct {
			MSOnInt `yaml:"s"`
		}{}, "time.Duration"},
		{"unsupported type", &struct {
			FloatField `yaml:"s"`
		}{}, "unsupported"},
		{"not a pointer", struct{}{}, "pointer"},
		{"unexported section", &struct {
			unexported `yaml:"s"`
		}{}, "envconfig does not see"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Fields("P", tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

type (
	SectionS struct {
		Name string        `envconfig:"NAME" yaml:"name"`
		Wait time.Duration `envconfig:"WAIT" ms:"WAIT_MS" yaml:"wait"`
	}
	SectionT struct {
		Count int `envconfig:"COUNT" yaml:"count"`
	}
)

func TestLoadEnvOverFile(t *testing.T) {
	type spec struct {
		SectionS `yaml:"s"`
		SectionT `yaml:"t"`
	}
	path := t.TempDir() + "/c.yaml"
	writeFile(t, path, "s:\n  name: file\n  wait: 2s\nt:\n  count: 3\n")
	c := spec{SectionS{Name: "default"}, SectionT{Count: 1}}
	env := map[string]string{"P_WAIT_MS": "40", "P_COUNT": "9"}
	st, err := Loader{Prefix: "P", Getenv: func(k string) string { return env[k] }}.Load(&c, path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "file" || c.Wait != 40*time.Millisecond || c.Count != 9 {
		t.Fatalf("got %+v, want name from the file, wait and count from the environment", c)
	}
	if s, _ := st.Lookup("P_NAME"); s.Source != File || s.Line != 2 {
		t.Errorf("P_NAME: %s line %d, want file line 2", s.Source, s.Line)
	}
	if s, _ := st.Lookup("P_WAIT"); s.Source != Env || s.Var != "P_WAIT_MS" {
		t.Errorf("P_WAIT: %s %s, want env P_WAIT_MS", s.Source, s.Var)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownVars(t *testing.T) {
	type NATS struct {
		MaxInflight int `envconfig:"MAX_INFLIGHT" yaml:"max_inflight"`
	}
	type Gateway struct {
		Keys string `envconfig:"GATEWAY_KEYS" yaml:"keys"`
	}
	type Gate struct {
		Spacing time.Duration `envconfig:"SPACING" ms:"SPACING_MS" yaml:"spacing"`
	}
	type spec struct {
		NATS    `yaml:"nats"`
		Gateway `yaml:"gateway"`
		Gate    `yaml:"gate"`
	}
	l := Loader{Prefix: "P", Known: []any{&spec{}}}
	tests := []struct {
		name    string
		environ []string
		want    []Unknown
	}{
		{"settings are known", []string{"P_MAX_INFLIGHT=5", "P_GATEWAY_KEYS=k", "P_SPACING_MS=40"}, nil},
		{"a typo names the setting", []string{"P_MAX_INFLIGT=5"}, []Unknown{{"P_MAX_INFLIGT", "P_MAX_INFLIGHT"}}},
		{"singular of a plural", []string{"P_GATEWAY_KEY=k"}, []Unknown{{"P_GATEWAY_KEY", "P_GATEWAY_KEYS"}}},
		{"other prefixes and empty values are ignored", []string{"PATH=/bin", "PX_A=1", "P_MAX_INFLIGT=", "P="}, nil},
		{"names read on purpose are not settings", []string{"P_CONFIG=/etc/p.yaml"}, nil},
		{"in order", []string{"P_B=1", "P_A=1"}, []Unknown{{"P_B", "P_SPACING"}, {"P_A", "P_SPACING"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.UnknownVars(tt.environ, []string{"P_CONFIG"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("UnknownVars(%q) = %v, want %v", tt.environ, got, tt.want)
			}
		})
	}
}
