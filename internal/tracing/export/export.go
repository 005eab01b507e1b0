// Package export starts the OTLP exporter of a process from its otel settings. It is apart from
// package tracing so that the pool's clients, which only carry trace context, do not link the
// OpenTelemetry SDK.
package export

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is the otel settings section. Tracing is on when Endpoint is set.
type Config struct {
	Endpoint    string // OTLP/HTTP base URL, e.g. http://collector:4318 (traces go to /v1/traces)
	Protocol    string // "http/protobuf" (the only one this build exports with); "" = that
	ServiceName string // resource service.name
	Sampler     string // OTEL_TRACES_SAMPLER's names; "" = parentbased_always_on
	SamplerArg  string // the ratio of the traceidratio samplers, 0..1
	Instance    string // resource service.instance.id: the worker id, or the gateway's address
}

// BadSetting is a bad value of the standard variable Var (its message never quotes a secret).
type BadSetting struct {
	Var string // e.g. OTEL_TRACES_SAMPLER
	Msg string
}

func (e *BadSetting) Error() string { return e.Var + ": " + e.Msg }

func bad(v, format string, args ...any) error {
	return &BadSetting{Var: v, Msg: fmt.Sprintf(format, args...)}
}

// Check reports the first bad field of c, a *BadSetting naming its variable.
func (c Config) Check() error {
	switch c.Protocol {
	case "", "http/protobuf":
	case "grpc", "http/json":
		return bad("OTEL_EXPORTER_OTLP_PROTOCOL", "%q is not supported: this build exports OTLP over http/protobuf (port 4318 of a collector)", c.Protocol)
	default:
		return bad("OTEL_EXPORTER_OTLP_PROTOCOL", "unknown protocol %q (want http/protobuf)", c.Protocol)
	}
	if _, err := c.sampler(); err != nil {
		return err
	}
	if c.Endpoint != "" {
		if _, err := tracesURL(c.Endpoint); err != nil {
			return err
		}
	}
	return nil
}

// sampler is the sampler the settings name, as the OpenTelemetry specification defines them.
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	if c.SamplerArg != "" {
		r, err := strconv.ParseFloat(c.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, bad("OTEL_TRACES_SAMPLER_ARG", "want a ratio between 0 and 1, got %q", c.SamplerArg)
		}
		ratio = r
	}
	switch c.Sampler {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, bad("OTEL_TRACES_SAMPLER", "unknown sampler %q (want always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off or parentbased_traceidratio)", c.Sampler)
}

// tracesURL is the OTLP/HTTP traces URL of a base endpoint; an endpoint that already ends in
// /v1/traces is kept.
func tracesURL(endpoint string) (string, error) {
	if !strings.HasPrefix(endpoint, "http://") && !strings.HasPrefix(endpoint, "https://") {
		return "", bad("OTEL_EXPORTER_OTLP_ENDPOINT", "want an http:// or https:// URL, got %q", redactURL(endpoint))
	}
	u := strings.TrimRight(endpoint, "/")
	if !strings.HasSuffix(u, "/v1/traces") {
		u += "/v1/traces"
	}
	return u, nil
}

// redactURL keeps a URL's user information out of an error.
func redactURL(s string) string {
	if at := strings.LastIndex(s, "@"); at >= 0 {
		return "<redacted>@" + s[at+1:]
	}
	return s
}

// Provider is a process's tracer provider and how to flush it.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// Off is the provider of a process without an endpoint: spans are no-ops that keep their
// parent's trace id.
func Off() *Provider { return &Provider{TracerProvider: noop.NewTracerProvider()} }

// On reports whether spans are exported.
func (p *Provider) On() bool { return p != nil && p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Flush exports the spans ended so far.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// New starts the exporter c names: Off without an endpoint. The batch processor's schedule and
// the exporter's headers, timeout and TLS are read by the OpenTelemetry SDK from the standard
// OTEL_BSP_* and OTEL_EXPORTER_OTLP_* variables.
func New(ctx context.Context, c Config) (*Provider, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.Endpoint == "" {
		return Off(), nil
	}
	url, _ := tracesURL(c.Endpoint)
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url))
	if err != nil {
		return nil, bad("OTEL_EXPORTER_OTLP_ENDPOINT", "%s", redactURL(err.Error()))
	}
	sampler, _ := c.sampler()
	attrs := []attribute.KeyValue{semconv.ServiceName(c.ServiceName)}
	if c.Instance != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(c.Instance))
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
	)
	return &Provider{TracerProvider: sdk, sdk: sdk}, nil
}
