package query

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/readgate"
	"github.com/slide-metrics/slide/window"
)

// Server is the HTTP query API over a window store: window reads, top lists, series
// listing, event intake, the limiter's allow route, health, metrics and the dashboard.
// It is safe for concurrent use. The zero value is not usable: build it once with New and
// serve Handler. A /v1/window read costs one window read of the store (a merge over every
// series of the metric for a glob key); /v1/top one read per series of the metric.
type Server struct {
	cfg       Config
	store     *window.Store
	handler   http.Handler
	tokenHash *[sha256.Size]byte // nil: no authentication
	metrics   *httpMetrics
	hist      *histogramExport     // nil without Config.ExportHistograms
	histReg   *prometheus.Registry // hist's collector, for the text formats
	visit     func()               // a test hook: called for every series a read visits (scan)
	reading   func()               // a test hook: called as a scanning read begins, holding its slot
	// exportErrors counts the series the exports leave out; collected by exportCollector.
	exportErrors *prometheus.CounterVec
}

// New builds a Server and registers its metrics with cfg.Registerer. It returns the
// config's error (wrapping ErrConfig) or the registerer's.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, store: cfg.Store, exportErrors: newExportErrors()}
	if cfg.AuthToken != "" {
		h := sha256.Sum256([]byte(cfg.AuthToken))
		s.tokenHash = &h
	}
	m, err := newHTTPMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("registering HTTP metrics: %w", err)
	}
	s.metrics = m
	if len(cfg.ExportHistograms) > 0 {
		s.hist = &histogramExport{s: s, desc: prometheus.NewDesc(histogramName, histogramHelp, []string{"metric", "key", "window"}, nil)}
		s.histReg = prometheus.NewRegistry()
		s.histReg.MustRegister(s.hist)
	}
	if len(cfg.Export) > 0 || len(cfg.ExportHistograms) > 0 { // Validate checked that Registerer is set
		if err := cfg.Registerer.Register(newExportCollector(s)); err != nil {
			return nil, fmt.Errorf("registering window export: %w", err)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Handler serves every route of the API. Mount it at the root of the server.
func (s *Server) Handler() http.Handler { return s.handler }

// now is the server's clock in unix milliseconds.
func (s *Server) now() int64 { return s.cfg.Now().UnixMilli() }

// route describes one endpoint: who may call it and how it is counted.
type route struct {
	name    string // metric label
	methods string // "GET" also allows HEAD
	auth    bool   // a write route: bearer token required when configured
	read    bool   // a data read: bearer token required when configured with Config.AuthReads
	ready   bool   // a read route: 503 while Config.Ready fails
	scans   bool   // a read over many series: stopped after Config.ReadTimeout
	h       http.HandlerFunc
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	add := func(pattern string, rt route) { mux.Handle(pattern, s.wrap(rt)) }
	add("/v1/window", route{name: "window", methods: "GET", read: true, ready: true, scans: true, h: s.handleWindow})
	add("/v1/range", route{name: "range", methods: "GET", read: true, ready: true, scans: true, h: s.handleRange})
	add("/v1/top", route{name: "top", methods: "GET", read: true, ready: true, scans: true, h: s.handleTop})
	add("/v1/series", route{name: "series", methods: "GET", read: true, ready: true, scans: true, h: s.handleSeries})
	add("/v1/metrics", route{name: "metrics_list", methods: "GET", read: true, ready: true, scans: true, h: s.handleMetrics})
	add("/v1/status", route{name: "status", methods: "GET", read: true, h: s.handleStatus})
	add("/v1/events", route{name: "events", methods: "POST", auth: true, h: s.handleEvents})
	add("/v1/traces", route{name: "traces", methods: "POST", auth: true, h: s.handleTraces})
	add("/v1/logs", route{name: "logs", methods: "POST", auth: true, h: s.handleLogs})
	add("/api/v2/spans", route{name: "zipkin_spans", methods: "POST", auth: true, h: s.handleZipkinSpans})
	add("/v1/allow", route{name: "allow", methods: "POST", auth: true, h: s.handleAllow})
	add("/v1/quota", route{name: "quota", methods: "GET", read: true, h: s.handleQuota})
	if s.cfg.PromAPI != nil {
		// Readiness is the handler's own (promapi.Config.Ready): its 503 in Prometheus' shape.
		add("/api/v1/", route{name: "promapi", methods: "GET POST", read: true, h: s.cfg.PromAPI.ServeHTTP})
	}
	// Probes and the dashboard page never need a token: the page is static, its data calls
	// go through the read routes above.
	add("/healthz", route{name: "healthz", methods: "GET", h: handleHealthz})
	add("/readyz", route{name: "readyz", methods: "GET", h: s.handleReadyz})
	add("/metrics", route{name: "metrics", methods: "GET", read: true, h: s.metricsHandler()})
	add("/{$}", route{name: "dashboard", methods: "GET", h: handleDashboard})
	add("/", route{name: "not_found", methods: "GET POST PUT DELETE PATCH OPTIONS", h: func(w http.ResponseWriter, r *http.Request) {
		httperr.Write(w, httperr.NotFound, "", "no route "+clip(r.URL.Path))
	}})
	return mux
}

// wrap adds the method check, authentication, readiness and metrics around a route.
func (s *Server) wrap(rt route) http.Handler {
	obs := s.metrics.forRoute(rt.name)
	allow := strings.ReplaceAll(rt.methods, " ", ", ")
	if strings.Contains(rt.methods, "GET") {
		allow += ", HEAD"
	}
	auth := rt.auth || (rt.read && s.cfg.AuthReads)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := statusWriterPool.Get().(*statusWriter)
		rw.ResponseWriter, rw.status = w, 0
		defer func() {
			obs.done(rw.code(), time.Since(start))
			rw.ResponseWriter = nil
			statusWriterPool.Put(rw)
		}()
		if !methodAllowed(rt.methods, r.Method) {
			rw.Header().Set("Allow", allow)
			httperr.Write(rw, httperr.MethodNotAllowed, "", clip(r.Method)+" not allowed on "+clip(r.URL.Path)+" (allowed: "+allow+")")
			return
		}
		if auth && !s.authorize(rw, r) {
			return
		}
		if rt.ready && s.cfg.Ready != nil {
			if err := s.cfg.Ready(); err != nil {
				httperr.Write(rw, httperr.NotReady, "", "not ready: "+err.Error())
				return
			}
		}
		if rt.scans && s.cfg.ReadTimeout > 0 {
			ctx, cancel := context.WithTimeoutCause(r.Context(), s.cfg.ReadTimeout, errReadTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		var waited time.Duration
		if rt.scans && s.cfg.Reads != nil {
			done, ok := s.startRead(rw, r)
			if !ok {
				return
			}
			defer done()
			waited = time.Since(start)
		}
		if rt.scans && s.reading != nil {
			s.reading()
		}
		rt.h(rw, r)
		// A read stopped by its context answers nothing (its client is gone); stopped by
		// ReadTimeout, its client is still there and is told why.
		if rw.status == 0 && context.Cause(r.Context()) == errReadTimeout {
			httperr.Write(rw, httperr.Timeout, "", s.timeoutMessage(waited))
		}
	})
}

// startRead waits for a read slot (Config.Reads) within the read's context, and returns
// what gives it back; when the wait fails it answers (503 unavailable when the deadline
// passed, nothing when the client left) and reports false.
func (s *Server) startRead(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	done, err := s.cfg.Reads.Start(r.Context())
	if err != nil {
		if errors.Is(err, readgate.ErrBusy) { // else the client is gone: nobody reads an answer
			httperr.Write(w, httperr.Unavailable, "", err.Error())
		}
		return nil, false
	}
	return done, true
}

// timeoutMessage says why a read stopped at ReadTimeout: its cost, or, when it spent most
// of the timeout waiting for a slot behind other reads, that wait (it ran too briefly to
// tell its cost; the same read may well answer when the server is less busy).
func (s *Server) timeoutMessage(waited time.Duration) string {
	if waited > s.cfg.ReadTimeout/2 {
		return fmt.Sprintf("the read stopped after %s, %s of it waiting for one of the %d read slots, every one busy with other reads: retry later, narrow the series it reads with key= or match=, or raise %s",
			s.cfg.ReadTimeout, waited.Round(time.Millisecond), s.cfg.Reads.Max(), s.cfg.Reads.Setting())
	}
	return fmt.Sprintf("the read stopped after %s: narrow the series it reads with key= or match= (a costly match= regexp costs every series of the metric)", s.cfg.ReadTimeout)
}

// errReadTimeout is the cause of a read's context past Config.ReadTimeout.
var errReadTimeout = errors.New("query: read timeout")

func methodAllowed(methods, m string) bool {
	if m == http.MethodHead {
		m = http.MethodGet
	}
	for f := range strings.FieldsSeq(methods) {
		if f == m {
			return true
		}
	}
	return false
}

// authorize checks the bearer token of a write route (and of a read route with
// Config.AuthReads) and answers 401 itself when it fails. Both sides are hashed before the
// constant-time compare, so neither the token's content nor its length leaks through
// timing: a wrong token costs the same whatever prefix it shares with the right one.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if s.tokenHash == nil {
		return true
	}
	h := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slide"`)
		httperr.Write(w, httperr.Unauthorized, "", "missing bearer token: send the header Authorization: Bearer TOKEN")
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(scheme):])))
	if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="slide", error="invalid_token"`)
		httperr.Write(w, httperr.Unauthorized, "", "invalid bearer token")
		return false
	}
	return true
}

// statusWriter remembers the status a handler wrote, for the request metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
}

var statusWriterPool = sync.Pool{New: func() any { return new(statusWriter) }}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// bufPool holds response buffers of the JSON routes.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putBuf returns a response buffer to the pool, unless one large answer grew it past
// 1 MiB: the pool should not pin that much memory.
func putBuf(bp *[]byte, b []byte) {
	if cap(b) > 1<<20 {
		return
	}
	*bp = b
	bufPool.Put(bp)
}

// writeJSON sends body (a complete JSON document) with status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType // assigned, not Set: no canonicalization or allocation
	h["Cache-Control"] = noStore
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// writeErr maps an error of a read to its status: parameter errors are 400, unknown series
// 404, anything else 500.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		httperr.Write(w, httperr.BadParameter, pe.name, pe.Error())
	case errors.Is(err, window.ErrBadWindow):
		httperr.Write(w, httperr.BadParameter, "window", `parameter "window": `+err.Error())
	case errors.Is(err, window.ErrBadQuantile):
		httperr.Write(w, httperr.BadParameter, "q", `parameter "q": `+err.Error())
	case errors.Is(err, window.ErrTooManyGroups):
		httperr.Write(w, httperr.BadParameter, "by", `parameter "by": `+err.Error()+"; narrow the series with key= or match=, or group by fewer labels")
	default:
		s.cfg.Logger.Warn("query failed", "path", r.URL.Path, "query", r.URL.RawQuery, "err", err)
		httperr.Write(w, httperr.Internal, "", err.Error())
	}
}

func handleHealthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, healthOK)
}

var healthOK = []byte(`{"status":"ok"}` + "\n")

func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Backends != nil {
		s.readyzBackends(w)
		return
	}
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			httperr.Write(w, httperr.NotReady, "", "not ready: "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, append(s.appendRestoring([]byte(`{"status":"ready"`)), "}\n"...))
}

func (s *Server) metricsHandler() http.HandlerFunc {
	if s.cfg.Gatherer == nil {
		return func(w http.ResponseWriter, _ *http.Request) {
			httperr.Write(w, httperr.NotFound, "", "metrics are not exposed by this server")
		}
	}
	// OpenMetrics when the scraper asks for it; protobuf (which carries native histograms)
	// and the classic text format are negotiated as before.
	opts := promhttp.HandlerOpts{
		ErrorLog:          newPromLogger(s.cfg.Logger),
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	}
	if s.hist == nil {
		return promhttp.HandlerFor(s.cfg.Gatherer, opts).ServeHTTP
	}
	text := promhttp.HandlerFor(prometheus.Gatherers{s.cfg.Gatherer, s.histReg}, opts)
	registry := promhttp.HandlerFor(s.cfg.Gatherer, opts)
	return func(w http.ResponseWriter, r *http.Request) {
		if expfmt.NegotiateIncludingOpenMetrics(r.Header).FormatType() != expfmt.TypeProtoDelim {
			text.ServeHTTP(w, r)
			return
		}
		// Protobuf: the registry's families, then the histograms encoded from the bins
		// (delimited messages concatenate). Uncompressed, since the two parts are written
		// one after the other.
		r = r.Clone(r.Context())
		r.Header.Del("Accept-Encoding")
		registry.ServeHTTP(w, r)
		_, _ = w.Write(s.hist.appendProto(nil, s.now()))
	}
}

func (s *Server) handleAllow(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Allow == nil {
		httperr.Write(w, httperr.NotConfigured, "", "no limiter is configured on this server")
		return
	}
	s.cfg.Allow.ServeHTTP(w, r)
}

func (s *Server) handleQuota(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Quota == nil {
		httperr.Write(w, httperr.NotConfigured, "", "no limiter is configured on this server")
		return
	}
	s.cfg.Quota.ServeHTTP(w, r)
}

// httpMetrics are the request counters and latency histograms by route and status code.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	events   *prometheus.CounterVec // POST /v1/events lines by result: accepted or the refusal reason
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slide_http_requests_total",
			Help: "HTTP requests served by the query API, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "slide_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request of the query API, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slide_http_events_total",
			Help: "Events received by POST /v1/events (lines) and POST /v1/traces (spans), by result: accepted, or the reason they were refused (the reasons of slide_ingest_rejected_total, which counts only what is read from Kafka).",
		}, []string{"result"}),
	}
	// Every result at 0 from the start: increase() reads nothing from a series' first
	// sample, so a child made by the first refusal of its reason would go unalerted.
	m.events.WithLabelValues("accepted")
	for _, r := range event.RejectReasons() {
		m.events.WithLabelValues(r.String())
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.latency, m.events} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// routeMetrics caches a route's children so the request path looks nothing up by label
// for the usual codes.
type routeMetrics struct {
	m       *httpMetrics
	name    string
	latency prometheus.Observer
	byCode  map[int]prometheus.Counter // read-only after forRoute
}

var commonCodes = []int{200, 400, 401, 404, 405, 413, 429, 500, 501, 503}

func (m *httpMetrics) forRoute(name string) *routeMetrics {
	rm := &routeMetrics{m: m, name: name, latency: m.latency.WithLabelValues(name), byCode: map[int]prometheus.Counter{}}
	for _, c := range commonCodes {
		rm.byCode[c] = m.requests.WithLabelValues(name, strconv.Itoa(c))
	}
	return rm
}

func (rm *routeMetrics) done(code int, d time.Duration) {
	c, ok := rm.byCode[code]
	if !ok {
		c = rm.m.requests.WithLabelValues(rm.name, strconv.Itoa(code))
	}
	c.Inc()
	rm.latency.Observe(d.Seconds())
}
