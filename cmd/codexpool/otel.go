package main

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/codexpool/codexpool/internal/config"
	"github.com/codexpool/codexpool/internal/tracing/export"
)

// Otel is the otel section: OpenTelemetry traces, exported over OTLP/HTTP when an endpoint is
// set. Its variables are OpenTelemetry's own (std:"true": no CODEXPOOL_ prefix), so a fleet's
// usual OTEL_* environment configures the pool too; the exporter's other standard variables
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _TRACES_ENDPOINT, OTEL_BSP_*) are read by the SDK.
type Otel struct {
	OtelEndpoint   string `envconfig:"OTEL_EXPORTER_OTLP_ENDPOINT" std:"true" yaml:"endpoint" secret:"url"`
	OtelProtocol   string `envconfig:"OTEL_EXPORTER_OTLP_PROTOCOL" std:"true" yaml:"protocol"`
	OtelService    string `envconfig:"OTEL_SERVICE_NAME" std:"true" yaml:"service_name"`
	OtelSampler    string `envconfig:"OTEL_TRACES_SAMPLER" std:"true" yaml:"sampler"`
	OtelSamplerArg string `envconfig:"OTEL_TRACES_SAMPLER_ARG" std:"true" yaml:"sampler_arg"`
}

// defaultOtel returns the otel section's defaults. The service name's default depends on the
// subcommand ("codexpool-worker", "codexpool-gateway"), so the setting's own default is empty:
// one settings file serves both.
func defaultOtel() Otel {
	return Otel{OtelProtocol: "http/protobuf", OtelSampler: "parentbased_always_on"}
}

// exportConfig is the section as the exporter takes it for the subcommand cmd; instance names
// this process.
func (o Otel) exportConfig(cmd, instance string) export.Config {
	return export.Config{Endpoint: o.OtelEndpoint, Protocol: o.OtelProtocol, ServiceName: cmp.Or(o.OtelService, "codexpool-"+cmd),
		Sampler: o.OtelSampler, SamplerArg: o.OtelSamplerArg, Instance: instance}
}

// validate checks the section for the subcommand cmd; the error names the variable.
func (o Otel) validate(cmd string) error {
	err := o.exportConfig(cmd, "").Check()
	var bs *export.BadSetting
	if errors.As(err, &bs) {
		return &config.FieldError{Prefix: cmd, Env: bs.Var, Msg: bs.Msg}
	}
	return err
}

// tracingFlush bounds how long a stopping process spends exporting the spans it still holds.
const tracingFlush = 5 * time.Second

// startTracing starts the exporter of o (tracing off without an endpoint) and returns its undo,
// which exports what is buffered.
func startTracing(o Otel, cmd, instance string, log *slog.Logger) (*export.Provider, func(), error) {
	c := o.exportConfig(cmd, instance)
	tp, err := export.New(context.Background(), c)
	if err != nil {
		return nil, nil, err
	}
	if !tp.On() {
		return tp, nil, nil
	}
	log.Info("tracing on", "endpoint", config.Redact("url", o.OtelEndpoint), "service", c.ServiceName, "sampler", o.OtelSampler)
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: could not export the last spans", "error", err)
		}
	}, nil
}
