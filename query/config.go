package query

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/readgate"
	"github.com/slide-metrics/slide/window"
)

// MaxMaxSeriesLimit bounds Config.MaxSeriesLimit: a cluster's /v1/series asks each owner
// for a page and one more, and an owner answers at most 1<<24 series (cluster.MaxKeysLimit)
// and refuses a larger page.
const MaxMaxSeriesLimit = 1<<24 - 1

// Defaults of Config.
const (
	DefaultMaxBodyBytes    = 1 << 20 // POST /v1/events body cap: 1 MiB
	DefaultTopK            = 10      // /v1/top k when absent
	DefaultMaxTopK         = 1000    // largest k /v1/top accepts
	DefaultSeriesLimit     = 100     // /v1/series page size when absent
	DefaultMaxSeriesLimit  = 10000   // largest page /v1/series accepts
	DefaultExportMaxSeries = 1000    // window series exported as gauges per scrape, all specs together

	// DefaultReadTimeout bounds a read that scans series: 25 s, five seconds under slide
	// serve's write timeout of 30 s, so that its 503 still reaches the client.
	DefaultReadTimeout = 25 * time.Second
)

// defaultQuantiles are the quantiles /v1/window answers when the request names none.
var defaultQuantiles = []float64{0.5, 0.95, 0.99}

// Config configures a Server. Only Store is required; every other zero field means the
// documented default or "feature off".
type Config struct {
	// Store is the window store the read routes query. Required.
	Store *window.Store

	// Now is the clock. Every read passes Now().UnixMilli() to the store, so tests drive
	// time explicitly. Default time.Now.
	Now func() time.Time

	// Ready reports whether the engine can answer: an error while ingest restores windows
	// at the start (slide serve: until its first restore is done). /readyz and the read
	// routes (/v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics) answer 503 with its
	// message while it fails, since a window being replayed would give wrong answers;
	// /v1/status reports it. Nil means always ready.
	Ready func() error
	// Restoring, when set, lists the partitions this instance owns whose windows are being
	// restored while it is ready (gained in a rebalance after its first restore): /readyz's
	// 200 and /v1/status name them ("restoring_partitions"), and a read's 503 over missing
	// partitions says which of them are restoring here. Reads do not cover them: Cluster
	// reports them missing. Nil: none.
	Restoring func() []int32
	// RestoringLimits, when set, lists the partitions whose limiter state (cluster
	// policies, limiter/clusterlimit) this instance restores while it is ready: their keys'
	// decisions follow on_backend_error meanwhile. /readyz's 200 and /v1/status name them
	// ("restoring_limits"). Nil: none.
	RestoringLimits func() []int32

	// Backends, when set, lists the external systems (Kafka, Redis) and their last checked
	// state; /readyz shows them in its answer, ready or not. Nil: none shown.
	Backends func() []BackendState
	// Cluster answers the read routes over every instance of the consumer group when this
	// one does not hold every partition (see Cluster). Nil: this instance's store only.
	Cluster Cluster
	// Progress, when set, is what GET /v1/status reports as "progress": the restore and
	// lag state of the engine (slide serve passes the Kafka consumer's Progress). Its value
	// is marshalled with encoding/json. Nil: progress is null.
	Progress func() any

	// Events records POST /v1/events bodies: NDJSON, one event a line, the same format,
	// checks and refusal reasons as a Kafka record's value (package event), at the request's
	// time. Such events are not in the log: a restart loses them and, with several
	// instances, they land on the instance that received them; producers that need
	// durability or partitioning write to the topic instead. Nil: the route answers 501
	// not_configured.
	Events *event.Intake
	// EventsByType picks the intake of a POST /v1/events body by its Content-Type's media
	// type (parameters ignored, matched in lower case): slide serve gives
	// "application/x-protobuf" an otlp_proto intake and "application/x-ndjson" slide's JSON,
	// while Events, the --event-format's, takes "application/json" and every other type.
	// Nil: Events takes every body.
	EventsByType map[string]*event.Intake
	// Traces are the intakes of POST /v1/traces, the OTLP/HTTP traces receiver, by the
	// body's media type: "application/x-protobuf" (otlp_proto) and "application/json"
	// (otlp_json). Nil or empty: the route answers 501 not_configured.
	Traces map[string]*event.Intake
	// Logs are the intakes of POST /v1/logs, the OTLP/HTTP logs receiver, by the body's media
	// type: "application/x-protobuf" (otlp_logs) and "application/json" (otlp_logs_json), each
	// log record's body read through an event map. Nil or empty: the route answers 501.
	Logs map[string]*event.Intake
	// Zipkin are the intakes of POST /api/v2/spans, Zipkin's span API, by the body's media
	// type: "application/json" (zipkin_json) and "application/x-protobuf" (zipkin_proto).
	// Nil or empty: the route answers 501 not_configured.
	Zipkin map[string]*event.Intake

	// Allow serves POST /v1/allow: the limiter's handler, mounted behind the bearer-token
	// check. Nil: the route answers 501 not_configured.
	Allow http.Handler

	// Quota serves GET /v1/quota: how much of a key's quota is left (limithttp.QuotaHandler),
	// a read route (the bearer token with AuthReads, as GET /v1/window, which shows a
	// tenant's usage as well). Nil: the route answers 501 not_configured.
	Quota http.Handler

	// PromAPI serves the Prometheus HTTP API under /api/v1/ (package promapi), mounted as a
	// read route: GET and POST, the bearer token with AuthReads; its readiness is its own
	// (promapi.Config.Ready), so that its 503 has Prometheus' shape. Nil: /api/v1/ is not
	// served.
	PromAPI http.Handler

	// AuthToken, when not empty, is the bearer token the write routes (POST /v1/events,
	// POST /v1/allow) require: "Authorization: Bearer <token>", compared in constant time.
	// Missing or wrong gives 401. Empty: no authentication. See ReadTokenFile.
	AuthToken string

	// AuthReads extends AuthToken to the read routes: GET /v1/window, /v1/range, /v1/top,
	// /v1/series, /v1/metrics, /v1/quota, /v1/status and /metrics then answer 401 without the bearer token, like the write
	// routes. /healthz and /readyz stay open for probes, and the dashboard page GET / stays
	// public (it is static HTML with no data in it), but its own calls to /v1/metrics and
	// /v1/top then get 401: a browser cannot attach the token, so with AuthReads the
	// dashboard shows the error instead of data. Requires AuthToken. Default false.
	AuthReads bool

	// MaxBodyBytes caps a POST /v1/events body. A larger body is refused with 413 before any
	// of its events is recorded. Default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64

	// Quantiles are what /v1/window answers when q is absent. Default 0.5, 0.95, 0.99.
	Quantiles []float64

	// MaxTopK is the largest k /v1/top accepts. Default DefaultMaxTopK (1000).
	MaxTopK int

	// MaxSeriesLimit is the largest page /v1/series returns, at most MaxMaxSeriesLimit.
	// Default DefaultMaxSeriesLimit.
	MaxSeriesLimit int

	// ReadTimeout bounds the reads that scan series (/v1/window, /v1/range, /v1/top,
	// /v1/series, /v1/metrics): past it the scan stops and the read answers 503 timeout.
	// An http.Server's WriteTimeout does not end a handler, nor cancel its request's context
	// while the client waits, so without it a read of a costly match= over many series
	// (key=~"(.*){1000}" costs about 1 ms a series) went on computing long after its
	// answer could no longer be sent. Default DefaultReadTimeout (25 s); negative: none.
	ReadTimeout time.Duration

	// Reads, when set, caps the reads that scan series running at once (those ReadTimeout
	// bounds): more wait in line, within their ReadTimeout, and a read that waited all of it
	// answers 503 unavailable with Retry-After, naming the gate's setting. Share one gate
	// with the Prometheus API mounted at PromAPI (promapi.Config.Gate), so that the cap is
	// the process's. Probes, /metrics, /v1/status, the intake and the limiter's routes never
	// wait. Nil: no cap.
	Reads *readgate.Gate

	// Export lists window aggregates published as gauges on /metrics, read from the store
	// at scrape time (see ParseExportSpecs). Requires Registerer.
	Export []ExportSpec

	// ExportHistograms lists windows published as native histograms on /metrics
	// (slide_window_values), read from the store at scrape time (see
	// ParseHistogramSpecs and HistogramSpec). Requires Registerer.
	ExportHistograms []HistogramSpec

	// ExportExemplars: each ExportHistograms histogram carries the exemplars of its window's
	// slots (histogram_exemplar.go), which the store keeps with window.StoreConfig.Exemplars.
	// Off, the histograms carry none whatever the store keeps: each exemplar adds ~100 bytes
	// to a scrape, every scrape while its slot is in the window.
	ExportExemplars bool

	// ExportMaxSeries caps the series exported per scrape over all of Export and
	// ExportHistograms; the rest are
	// skipped in key order and counted in slide_window_export_skipped_series.
	// Default DefaultExportMaxSeries (1000).
	ExportMaxSeries int

	// Registerer receives the server's own metrics (requests and latency by route, export
	// gauges). Nil: nothing is registered and Export must be empty.
	Registerer prometheus.Registerer

	// Gatherer serves GET /metrics. Nil: /metrics answers 404.
	Gatherer prometheus.Gatherer

	// Logger receives request errors at warn level. Nil discards.
	Logger *slog.Logger
}

// ErrConfig wraps every configuration problem New reports.
var ErrConfig = errors.New("query: invalid config")

// Validate reports a config New would refuse.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Store == nil:
		return bad("store is required")
	case c.MaxBodyBytes < 0:
		return bad("max body bytes %d: must not be negative", c.MaxBodyBytes)
	case c.MaxTopK < 0:
		return bad("max top k %d: must not be negative", c.MaxTopK)
	case c.MaxSeriesLimit < 0 || c.MaxSeriesLimit > MaxMaxSeriesLimit:
		return bad("max series limit %d: want 0 (the default) to %d", c.MaxSeriesLimit, MaxMaxSeriesLimit)
	case c.ExportMaxSeries < 0:
		return bad("export max series %d: must not be negative", c.ExportMaxSeries)
	case (len(c.Export) > 0 || len(c.ExportHistograms) > 0) && c.Registerer == nil:
		return bad("export needs a registerer")
	case len(c.Quantiles) > maxQuantiles:
		return bad("%d default quantiles, at most %d", len(c.Quantiles), maxQuantiles)
	case strings.ContainsAny(c.AuthToken, " \t\r\n"):
		return bad("auth token contains white space")
	case c.AuthReads && c.AuthToken == "":
		return bad("auth reads needs an auth token")
	}
	for _, q := range c.Quantiles {
		if !(q >= 0 && q <= 1) {
			return bad("default quantile %v outside [0, 1]", q)
		}
	}
	for i, e := range c.Export {
		rc := c.Store.RingConfig(e.Metric)
		if err := e.validate(rc); err != nil {
			return bad("export %s: %v", e, err)
		}
		// Two summaries of one series: the registry would drop the second at every scrape.
		if slices.ContainsFunc(c.Export[:i], func(o ExportSpec) bool { return o.Metric == e.Metric && o.Window == e.Window }) {
			return bad("export %s: metric %q and window %s are exported twice (ParseExportSpecs merges such specs)", e, e.Metric, window.FormatDuration(e.Window))
		}
	}
	for i, h := range c.ExportHistograms {
		if err := h.validate(c.Store.RingConfig(h.Metric)); err != nil {
			return bad("export histogram %s: %v", h, err)
		}
		if slices.Contains(c.ExportHistograms[:i], h) {
			return bad("export histogram %s: exported twice", h)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	if len(c.Quantiles) == 0 {
		c.Quantiles = defaultQuantiles
	}
	c.MaxTopK = cmp.Or(c.MaxTopK, DefaultMaxTopK)
	c.MaxSeriesLimit = cmp.Or(c.MaxSeriesLimit, DefaultMaxSeriesLimit)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, DefaultReadTimeout)
	c.ExportMaxSeries = cmp.Or(c.ExportMaxSeries, DefaultExportMaxSeries)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// ErrEmptyToken is returned by ReadTokenFile for a file with no token in it.
var ErrEmptyToken = errors.New("query: token file is empty")

// maxTokenFileBytes bounds a token file: a token is tens of bytes.
const maxTokenFileBytes = 64 << 10

// ReadTokenFile reads a bearer token from path (--auth-token-file): the file's content
// without surrounding white space, so a trailing newline does not count.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	if len(b) > maxTokenFileBytes { // a wrong path (a log, /dev/zero) fails at once
		return "", fmt.Errorf("reading token file %s: larger than %d KiB: not a token file", path, maxTokenFileBytes>>10)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w: %s", ErrEmptyToken, path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("reading token file %s: token contains white space", path)
	}
	return tok, nil
}

// BackendState is one backend as /readyz shows it.
type BackendState struct {
	// Name is the kind of backend: "kafka", "redis".
	Name string `json:"name"`
	// Addr is where it is, without credentials.
	Addr string `json:"addr"`
	// State is "checking" (not yet checked), "ok" or "failing".
	State string `json:"state"`
	// Error is the last check's failure, while failing.
	Error string `json:"error,omitempty"`
}
