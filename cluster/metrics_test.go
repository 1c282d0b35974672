package cluster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCountersStartAtZero: every label combination of the peer-request and unavailability
// counters (and the peer-served codes an alert reads, and the request timings by op) is
// exported at 0 from the start, so increase() and rate() see their first
// increment: a series that appears at 1 has no earlier sample to rise from, and an alert on
// increase(slide_cluster_unavailable_total[5m]) > 0 missed the first unavailable read.
func TestCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, &Cluster{}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			id := mf.GetName()
			for _, l := range m.GetLabel() {
				id += "," + l.GetName() + "=" + l.GetValue()
			}
			if m.GetCounter() != nil && m.GetCounter().GetValue() != 0 {
				t.Errorf("%s starts at %v", id, m.GetCounter().GetValue())
			}
			have[id] = true
		}
	}
	var want []string
	for _, op := range []string{"groups", "keys", "limit", "merge", "metrics", "series", "slots"} {
		for _, r := range []string{"error", "ok", "older_version", "unauthenticated"} {
			want = append(want, "slide_cluster_peer_requests_total,op="+op+",result="+r)
		}
	}
	for _, c := range []string{"query", "usage_closed", "usage_denied_anyway", "usage_open"} {
		want = append(want, "slide_cluster_unavailable_total,caller="+c)
	}
	for _, code := range []string{"200", "401", "409"} { // SlidePeerUnauthenticated reads 401
		want = append(want, "slide_cluster_peer_served_total,code="+code)
	}
	for _, op := range []string{"groups", "keys", "limit", "merge", "metrics", "series", "slots"} {
		want = append(want, "slide_cluster_peer_request_duration_seconds,op="+op)
	}
	for _, id := range want {
		if !have[id] {
			t.Errorf("%s is not exported at start", id)
		}
	}
}
