package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// mcpgw sends spans with its own OTLP/HTTP exporter rather than
// otlptracehttp: that one's request type lives in the collector's service
// package, which carries gRPC service stubs and so links the whole gRPC
// stack and grpc-gateway. Without them the binary is 6 MB smaller and the
// process 4 MiB smaller in memory (BENCHMARKS.md), for an exporter of a
// few hundred lines that reads the same OTEL_EXPORTER_OTLP_* settings.

// otlpConfig is where and how spans are sent, from OTEL_EXPORTER_OTLP_*.
type otlpConfig struct {
	// url is the traces endpoint in full.
	url string
	// headers go with every request.
	headers http.Header
	gzip    bool
	// timeout bounds each export, its retries included.
	timeout time.Duration
	// tls is nil for the system's roots and no client certificate.
	tls *tls.Config
}

const (
	otlpDefaultTimeout = 10 * time.Second
	otlpTracesPath     = "v1/traces"
	// otlpMaxAnswer bounds what is read of a collector's answer: a status
	// message or a partial success.
	otlpMaxAnswer = 64 << 10
)

// otlpConfigFromEnv reads the exporter's settings. For each, the
// OTEL_EXPORTER_OTLP_TRACES_ variable wins over OTEL_EXPORTER_OTLP_. A
// value that cannot be used is an error naming the variable; an error
// never quotes a header value or a URL's password.
func otlpConfigFromEnv(env func(string) string, readFile func(string) ([]byte, error)) (otlpConfig, error) {
	cfg := otlpConfig{timeout: otlpDefaultTimeout}
	// lookup returns the variable that is set, traces first.
	lookup := func(suffix string) (name, value string) {
		for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + suffix, "OTEL_EXPORTER_OTLP_" + suffix} {
			if v := env(name); v != "" {
				return name, v
			}
		}
		return "", ""
	}

	if v := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		// A per-signal endpoint is used as it is; only an empty path
		// becomes "/".
		u, err := otlpEndpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v)
		if err != nil {
			return otlpConfig{}, err
		}
		if u.Path == "" {
			u.Path = "/"
		}
		cfg.url = u.String()
	} else if v := env("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		// The general endpoint is a base: the signal's path goes under it.
		u, err := otlpEndpoint("OTEL_EXPORTER_OTLP_ENDPOINT", v)
		if err != nil {
			return otlpConfig{}, err
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/" + otlpTracesPath
		u.RawPath = ""
		cfg.url = u.String()
	} else {
		return otlpConfig{}, errors.New("neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set")
	}

	if name, v := lookup("HEADERS"); name != "" {
		h, err := parseOTLPHeaders(v)
		if err != nil {
			return otlpConfig{}, fmt.Errorf("%s: %w", name, err)
		}
		cfg.headers = h
	}
	if name, v := lookup("TIMEOUT"); name != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > int64(time.Hour/time.Millisecond) {
			return otlpConfig{}, fmt.Errorf("%s=%q is not a number of milliseconds between 1 and 3600000", name, v)
		}
		cfg.timeout = time.Duration(ms) * time.Millisecond
	}
	if name, v := lookup("COMPRESSION"); name != "" {
		switch strings.ToLower(v) {
		case "gzip":
			cfg.gzip = true
		case "none":
		default:
			return otlpConfig{}, fmt.Errorf("%s=%q is not supported: use gzip or none", name, v)
		}
	}

	var tc *tls.Config
	if name, v := lookup("CERTIFICATE"); name != "" {
		pem, err := readFile(v)
		if err != nil {
			return otlpConfig{}, fmt.Errorf("%s: reading the collector's CA certificate: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return otlpConfig{}, fmt.Errorf("%s: %s holds no PEM certificate", name, v)
		}
		tc = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	certName, certFile := lookup("CLIENT_CERTIFICATE")
	keyName, keyFile := lookup("CLIENT_KEY")
	switch {
	case certName != "" && keyName != "":
		certPEM, err := readFile(certFile)
		if err != nil {
			return otlpConfig{}, fmt.Errorf("%s: reading the client certificate: %w", certName, err)
		}
		keyPEM, err := readFile(keyFile)
		if err != nil {
			return otlpConfig{}, fmt.Errorf("%s: reading the client key: %w", keyName, err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// X509KeyPair's errors describe the PEM blocks, never the key.
			return otlpConfig{}, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tc.Certificates = []tls.Certificate{cert}
	case certName != "":
		return otlpConfig{}, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_(TRACES_)CLIENT_KEY", certName)
	case keyName != "":
		return otlpConfig{}, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_(TRACES_)CLIENT_CERTIFICATE", keyName)
	}
	cfg.tls = tc
	return cfg, nil
}

// otlpEndpoint parses an endpoint variable: an http or https URL with a
// host. Its error shows the URL only without its password.
func otlpEndpoint(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%s is not an http:// or https:// URL with a host", name)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s=%q is not an http:// or https:// URL with a host", name, u.Redacted())
	}
	return u, nil
}

// parseOTLPHeaders reads the headers setting: comma-separated key=value
// pairs, each key and value percent-decoded (W3C Baggage's format, as the
// OTLP exporter specification defines it). An error names the pair by
// its position and key, never by its value: these carry API keys.
func parseOTLPHeaders(s string) (http.Header, error) {
	h := http.Header{}
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("pair %d has no '=': use key=value,key=value", i+1)
		}
		key, err := url.PathUnescape(strings.TrimSpace(k))
		if err != nil || !httpguts.ValidHeaderFieldName(key) {
			return nil, fmt.Errorf("pair %d: the key is not a valid header name", i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		val = strings.TrimSpace(val) // as HTTP would: what was encoded too
		if err != nil {
			return nil, fmt.Errorf("pair %d (%s): the value's percent-encoding is broken", i+1, key)
		}
		if !httpguts.ValidHeaderFieldValue(val) {
			return nil, fmt.Errorf("pair %d (%s): the value holds a control character", i+1, key)
		}
		h.Add(key, val)
	}
	return h, nil
}

// otlpExporter sends finished spans to an OTLP/HTTP collector, encoded as
// protobuf. It is the TracerProvider's exporter, behind its batcher.
type otlpExporter struct {
	cfg       otlpConfig
	target    string // cfg.url without its password, for errors
	client    *http.Client
	userAgent string
	// firstRetry and maxRetry bound the waits between attempts, which
	// double from the first with jitter. A collector's Retry-After wins.
	firstRetry, maxRetry time.Duration

	// stop is cancelled by Shutdown.
	stop     context.Context
	shutdown context.CancelFunc
}

func newOTLPExporter(cfg otlpConfig, version string) *otlpExporter {
	// otlpConfigFromEnv has parsed the URL; should it not parse, the
	// errors do not show it, as it may hold a password.
	target := "(an unreadable URL)"
	if u, err := url.Parse(cfg.url); err == nil {
		target = u.Redacted()
	}
	stop, shutdown := context.WithCancel(context.Background())
	return &otlpExporter{
		stop:     stop,
		shutdown: shutdown,
		cfg:      cfg,
		target:   target,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     cfg.tls,
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}},
		userAgent:  "mcpgw/" + version + " (OTLP/HTTP trace exporter)",
		firstRetry: time.Second,
		maxRetry:   30 * time.Second,
	}
}

// errOTLPStopped is returned by an export after Shutdown.
var errOTLPStopped = errors.New("the OTLP exporter is shut down")

// ExportSpans sends spans in one request. A collector that is down or
// answers 429, 502, 503 or 504 is tried again after a wait, within the
// export timeout and ctx; other answers end the export. A partial success
// is an error naming how many spans the collector rejected.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	if e.stop.Err() != nil {
		return errOTLPStopped
	}
	body, err := proto.Marshal(tracesData(spans))
	if err != nil {
		return fmt.Errorf("encoding %s for OTLP: %w", plural(len(spans), "span"), err)
	}
	if e.cfg.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body) // writes to a bytes.Buffer do not fail
		zw.Close()
		body = buf.Bytes()
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.stop, func() { cancel(errOTLPStopped) })()
	ctx, cancelTimeout := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancelTimeout()

	wait := e.firstRetry
	var last error
	for attempt := 1; ; attempt++ {
		retryAfter, err := e.send(ctx, body, len(spans))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && last != nil {
			// The timeout or Shutdown cut this attempt short: the answer
			// before it says more.
			return fmt.Errorf("%w (gave up after %s: %w)", last, plural(attempt, "attempt"), context.Cause(ctx))
		}
		var final *otlpFinalError
		if errors.As(err, &final) {
			return err
		}
		last = err
		delay := retryAfter
		if delay <= 0 {
			delay = wait/2 + rand.N(wait) // wait ± 50%
			wait = min(2*wait, e.maxRetry)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
			return fmt.Errorf("%w (gave up after %s: the next would come after the export timeout)", err, plural(attempt, "attempt"))
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %s: %w)", err, plural(attempt, "attempt"), context.Cause(ctx))
		}
	}
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// otlpFinalError is an answer that another attempt would not change.
type otlpFinalError struct{ msg string }

func (e *otlpFinalError) Error() string { return e.msg }

// send makes one attempt. It returns the wait a collector asked for with
// Retry-After, and an *otlpFinalError when trying again is pointless.
func (e *otlpExporter) send(ctx context.Context, body []byte, n int) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		// Not err: url.Parse's errors quote the URL, password and all.
		return 0, &otlpFinalError{fmt.Sprintf("building the OTLP request to %s failed", e.target)}
	}
	for k, vs := range e.cfg.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", e.userAgent)
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// url.Error names the request's URL: say it without a password.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, fmt.Errorf("sending %s to the OTLP collector at %s: %w", plural(n, "span"), e.target, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, otlpMaxAnswer))
	if err != nil && resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("the OTLP collector at %s answered %s, and reading its answer failed: %w", e.target, resp.Status, err)
	}
	isProto := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf")
	if resp.StatusCode/100 == 2 {
		if !isProto {
			return 0, nil
		}
		rejected, msg := otlpPartialSuccess(answer)
		if rejected == 0 && msg == "" {
			return 0, nil
		}
		return 0, &otlpFinalError{fmt.Sprintf("the OTLP collector at %s rejected %d of %s: %s", e.target, rejected, plural(n, "span"), orNone(msg))}
	}
	detail := otlpStatusMessage(answer, isProto)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After"), time.Now()), fmt.Errorf("the OTLP collector at %s answered %s: %s", e.target, resp.Status, orNone(detail))
	}
	return 0, &otlpFinalError{fmt.Sprintf("the OTLP collector at %s refused %s: %s: %s", e.target, plural(n, "span"), resp.Status, orNone(detail))}
}

func orNone(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}

// retryAfter reads a Retry-After header: seconds or an HTTP date. It is 0
// when absent or unreadable, and at most a minute.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Minute)
}

// otlpPartialSuccess reads ExportTraceServiceResponse's partial_success
// (field 1): rejected_spans (1) and error_message (2). An answer that is
// not that message reads as a full success, as an empty one does.
func otlpPartialSuccess(b []byte) (rejected int64, msg string) {
	ps, ok := protoField(b, 1, protowire.BytesType)
	if !ok {
		return 0, ""
	}
	if v, ok := protoField(ps, 1, protowire.VarintType); ok {
		n, _ := protowire.ConsumeVarint(v)
		rejected = int64(n)
	}
	if v, ok := protoField(ps, 2, protowire.BytesType); ok {
		msg = printable(v)
	}
	return rejected, msg
}

// otlpStatusMessage is what a failed answer says: google.rpc.Status's
// message (field 2) when the body is protobuf, else the body as text.
func otlpStatusMessage(b []byte, isProto bool) string {
	if isProto {
		if v, ok := protoField(b, 2, protowire.BytesType); ok {
			return printable(v)
		}
		return ""
	}
	return printable(b)
}

// protoField returns the last occurrence of field num with wire type typ
// in message b: the varint's bytes or the length-delimited payload. It
// reports false if b is not a well-formed message or has no such field.
func protoField(b []byte, num protowire.Number, typ protowire.Type) ([]byte, bool) {
	var (
		found []byte
		ok    bool
	)
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
		vl := protowire.ConsumeFieldValue(n, t, b)
		if vl < 0 {
			return nil, false
		}
		if n == num && t == typ {
			found, ok = b[:vl], true
			if t == protowire.BytesType {
				v, _ := protowire.ConsumeBytes(b)
				found = v
			}
		}
		b = b[vl:]
	}
	return found, ok
}

// printable makes a collector's text fit for a log line: at most 256
// bytes, control characters and invalid UTF-8 replaced, trimmed.
func printable(b []byte) string {
	const limit = 256
	cut := len(b) > limit
	if cut {
		b = b[:limit]
	}
	s := strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))
	s = strings.TrimSpace(s)
	if cut {
		s += "…"
	}
	return s
}

// Shutdown stops the exporter: an export under way gives up its retries,
// and later ones fail. The batcher has flushed before it calls this.
func (e *otlpExporter) Shutdown(ctx context.Context) error {
	e.shutdown()
	e.client.CloseIdleConnections()
	return ctx.Err()
}
