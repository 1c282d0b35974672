package query_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	slideevent "github.com/slide-metrics/slide/event"
)

// slide_http_events_total{result} has every result at 0 before the first event: a child
// made by the first refusal of its reason is born at the count of that request, and
// Prometheus' increase() reads nothing from a series' first sample, so an alert on the
// refusals of POST /v1/events and /v1/traces (which slide_ingest_rejected_total, Kafka's,
// does not count) missed the first request refused for a reason (found posting 80
// events over --max-series-per-metric to slide serve under a real Prometheus).
func TestEventsCounterStartsAtZero(t *testing.T) {
	e := newEnv(t, nil)
	var want strings.Builder
	want.WriteString("# HELP slide_http_events_total " + eventsHelp + "\n# TYPE slide_http_events_total counter\n")
	results := []string{"accepted"}
	for _, r := range slideevent.RejectReasons() {
		results = append(results, r.String())
	}
	slices.Sort(results)
	for _, r := range results {
		want.WriteString(`slide_http_events_total{result="` + r + `"} 0` + "\n")
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want.String()), "slide_http_events_total"); err != nil {
		t.Error(err)
	}
}

const eventsHelp = "Events received by POST /v1/events (lines) and POST /v1/traces (spans), by result: accepted, or the reason they were refused (the reasons of slide_ingest_rejected_total, which counts only what is read from Kafka)."

// gathered is the value of the counter or gauge name{label="value"} in reg, or -1 when
// reg has no such series.
func gathered(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
