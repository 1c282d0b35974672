package query_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/query"
)

// TestStatusWhileRestoring: /v1/status answers while the read routes are 503, with the
// readiness message, the progress hook's value, ingest lag from the gauges (largest lag in
// seconds, summed records) and limiter decisions by policy and result.
func TestStatusWhileRestoring(t *testing.T) {
	ready := errors.New("restoring windows from Kafka")
	e := newEnv(t, func(c *query.Config) {
		c.Ready = func() error { return ready }
		c.Progress = func() any { return map[string]any{"partitions": []map[string]any{{"partition": 0, "done": 0.5}}} }
	})
	lagS := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slide_ingest_lag_seconds", Help: "h"}, []string{"partition"})
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slide_ingest_lag", Help: "h"}, []string{"partition"})
	dec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slide_limiter_decisions_total", Help: "h"}, []string{"policy", "result"})
	e.reg.MustRegister(lagS, lag, dec)
	lagS.WithLabelValues("0").Set(1.5)
	lagS.WithLabelValues("1").Set(0.25)
	lag.WithLabelValues("0").Set(100)
	lag.WithLabelValues("1").Set(20)
	dec.WithLabelValues("login", "denied").Add(2)
	dec.WithLabelValues("api", "allowed").Add(7)

	var st struct {
		Ready    bool    `json:"ready"`
		NotReady *string `json:"not_ready"`
		Progress struct {
			Partitions []struct{ Done float64 } `json:"partitions"`
		} `json:"progress"`
		Ingest struct {
			LagSeconds float64 `json:"lag_seconds"`
			LagRecords float64 `json:"lag_records"`
		} `json:"ingest"`
		Limiter []struct {
			Policy, Result string
			Count          float64
		} `json:"limiter"`
	}
	e.getJSON("/v1/status", 200, &st)
	if st.Ready || st.NotReady == nil || *st.NotReady != ready.Error() || len(st.Progress.Partitions) != 1 || st.Progress.Partitions[0].Done != 0.5 {
		t.Errorf("readiness: %+v", st)
	}
	if st.Ingest.LagSeconds != 1.5 || st.Ingest.LagRecords != 120 {
		t.Errorf("ingest: %+v", st.Ingest)
	}
	if len(st.Limiter) != 2 || st.Limiter[0].Policy != "api" || st.Limiter[0].Count != 7 || st.Limiter[1].Result != "denied" || st.Limiter[1].Count != 2 {
		t.Errorf("limiter: %+v", st.Limiter)
	}
	var a errorAnswer
	e.getJSON("/v1/window?metric=latency_ms&key=a", 503, &a)
	e.getJSON("/v1/status?x=1", 400, &a)

	ready = nil
	e.getJSON("/v1/status", 200, &st)
	if !st.Ready || st.NotReady != nil {
		t.Errorf("ready: %+v", st)
	}
}
