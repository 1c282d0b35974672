package query_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// Two specs of one metric and window (the window written alike or not) are one export of
// the aggregates of both: before, each built its own summary of the same series, the
// registry refused the second as "collected before with the same name and label values",
// and the scrape silently lacked its quantiles (found with
// --export-windows 'latency_ms:1m:count;latency_ms:1m:p95': no p95 on /metrics). Two
// histogram specs alike wrote every series twice into the protobuf scrape, which
// Prometheus counts as duplicate samples.
func TestExportSpecsOfOneWindowMerge(t *testing.T) {
	specs, err := query.ParseExportSpecs("latency_ms:1m:count;latency_ms:60s:p95,max;latency_ms:1m:max;cost:1h:sum")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].String() != "latency_ms:1m:count,0.95,max" || specs[1].String() != "cost:1h:sum" {
		t.Fatalf("specs %v, want latency_ms:1m:count,0.95,max and cost:1h:sum", specs)
	}
	hists, err := query.ParseHistogramSpecs("latency_ms:5m;latency_ms:300s")
	if err != nil {
		t.Fatal(err)
	}
	if len(hists) != 1 {
		t.Fatalf("histogram specs %v, want latency_ms:5m once", hists)
	}
	e := newEnv(t, func(c *query.Config) { c.Export, c.ExportHistograms = specs, hists })
	e.clock.set(t0 + 5000)
	e.seed(event{ts: t0 + 1000, key: "a", metric: "latency_ms", value: 40})
	if _, err := e.reg.Gather(); err != nil {
		t.Fatalf("gathering: %v", err)
	}
	_, b, _ := e.do("GET", "/metrics", nil)
	text := string(b)
	for _, line := range []string{
		`slide_window{key="a",metric="latency_ms",window="1m",quantile="0.95"} 40`,
		`slide_window_count{key="a",metric="latency_ms",window="1m"} 1`,
		`slide_window_max{key="a",metric="latency_ms",window="1m"} 40`,
		`slide_window_values_count{key="a",metric="latency_ms",window="5m"} 1`,
	} {
		if n := strings.Count(text, "\n"+line+"\n"); n != 1 {
			t.Errorf("%s: %d times in the scrape, want once:\n%s", line, n, grepLines(text, "slide_window"))
		}
	}
	if n := len(scrapeProto(t, e.srv.Handler())["slide_window_values"].GetMetric()); n != 1 {
		t.Errorf("protobuf scrape: %d histograms of key a, want 1", n)
	}
}

// Specs put together from two lists (a library caller) may still repeat a window: New
// refuses them, naming it, rather than serve a scrape that drops series.
func TestExportRepeatedWindowRefused(t *testing.T) {
	st, _ := window.NewStore(window.StoreConfig{})
	a, _ := query.ParseExportSpecs("latency_ms:1m:count")
	b, _ := query.ParseExportSpecs("latency_ms:60s:p95")
	_, err := query.New(query.Config{Store: st, Export: append(a, b...), Registerer: prometheus.NewRegistry()})
	if !errors.Is(err, query.ErrConfig) || !strings.Contains(err.Error(), "latency_ms:1m") {
		t.Errorf("repeated window spec: %v, want ErrConfig naming latency_ms:1m", err)
	}
	h, _ := query.ParseHistogramSpecs("latency_ms:5m")
	_, err = query.New(query.Config{Store: st, ExportHistograms: append(h, h...), Registerer: prometheus.NewRegistry()})
	if !errors.Is(err, query.ErrConfig) || !strings.Contains(err.Error(), "latency_ms:5m") {
		t.Errorf("repeated histogram spec: %v, want ErrConfig naming latency_ms:5m", err)
	}
}
