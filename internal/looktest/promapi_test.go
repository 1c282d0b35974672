package looktest

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// TestPromtoolQueriesServe: promtool (Debian's 2.42) and client_golang's v1 client query a
// real `slide serve` through its Prometheus API (package promapi): histogram_quantile per
// key within 2.5% of the exact nearest-rank p95 of what was posted, increase of the count
// exactly the number posted (the counters start at zero at the retention's start and end
// with a sample at now: nothing to extrapolate), a range query, label values and series.
func TestPromtoolQueriesServe(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	// --export-histograms gives latency_ms the native:5 sketch: exact native buckets.
	base := serve(t, "--export-histograms", "latency_ms:5m")
	now := time.Now().UnixMilli()
	values := map[string][]float64{}
	var lines []string
	for i := range 600 {
		key := []string{"tenant-a", "tenant-b", "tenant-c"}[i%3]
		route := []string{"/pay", "/search"}[i/3%2]
		v := math.Round(math.Exp(float64(i%97)/20)*float64(1+i%3)*100) / 100
		values[key] = append(values[key], v)
		lines = append(lines, fmt.Sprintf(`{"ts":%d,"key":%q,"metric":"latency_ms","value":%g,"labels":{"route":%q}}`, now-int64(i)*50, key, v, route))
	}
	post(t, base, lines)

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(promtool, append([]string{"query"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool query %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// {key="tenant-a"} => 123.45 @[1764489600.123]
	line := regexp.MustCompile(`\{key="([^"]+)"\} => (\S+) @\[`)
	out := run("instant", base, `histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`)
	got := line.FindAllStringSubmatch(out, -1)
	if len(got) != 3 {
		t.Fatalf("promtool query instant: %d keys, want 3:\n%s", len(got), out)
	}
	for _, m := range got {
		p95, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		vs := slices.Clone(values[m[1]])
		slices.Sort(vs)
		exact := vs[int(math.Ceil(0.95*float64(len(vs))))-1]
		if rel := math.Abs(p95-exact) / exact; rel > 0.025 {
			t.Errorf("%s: p95 %g, exact %g (%.2f%% off)", m[1], p95, exact, 100*rel)
		}
	}
	out = run("instant", base, `sum by (key) (increase(latency_ms_count[5m]))`)
	inc := line.FindAllStringSubmatch(out, -1)
	if len(inc) != 3 {
		t.Fatalf("increase: %d keys, want 3:\n%s", len(inc), out)
	}
	for _, m := range inc {
		if m[2] != "200" {
			t.Errorf("%s: increase %s, want exactly 200", m[1], m[2])
		}
	}
	end := time.Now().Unix()
	out = run("range", "--start", strconv.FormatInt(end-60, 10), "--end", strconv.FormatInt(end, 10), "--step", "10s", base, `sum by (key) (rate(latency_ms_count[1m]))`)
	if n := strings.Count(out, `{key="`); n != 3 {
		t.Errorf("promtool query range: %d series, want 3:\n%s", n, out)
	}
	if out = run("labels", base, "key"); strings.Fields(out)[0] != "tenant-a" || len(strings.Fields(out)) != 3 {
		t.Errorf("promtool query labels key: %q", out)
	}
	out = run("series", "--match", `latency_ms_count{key="tenant-b"}`, base)
	if !strings.Contains(out, `key="tenant-b"`) || !strings.Contains(out, `route="/pay"`) || !strings.Contains(out, `route="/search"`) || strings.Count(out, "\n") != 2 {
		t.Errorf("promtool query series: %q", out)
	}

	c, err := api.NewClient(api.Config{Address: base})
	if err != nil {
		t.Fatal(err)
	}
	v, _, _, err := v1.NewAPI(c).Query(context.Background(), `sum(increase(latency_ms_count[5m]))`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != 600 {
		t.Errorf("client_golang: %v, want 600", v)
	}
}
