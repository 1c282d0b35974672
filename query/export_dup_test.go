package query_test

import (
	"errors"
	"fmt"
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

// Each exported series carries its own labels only, and the same ones whatever other
// series exist. Exporting every series with the union of the scrape's label names made a
// scrape of a thousand series each with one distinct label name a million labels (slide
// serve with 5,000 keys and such a POST: the scrape never finished and the process died),
// and a series labelled window="w1" went from exported_window to exported_exported_window
// once another series had a label exported_window: a new series in Prometheus.
func TestExportedLabelsAreTheSeriesOwn(t *testing.T) {
	specs, _ := query.ParseExportSpecs("latency_ms:5m:count")
	hists, _ := query.ParseHistogramSpecs("latency_ms:5m")
	e := newEnv(t, func(c *query.Config) { c.Export, c.ExportHistograms, c.ExportMaxSeries = specs, hists, 10_000 })
	series := func(key string, ls ...window.Label) string {
		b, err := window.AppendSeries(nil, key, ls)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	e.seed(event{ts: t0, key: series("x", window.Label{Name: "window", Value: "w1"}), metric: "latency_ms", value: 1})
	const x = `{exported_window="w1",key="x",metric="latency_ms",window="5m"}`
	scrape := func() string {
		_, b, _ := e.do("GET", "/metrics", nil)
		return string(b)
	}
	for _, name := range []string{"slide_window_count", "slide_window_values_count"} {
		if text := scrape(); !strings.Contains(text, "\n"+name+x+" 1\n") {
			t.Fatalf("scrape lacks %s%s:\n%s", name, x, grepLines(text, "slide_window"))
		}
	}
	e.seed(event{ts: t0, key: series("y", window.Label{Name: "exported_window", Value: "z"}), metric: "latency_ms", value: 1})
	for i := range 300 {
		e.seed(event{ts: t0, key: series(fmt.Sprintf("k%d", i), window.Label{Name: fmt.Sprintf("l%d", i), Value: "v"}), metric: "latency_ms", value: 1})
	}
	text := scrape()
	for _, name := range []string{"slide_window_count", "slide_window_values_count"} {
		if !strings.Contains(text, "\n"+name+x+" 1\n") {
			t.Errorf("after other series came, the scrape lacks %s%s:\n%s", name, x, grepLines(text, `key="x"`))
		}
	}
	if n := strings.Count(text, `=""`); n != 0 {
		t.Errorf("%d empty labels in the scrape, want none (%d bytes)", n, len(text))
	}
	for _, m := range scrapeProto(t, e.srv.Handler())["slide_window_values"].GetMetric() {
		if n := len(m.GetLabel()); n > 4 {
			t.Fatalf("protobuf histogram with %d labels, want at most key, metric, window and its own: %v", n, m.GetLabel())
		}
	}
}
