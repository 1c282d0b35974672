package promapi

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// TestRangePastRetentionWarns: a range selector longer than the metric's retention
// (a Grafana stat panel's increase(M_count[$__range]) over the last hour, a ring of 5
// minutes) reads only the retention, so its answer is the retention's count, not the
// hour's. Prometheus itself would say nothing (its data is what it is); slide knows what
// it keeps, and /v1/window refuses such a window, so the answer carries a warning naming
// the retention, on the engine and on the pushdown alike, and a range within it none.
func TestRangePastRetentionWarns(t *testing.T) {
	d := newDemo(t, "native:5", 3, 5)
	for _, off := range []bool{false, true} {
		c := clientOf(t, serveDemo(t, d, Config{DisablePushdown: off}).URL)
		for _, q := range []string{
			`sum(increase(latency_ms_count[1h]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[1h])))`,
			`max_over_time(latency_ms_max[6m])`,
		} {
			v, warn, _, err := c.Query(context.Background(), q, d.now)
			if err != nil || v.String() == "" || len(warn) != 1 ||
				!strings.Contains(warn[0], `is longer than the retention 5m of slide metric "latency_ms" (30 slots of 10s)`) {
				t.Errorf("%s (engine only: %v): %v %q %v, want its answer and the retention's warning", q, off, v, warn, err)
			}
		}
		for _, q := range []string{
			`sum(increase(latency_ms_count[5m]))`,
			`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`,
			`latency_ms_max`,
		} {
			if _, warn, _, err := c.Query(context.Background(), q, d.now); err != nil || len(warn) != 0 {
				t.Errorf("%s (engine only: %v): %q %v, want no warning", q, off, warn, err)
			}
		}
		_, warn, _, err := c.QueryRange(context.Background(), `sum(rate(latency_ms_count[10m]))`,
			v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 30 * time.Second})
		if err != nil || len(warn) != 1 || !strings.Contains(warn[0], "[10m] is longer than the retention 5m") {
			t.Errorf("range query (engine only: %v): %q %v", off, warn, err)
		}
	}
}
