package looktest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slide-metrics/slide/internal/proctest"
)

// The alert rules shipped beside the Kubernetes manifests, and the page that lists what
// to alert on.
const (
	rulesFile  = "../../deploy/prometheus/slide-rules.yml"
	rulesTest  = "../../deploy/prometheus/slide-rules.test.yml"
	alertsPage = "../../docs/operating.md"
)

// TestAlertRules: promtool (Debian's 2.42) finds the rules valid, and their unit tests
// pass: each alert fires in the situation it names, after its `for`, and not before.
func TestAlertRules(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTest}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// docMetric is `slide_name` or `slide_name{label,label}` in backquotes.
var docMetric = regexp.MustCompile("`(slide_[a-z_]+)(?:\\{([a-z_,]+)\\})?`")

// ruleMetric is a metric a rule reads, with the labels it matches on when it has braces.
var ruleMetric = regexp.MustCompile(`(slide_[a-z_]+)(?:\{([^}]*)\})?`)

// TestDocsMetricsInScrape: every metric the "What to alert on" table names, with the labels
// it names, and every metric and matched label of the shipped alert rules, is in a real
// scrape of slide serve --demo (with the flags that add the optional families), so the
// docs and the rules cannot drift from the code; and the Grafana dashboards' queries
// against its PromQL API (checkDashboards).
func TestDocsMetricsInScrape(t *testing.T) {
	// The demo's policies and one of backend: cluster, whose limiter exports its own gauges.
	demo, err := os.ReadFile("../../cmd/slide/demo-policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policies, ok := bytes.CutPrefix(demo, []byte("# Policies `slide serve --demo` uses when no --policies file is given.\npolicies:\n"))
	if !ok {
		t.Fatal("cmd/slide/demo-policies.yaml does not begin as this test expects")
	}
	file := filepath.Join(t.TempDir(), "policies.yaml")
	policies = append([]byte("policies:\n  - {name: global, algorithm: fixed_window, limit: 100, window: 1m, backend: cluster}\n"), policies...)
	if err := os.WriteFile(file, policies, 0o600); err != nil {
		t.Fatal(err)
	}
	base := serve(t, "--demo", "--policies", file, "--max-series-per-metric", "100000",
		"--export-windows", "latency_ms:5m:0.95", "--export-histograms", "latency_ms:5m")
	var fams map[string]*dto.MetricFamily
	eventually(t, 30*time.Second, func() string { return "no demo series in /metrics: " + errString(err) }, func() bool {
		var text string
		if text, err = proctest.Scrape(base); err != nil {
			return false
		}
		tp := expfmt.NewTextParser(model.UTF8Validation)
		if fams, err = tp.TextToMetricFamilies(strings.NewReader(text)); err != nil {
			return false
		}
		return fams["slide_store_series_refused_total"] != nil && fams["slide_window"] != nil
	})
	labels := func(name string) []string {
		var out []string
		switch fams[name].GetType() { // the parser keeps these in the samples, not as labels
		case dto.MetricType_SUMMARY:
			out = append(out, model.QuantileLabel)
		case dto.MetricType_HISTOGRAM:
			out = append(out, model.BucketLabel)
		}
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(out, l.GetName()) {
					out = append(out, l.GetName())
				}
			}
		}
		return out
	}
	check := func(where, name string, want []string) {
		t.Helper()
		if fams[name] == nil {
			t.Errorf("%s names %s, which is not in the scrape", where, name)
			return
		}
		have := labels(name)
		for _, l := range want {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(have, l) {
				t.Errorf("%s names %s{%s}; the scrape's labels are %v", where, name, l, have)
			}
		}
	}

	page, err := os.ReadFile(alertsPage)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(page), "## What to alert on")
	table, _, _ = strings.Cut(table, "\n## ")
	n := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `slide_") {
			continue
		}
		first, _, _ := strings.Cut(line[1:], "|") // the metric column; the meaning names others
		for _, m := range docMetric.FindAllStringSubmatch(first, -1) {
			check("operating.md's alert table", m[1], strings.Split(m[2], ","))
			n++
		}
	}
	if !ok || n < 20 {
		t.Fatalf("found %d metrics in operating.md's alert table, want at least 20", n)
	}

	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr:")
		if !ok {
			continue
		}
		for _, m := range ruleMetric.FindAllStringSubmatch(expr, -1) {
			var want []string
			for _, matcher := range strings.Split(m[2], ",") {
				name, _, _ := strings.Cut(matcher, "=")
				want = append(want, name)
			}
			check(rulesFile, m[1], want)
		}
	}
	// The same demo server serves the Grafana dashboards' checks: one start, not two.
	t.Run("GrafanaDashboards", func(t *testing.T) { checkDashboards(t, base) })
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
