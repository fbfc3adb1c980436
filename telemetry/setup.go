package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options configures Setup.
type Options struct {
	// ServiceVersion is the service.version of the resource. If empty,
	// "dev".
	ServiceVersion string
	// LookupEnv reads the environment. If nil, nothing is set: no traces
	// are exported. (Only a proxy for the collector, HTTPS_PROXY and the
	// like, is read from the process environment.)
	LookupEnv func(string) (string, bool)
	// Logger, if set, receives what OpenTelemetry reports through its
	// global error handler (a failed export above all), which otherwise
	// prints a bare line to the standard logger. Setup installs it.
	Logger *slog.Logger
}

// Telemetry holds the providers Setup built. Give TracerProvider and
// MeterProvider to the packages' options, serve MetricsHandler on GET
// /metrics, and call Shutdown last.
type Telemetry struct {
	// TracerProvider records spans and exports them over OTLP, or is a
	// no-op provider when no endpoint is configured.
	TracerProvider trace.TracerProvider
	// MeterProvider collects metrics for MetricsHandler.
	MeterProvider metric.MeterProvider
	// MetricsHandler serves the metrics in the Prometheus text format,
	// with the Go runtime's and the process's (memory, CPU, open files).
	MetricsHandler http.Handler
	// Exporting reports whether spans are exported (an endpoint is set).
	Exporting bool

	shutdown []func(context.Context) error
}

// Setup builds the tracer and meter providers from the standard OTEL_*
// environment variables:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none, turns tracing
//     off; otherwise OTEL_TRACES_EXPORTER must be "otlp" (the default).
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
//     names the collector; with neither, spans are not recorded.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
//     must be http/protobuf (the default): mcpgw carries no gRPC stack.
//   - OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT, _COMPRESSION,
//     _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY tune the export
//     as the OTLP exporter specification defines; a value that cannot be
//     used is an error naming its variable.
//   - OTEL_SERVICE_NAME (default "mcpgw") and OTEL_RESOURCE_ATTRIBUTES
//     describe the resource; OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*
//     tune sampling and batching as the SDK defines.
//
// Metrics do not depend on these: they are always served by
// MetricsHandler.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	env := func(k string) string {
		if opts.LookupEnv == nil {
			return ""
		}
		v, _ := opts.LookupEnv(k)
		return strings.TrimSpace(v)
	}
	if opts.ServiceVersion == "" {
		opts.ServiceVersion = "dev"
	}
	attrs := []resource.Option{
		resource.WithAttributes(semconv.ServiceName("mcpgw"), semconv.ServiceVersion(opts.ServiceVersion)),
		resource.WithTelemetrySDK(),
	}
	if opts.LookupEnv != nil {
		attrs = append(attrs, resource.WithFromEnv()) // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: describing the resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}

	if logger := opts.Logger; logger != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("the OpenTelemetry SDK reported an error", "err", err)
		}))
	}
	t := &Telemetry{TracerProvider: noop.NewTracerProvider()}
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	exporter := env("OTEL_TRACES_EXPORTER")
	switch {
	case strings.EqualFold(env("OTEL_SDK_DISABLED"), "true"), exporter == "none":
	case exporter != "" && exporter != "otlp":
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q is not supported: use otlp or none", exporter)
	case endpoint != "":
		protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if protocol == "" {
			protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if protocol != "" && protocol != "http/protobuf" {
			return nil, fmt.Errorf("telemetry: OTLP protocol %q is not supported: use http/protobuf (the collector's port 4318)", protocol)
		}
		cfg, err := otlpConfigFromEnv(env, os.ReadFile)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		exp := newOTLPExporter(cfg, opts.ServiceVersion)
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.TracerProvider, t.Exporting = tp, true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}

	reg := prometheus.NewRegistry()
	if err := errors.Join(
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	); err != nil {
		return nil, fmt.Errorf("telemetry: registering the runtime collectors: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: creating the Prometheus exporter: %w", err)
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithResource(res)}
	if !t.Exporting && env("OTEL_METRICS_EXEMPLAR_FILTER") == "" {
		// Without exported traces no measurement has a sampled span to
		// link to, so the default trace_based filter only costs its check
		// on every measurement.
		mpOpts = append(mpOpts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	t.MeterProvider = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)
	t.MetricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return t, nil
}

// Shutdown flushes the spans not yet exported and stops the providers,
// within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	return nil
}
