package looktest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// allExports turns on every export slide has: summaries and gauges, native histograms.
var allExports = []string{
	"--export-windows", "latency_ms:5m:0.5,0.95,0.99,avg,min,max,rate;cost:1h:sum,count",
	"--export-histograms", "latency_ms:5m;cost:1h",
}

// latencies posts n lognormal latencies (ms, 3 decimals) for key, all in the current slot,
// and returns them sorted: the exact oracle.
func latencies(t *testing.T, base, key string, n int, seed uint64) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 15))
	now := time.Now().UnixMilli()
	var lines []string
	var vals []float64
	for range n {
		v := math.Round(math.Exp(math.Log(80)+0.8*rng.NormFloat64())*1000) / 1000
		vals = append(vals, v)
		lines = append(lines, fmt.Sprintf(`{"ts":%d,"key":%q,"metric":"latency_ms","value":%v}`, now, key, v))
	}
	post(t, base, lines)
	slices.Sort(vals)
	return vals
}

// exactQuantile is the value of rank q·(n−1) of sorted values.
func exactQuantile(sorted []float64, q float64) float64 { return sorted[int(q*float64(len(sorted)-1))] }

// promQuery asks Prometheus' HTTP API for an instant vector and returns its samples'
// values; an empty result is no values.
func promQuery(base, q string) ([]float64, error) {
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	code, b, err := proctest.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
		return nil, fmt.Errorf("query %s: %d %s", q, code, b)
	}
	var out []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", q, s.Value[1])
		}
		out = append(out, v)
	}
	return out, nil
}

// TestPrometheusReadsNativeHistograms: a real Prometheus with native histograms on scrapes
// a real slide serve every second; histogram_count of a key is its exact count, and
// histogram_quantile(0.95) of the key and of `sum by (metric)` over keys are within 2.5% of
// the exact p95 of the raw values (a schema-5 bucket is 2.2% wide and Prometheus
// interpolates inside it).
func TestPrometheusReadsNativeHistograms(t *testing.T) {
	prom := need(t, "prometheus", "prometheus")
	base := serve(t, allExports...)
	one := latencies(t, base, "tenant-1", 4000, 1)
	two := latencies(t, base, "tenant-2", 1000, 2)
	both := slices.Sorted(slices.Values(slices.Concat(one, two)))

	dir := t.TempDir()
	promAddr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// The shipped rules, evaluated every second: the recording rule over the histograms too.
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n  - job_name: slide\n    static_configs:\n      - targets: ['%s']\n", rules, strings.TrimPrefix(base, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	proctest.Start(t, "prometheus", prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr,
		"--enable-feature=native-histograms")
	pbase := "http://" + promAddr
	start := time.Now()
	countQ := `histogram_count(slide_window_values{metric="latency_ms",key="tenant-1",window="5m"})`
	var last []float64
	var lastErr error
	eventually(t, 20*time.Second, func() string { return fmt.Sprintf("%s = %v (%v), want [4000]", countQ, last, lastErr) }, func() bool {
		last, lastErr = promQuery(pbase, countQ)
		return lastErr == nil && len(last) == 1 && last[0] == 4000
	})
	t.Logf("Prometheus had the histogram %s after start", time.Since(start).Round(100*time.Millisecond))

	check := func(q string, want float64, tol float64) {
		t.Helper()
		got, err := promQuery(pbase, q)
		if err != nil || len(got) != 1 {
			t.Fatalf("%s = %v (%v)", q, got, err)
		}
		rel := math.Abs(got[0]-want) / want
		t.Logf("%s = %.4g, exact %.4g (%.2f%%)", q, got[0], want, 100*rel)
		if rel > tol {
			t.Errorf("%s = %v, exact %v: off by %.2f%%, more than %.1f%%", q, got[0], want, 100*rel, 100*tol)
		}
	}
	check(`histogram_quantile(0.95, slide_window_values{metric="latency_ms",key="tenant-1"})`, exactQuantile(one, 0.95), 0.025)
	check(`histogram_quantile(0.5, slide_window_values{metric="latency_ms",key="tenant-1"})`, exactQuantile(one, 0.5), 0.025)
	check(`histogram_quantile(0.95, sum by (metric) (slide_window_values{metric="latency_ms"}))`, exactQuantile(both, 0.95), 0.025)
	check(`histogram_count(sum by (metric) (slide_window_values{metric="latency_ms"}))`, 5000, 0)
	// deploy/prometheus/slide-rules.yml records the p95 over keys for its latency alert.
	eventually(t, 10*time.Second, func() string { return "metric:slide_window_values:p95 was never recorded" }, func() bool {
		v, err := promQuery(pbase, `metric:slide_window_values:p95{metric="latency_ms",window="5m"}`)
		return err == nil && len(v) == 1
	})
	check(`metric:slide_window_values:p95{metric="latency_ms",window="5m"}`, exactQuantile(both, 0.95), 0.025)
	sum := 0.0
	for _, v := range one {
		sum += v
	}
	check(`histogram_sum(slide_window_values{metric="latency_ms",key="tenant-1"})`, sum, 1e-9)
	// The summary of --export-windows arrives too, typed as one: quantile label, _count.
	check(`slide_window_count{metric="latency_ms",key="tenant-1"}`, 4000, 0)
	check(`slide_window{metric="latency_ms",key="tenant-1",quantile="0.95"}`, exactQuantile(one, 0.95), 0.0101)
}

// TestPromtoolChecksMetrics: promtool check metrics (Prometheus' own linter) finds nothing
// to say about /metrics with every export on and data in every family.
func TestPromtoolChecksMetrics(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	base := serve(t, allExports...)
	latencies(t, base, "tenant-1", 200, 3)
	post(t, base, []string{fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"cost","value":2}`, time.Now().UnixMilli())})
	text, err := proctest.Scrape(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# TYPE slide_window summary", `slide_window{key="tenant-1",metric="latency_ms",window="5m",quantile="0.95"}`,
		"# TYPE slide_window_values histogram", "slide_window_count{", "slide_window_max{", "slide_window_rate_per_second{"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
