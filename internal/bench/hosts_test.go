package bench

import (
	"reflect"
	"testing"
	"time"
)

func TestParseHostsEnv(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		hosts   []string
		delay   time.Duration
		wantErr bool
	}{
		{name: "two hosts", in: "a,b@10ms", hosts: []string{"a", "b"}, delay: 10 * time.Millisecond},
		{name: "no delay", in: "a@0s", hosts: []string{"a"}},
		{name: "no separator", in: "a,b", wantErr: true},
		{name: "no hosts", in: "@10ms", wantErr: true},
		{name: "bad delay", in: "a@soon", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts, delay, err := ParseHostsEnv(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseHostsEnv(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && (!reflect.DeepEqual(hosts, tt.hosts) || delay != tt.delay) {
				t.Errorf("ParseHostsEnv(%q) = %q, %v; want %q, %v", tt.in, hosts, delay, tt.hosts, tt.delay)
			}
		})
	}
}

func TestWorkersSpreadOverHosts(t *testing.T) {
	cfg := Config{HostNamespaces: []string{"h1", "h2"}}
	for i, want := range []string{"h1", "h2", "h1"} {
		args := workerCommand(cfg, "/bin/codexpool", i).Args
		if got := args[3]; got != want {
			t.Errorf("worker %d runs in %s (%q), want %s", i, got, args, want)
		}
	}
	if got := workerCommand(Config{}, "/bin/codexpool", 0).Args; !reflect.DeepEqual(got, []string{"/bin/codexpool", "worker"}) {
		t.Errorf("without hosts: %q", got)
	}
}
