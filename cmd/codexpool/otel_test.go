package main

import (
	"strings"
	"testing"
)

// TestBadOtelSettings: a bad otel setting stops a worker and a gateway at start, naming the
// OpenTelemetry variable (or the file key), and never quoting a password in the endpoint.
func TestBadOtelSettings(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, `OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported`},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, "OTEL_EXPORTER_OTLP_PROTOCOL: unknown protocol"},
		{map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, `OTEL_TRACES_SAMPLER: unknown sampler "sometimes"`},
		{map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG: want a ratio between 0 and 1"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT: want an http:// or https:// URL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://user:hunter2-secret@collector"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
	} {
		getenv := func(k string) string { return tt.env[k] }
		_, _, werr := loadWorkerConfig(getenv, "")
		gc, _, gerr := loadGatewayConfig(getenv, "")
		if gerr == nil {
			_, gerr = gc.check()
		}
		for cmd, err := range map[string]error{"worker": werr, "gateway": gerr} {
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), cmd+": ") {
				t.Errorf("%s with %v: %v, want %q", cmd, tt.env, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%s: error quotes the endpoint's password: %v", cmd, err)
			}
		}
	}
	// The defaults, and an OTLP/HTTP endpoint, are fine.
	getenv := func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}[k]
	}
	if _, _, err := loadWorkerConfig(getenv, ""); err != nil {
		t.Errorf("worker with an endpoint: %v", err)
	}
}
