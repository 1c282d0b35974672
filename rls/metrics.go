package rls

import (
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/limiter"
)

// Metric names exported by a Server.
const (
	MetricRequests    = "slide_rls_requests_total"
	MetricDescriptors = "slide_rls_descriptors_total"
	MetricErrors      = "slide_rls_errors_total"
	MetricReloads     = "slide_rls_config_reloads_total"
)

// Results of slide_rls_descriptors_total.
const (
	resultOK         = "ok"
	resultOver       = "over_limit"
	resultShadowOver = "shadow_over_limit"
	resultUnlimited  = "unlimited"
	resultReplaced   = "replaced"
	resultNoLimit    = "no_limit"
)

type limitMetrics struct {
	ok, over, shadowOver, unlimited, replaced prometheus.Counter
	dec                                       *decisionMetrics // nil for usage rules alone: the Service counts those
}

// decisionMetrics are one policy's children of slide_limiter_decisions_total
// (labelled as the Service labels its own), for the decisions the Server takes
// without the Service: blocks (requests_per_unit 0), unlimited descriptors, a
// cost above the quota and limit overrides. An alert on denials sees them all.
type decisionMetrics struct {
	allowed, denied, shadowDenied, failed prometheus.Counter
}

func newDecisionMetrics(v *prometheus.CounterVec, policy string) *decisionMetrics {
	return &decisionMetrics{allowed: v.WithLabelValues(policy, limiter.ResultAllowed), denied: v.WithLabelValues(policy, limiter.ResultDenied),
		shadowDenied: v.WithLabelValues(policy, limiter.ResultShadowDenied), failed: v.WithLabelValues(policy, limiter.ResultError)}
}

// count records d as the Service records its own: a backend failure decided by
// the failure mode is an error, whatever it answered.
func (m *decisionMetrics) count(d *limiter.Decision) {
	switch {
	case d.Degraded:
		m.failed.Inc()
	case d.Shadowed:
		m.shadowDenied.Inc()
	case d.Allowed:
		m.allowed.Inc()
	default:
		m.denied.Inc()
	}
}

// overrideDecisions are the decision metrics of override policy name (one of
// six units), made on first use so that a server no override reaches exports none.
func (s *Server) overrideDecisions(name string) *decisionMetrics {
	if m, ok := s.ovDec.Load(name); ok {
		return m.(*decisionMetrics)
	}
	m, _ := s.ovDec.LoadOrStore(name, newDecisionMetrics(s.decisions, name))
	return m.(*decisionMetrics)
}

// domainLabel is the domain label of an unmatched descriptor: the request's
// domain when it is configured, "" otherwise (a label from the request alone
// would let clients create series without bound).
func (cur *served) domainLabel(req *pb.RateLimitRequest) string {
	if _, ok := cur.cfg.domains[req.GetDomain()]; ok {
		return req.GetDomain()
	}
	return ""
}

// initFailures creates every result of reloads and every reason of errs at 0: an alert on
// increase() then sees the first refused reload or failed call, which would otherwise
// appear at 1 with no earlier sample to rise from.
func initFailures(reloads, errs *prometheus.CounterVec) {
	for _, r := range []string{"applied", "refused"} {
		reloads.WithLabelValues(r)
	}
	for _, r := range []string{"unauthenticated", "invalid_request", "unavailable", "canceled", "internal"} {
		errs.WithLabelValues(r)
	}
}
