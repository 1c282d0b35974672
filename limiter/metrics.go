package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names exported by a Service.
const (
	MetricDecisions      = "slide_limiter_decisions_total"
	MetricBackendErrors  = "slide_limiter_backend_errors_total"
	MetricBackendSeconds = "slide_limiter_backend_duration_seconds"
	MetricDenyCacheHits  = "slide_limiter_deny_cache_hits_total"
	MetricPlanUpdates    = "slide_limiter_plan_updates_total"
)

// Values of the result label of slide_limiter_decisions_total.
const (
	ResultAllowed      = "allowed"
	ResultDenied       = "denied"
	ResultShadowDenied = "shadow_denied"
	ResultError        = "error"
)

type metrics struct {
	decisions *prometheus.CounterVec
	errors    *prometheus.CounterVec
	latency   *latencyVec
	cacheHits *prometheus.CounterVec
	plans     *prometheus.CounterVec
}

// backendLatency is the latency histogram of backend (redis or cluster).
func (m *metrics) backendLatency(backend string) prometheus.Observer {
	if backend == "cluster" {
		return &m.latency.cluster
	}
	return &m.latency.redis
}

// DecisionCounter returns slide_limiter_decisions_total{policy,result} as registered
// with reg: the vector a Service (or an earlier call) registered there, else a new one
// registered now; nil reg: a new one registered nowhere. Decisions taken outside a
// Service count in it beside the Service's own, so that one series answers "how many
// denials" (package rls decides blocks, exemptions and Envoy's limit overrides itself).
func DecisionCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return sharedCounter(reg, prometheus.CounterOpts{
		Name: MetricDecisions,
		Help: "Admission decisions by policy and result (allowed, denied, shadow_denied; error when the backend failed and the failure mode decided).",
	}, "policy", "result")
}

// Values of the reason label of slide_limiter_backend_errors_total.
const (
	ReasonTimeout = "timeout"
	ReasonError   = "error"
)

// BackendErrorCounter returns slide_limiter_backend_errors_total{policy,reason} as
// registered with reg, as DecisionCounter does, for backend calls made outside a
// Service (package rls's limit overrides) to count beside the Service's own.
func BackendErrorCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return sharedCounter(reg, prometheus.CounterOpts{
		Name: MetricBackendErrors,
		Help: "Backend calls that failed, by policy and reason (timeout or error).",
	}, "policy", "reason")
}

// BackendErrorReason is the reason label of a failed backend call's err.
func BackendErrorReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return ReasonTimeout
	}
	return ReasonError
}

// sharedCounter returns the counter vector opts names as registered with reg: the one
// registered there already, else a new one registered now (nil reg: registered nowhere).
func sharedCounter(reg prometheus.Registerer, opts prometheus.CounterOpts, labels ...string) (*prometheus.CounterVec, error) {
	v := prometheus.NewCounterVec(opts, labels)
	if reg == nil {
		return v, nil
	}
	if err := reg.Register(v); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return old, nil
			}
		}
		return nil, fmt.Errorf("registering %s: %w", opts.Name, err)
	}
	return v, nil
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	decisions, err := DecisionCounter(reg)
	if err != nil {
		return nil, err
	}
	errs, err := BackendErrorCounter(reg)
	if err != nil {
		return nil, err
	}
	m := &metrics{
		decisions: decisions,
		errors:    errs,
		latency:   newLatencyVec(),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDenyCacheHits,
			Help: "Denials answered from the local deny cache without a backend round trip, by policy.",
		}, []string{"policy"}),
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPlanUpdates,
			Help: "Plan updates by source (file: a plans file loaded or reloaded; topic: a plans-topic record) and result (applied, or refused: the old plans kept).",
		}, []string{"source", "result"}),
	}
	// At 0 from the start, so increase() sees the first refused plans reload.
	for _, source := range []string{"file", "topic"} {
		m.plans.WithLabelValues(source, "applied")
		m.plans.WithLabelValues(source, "refused")
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.latency, m.cacheHits, m.plans} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering limiter metrics: %w", err)
			}
		}
	}
	return m, nil
}

// policyMetrics are one policy's children, resolved once so the decision
// path does no label lookups.
type policyMetrics struct {
	allowed, denied, shadowDenied, failed prometheus.Counter
	errTimeout, errOther, cacheHit        prometheus.Counter
}

func (m *metrics) forPolicy(name string) policyMetrics {
	return policyMetrics{
		allowed:      m.decisions.WithLabelValues(name, ResultAllowed),
		denied:       m.decisions.WithLabelValues(name, ResultDenied),
		shadowDenied: m.decisions.WithLabelValues(name, ResultShadowDenied),
		failed:       m.decisions.WithLabelValues(name, ResultError),
		errTimeout:   m.errors.WithLabelValues(name, ReasonTimeout),
		errOther:     m.errors.WithLabelValues(name, ReasonError),
		cacheHit:     m.cacheHits.WithLabelValues(name),
	}
}

// Metric names of the memory backend's state, per policy (memory policies and the local
// fallbacks of Redis ones), read at scrape time.
const (
	MetricMemoryKeys      = "slide_limiter_keys"
	MetricMemoryBytes     = "slide_limiter_bytes"
	MetricMemoryEvictions = "slide_limiter_evictions_total"
	MetricMemoryRefused   = "slide_limiter_store_full_total"
)

// memCollector exports each in-process store's keys, bytes, evictions and refusals.
type memCollector struct {
	s                                *Service
	keys, bytes, evictions, refusals *prometheus.Desc
}

func newMemCollector(s *Service) *memCollector {
	l := []string{"policy"}
	return &memCollector{
		s:         s,
		keys:      prometheus.NewDesc(MetricMemoryKeys, "Keys held by the in-process limiter store, by policy (see --limiter-max-bytes).", l, nil),
		bytes:     prometheus.NewDesc(MetricMemoryBytes, "Estimated bytes of the in-process limiter store's state, by policy, against its share of --limiter-max-bytes.", l, nil),
		evictions: prometheus.NewDesc(MetricMemoryEvictions, "Keys whose state was back to initial dropped to make room for a new key, by policy.", l, nil),
		refusals:  prometheus.NewDesc(MetricMemoryRefused, "Requests refused because the in-process store held only live state (decided by on_backend_error: open admits untracked, closed answers 503), by policy.", l, nil),
	}
}

func (c *memCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.keys
	ch <- c.bytes
	ch <- c.evictions
	ch <- c.refusals
}

func (c *memCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.s.names {
		m := c.s.byName[name].mem
		if m == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(m.Len()), name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(m.Bytes()), name)
		ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(m.Evictions()), name)
		ch <- prometheus.MustNewConstMetric(c.refusals, prometheus.CounterValue, float64(m.Refused()), name)
	}
}
