package looktest

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboard is what Grafana reads of a dashboard JSON: its template variables and its
// panels' queries.
type dashboard struct {
	Templating struct {
		List []struct {
			Name, Type, Regex string
			IncludeAll        bool
			Query             any // {"query": "label_values(…)"}; a datasource variable's is a string
			Current           struct{ Value any }
		}
	}
	Panels []struct {
		Title   string
		Targets []struct {
			Expr, LegendFormat string
			Exemplar           bool // Grafana also asks /api/v1/query_exemplars
		}
	}
}

// labelValuesQuery is a variable's classic query, label_values(label) or
// label_values(selector, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((?:(.+),\s*)?(\w+)\)$`)

// legendLabel is a label a legend format prints, {{key}}.
var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// checkDashboards loads every dashboard of deploy/grafana and, against base (a slide serve
// --demo with demo data), does what Grafana does with it: resolves each template variable
// through /api/v1/label/<name>/values (its regex applied, All as the regex of every value),
// substitutes them and Grafana's $__rate_interval and $__interval, and checks each panel's
// query: it parses, every metric it selects is one slide has, every label it matches,
// groups by or prints in its legend is one of that metric's series' labels, and a range
// query over the last 5 minutes (POSTed, as Grafana's default method) answers with no
// warnings, which Grafana would show on the panel.
func checkDashboards(t *testing.T, base string) {
	files, err := filepath.Glob("../../deploy/grafana/dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in deploy/grafana/dashboards: %v", err)
	}
	// The demo's spans (duration_ms, the spans dashboard's) start with the server, unlike its
	// backfilled latencies: PromQL shows a series from its first slot's end, so wait for it.
	var span url.Values
	var names []string
	eventually(t, 30*time.Second, func() string { return fmt.Sprintf("duration_ms_count not listed: %v", names) }, func() bool {
		now := time.Now()
		span = url.Values{"start": {strconv.FormatInt(now.Add(-5*time.Minute).Unix(), 10)}, "end": {strconv.FormatInt(now.Unix(), 10)}}
		names = getList(t, base+"/api/v1/label/__name__/values?"+span.Encode())
		return slices.Contains(names, "duration_ms_count")
	})
	labelsOf := map[string][]string{}
	seriesLabels := func(metric string) []string {
		if ls, ok := labelsOf[metric]; ok {
			return ls
		}
		q := url.Values{"match[]": {metric}, "start": span["start"], "end": span["end"]}
		var series []map[string]string
		getJSON(t, base+"/api/v1/series?"+q.Encode(), &series)
		var ls []string
		for _, s := range series {
			for l := range s {
				if !slices.Contains(ls, l) {
					ls = append(ls, l)
				}
			}
		}
		labelsOf[metric] = ls
		return ls
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var dash dashboard
		if err := json.Unmarshal(raw, &dash); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := filepath.Base(file)
		vars := map[string]string{"__rate_interval": "40s", "__interval": "10s"}
		subst := func(s string) string {
			keys := slices.Collect(maps.Keys(vars))
			// The longer name first: $__rate_interval is not $__rate followed by _interval.
			slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
			for _, k := range keys {
				s = strings.ReplaceAll(strings.ReplaceAll(s, "${"+k+"}", vars[k]), "$"+k, vars[k])
			}
			return s
		}
		for _, v := range dash.Templating.List {
			if v.Type != "query" {
				continue
			}
			query, _ := v.Query.(map[string]any)["query"].(string)
			m := labelValuesQuery.FindStringSubmatch(strings.TrimSpace(query))
			if m == nil {
				t.Errorf("%s: variable %s: %q is no label_values query", name, v.Name, query)
				continue
			}
			q := url.Values{"start": span["start"], "end": span["end"]}
			if m[1] != "" {
				q.Set("match[]", subst(m[1]))
			}
			values := getList(t, base+"/api/v1/label/"+m[2]+"/values?"+q.Encode())
			if rx := strings.Trim(v.Regex, "/"); rx != "" {
				re := regexp.MustCompile(rx)
				var kept []string
				for _, val := range values {
					if sm := re.FindStringSubmatch(val); sm != nil {
						kept = append(kept, sm[len(sm)-1])
					}
				}
				values = kept
			}
			if len(values) == 0 {
				t.Errorf("%s: variable %s (%s) has no values", name, v.Name, query)
				continue
			}
			switch cur := fmt.Sprint(v.Current.Value); {
			case v.IncludeAll: // Grafana's All: every value, escaped for a PromQL regex
				quoted := make([]string, len(values))
				for i, val := range values {
					quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(val), `\`, `\\`)
				}
				vars[v.Name] = "(" + strings.Join(quoted, "|") + ")"
			case slices.Contains(values, cur):
				vars[v.Name] = cur
			default:
				vars[v.Name] = values[0]
			}
		}
		queries := 0
		for _, p := range dash.Panels {
			for _, tg := range p.Targets {
				queries++
				expr := subst(tg.Expr)
				where := fmt.Sprintf("%s: panel %q: %s", name, p.Title, expr)
				checkNames(t, where, expr, tg.LegendFormat, names, seriesLabels)
				form := url.Values{"query": {expr}, "start": span["start"], "end": span["end"], "step": {"10"}}
				res, err := http.PostForm(base+"/api/v1/query_range", form)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				var ans struct {
					Status   string
					Warnings []string
				}
				if err := json.Unmarshal(body, &ans); err != nil || res.StatusCode != 200 || ans.Status != "success" || len(ans.Warnings) > 0 {
					t.Errorf("%s: %d %.400s", where, res.StatusCode, body)
				}
				if tg.Exemplar {
					checkExemplars(t, base, where, expr, span)
				}
			}
		}
		if queries == 0 {
			t.Errorf("%s: no panel queries", name)
		}
	}
}

// checkNames fails unless every metric expr selects is in names and every label it matches
// or groups by, and every label legend prints, is a label of the series it selects.
func checkNames(t *testing.T, where, expr, legend string, names []string, seriesLabels func(string) []string) {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	var have []string // the labels of every series the query selects
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if !slices.Contains(names, vs.Name) {
			t.Errorf("%s: metric %s is not one slide serve --demo has (%v)", where, vs.Name, names)
			return nil
		}
		ls := seriesLabels(vs.Name)
		have = append(have, ls...)
		for _, m := range vs.LabelMatchers {
			if m.Name != "__name__" && !slices.Contains(ls, m.Name) {
				t.Errorf("%s: %s has no label %s (its labels: %v)", where, vs.Name, m.Name, ls)
			}
		}
		return nil
	})
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if agg, ok := n.(*parser.AggregateExpr); ok && !agg.Without {
			for _, l := range agg.Grouping {
				if !slices.Contains(have, l) {
					t.Errorf("%s: groups by %s, which none of its series has (%v)", where, l, have)
				}
			}
		}
		return nil
	})
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		if !slices.Contains(have, m[1]) {
			t.Errorf("%s: legend %q prints %s, which none of its series has (%v)", where, legend, m[1], have)
		}
	}
}

// getList GETs a Prometheus API listing and returns its data.
func getList(t *testing.T, u string) []string {
	t.Helper()
	var out []string
	getJSON(t, u, &out)
	return out
}

// getJSON GETs a Prometheus API answer and decodes its data into v, failing on an error
// status or warnings.
func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var ans struct {
		Status   string
		Data     json.RawMessage
		Warnings []string
	}
	if err := json.Unmarshal(body, &ans); err != nil || res.StatusCode != 200 || ans.Status != "success" || len(ans.Warnings) > 0 {
		t.Fatalf("GET %s: %d %.300s", u, res.StatusCode, body)
	}
	if err := json.Unmarshal(ans.Data, v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// traceID is how a trace id reaches Grafana: 32 lower-case hex digits, not all zero.
var traceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// checkExemplars asks /api/v1/query_exemplars what Grafana asks beside a panel query with
// exemplars on, and fails unless the demo's spans (slide serve --demo keeps exemplars) give
// it at least one series, each exemplar with a trace id Grafana can link and a span id.
func checkExemplars(t *testing.T, base, where, expr string, span url.Values) {
	t.Helper()
	var res []struct {
		SeriesLabels map[string]string
		Exemplars    []struct {
			Labels    map[string]string
			Value     string
			Timestamp float64
		}
	}
	// Until now, as Grafana's "last 5 minutes" asks: the demo's first spans may be younger
	// than the listing's end, which is in whole seconds.
	eventually(t, 15*time.Second, func() string { return where + ": no exemplars" }, func() bool {
		q := url.Values{"query": {expr}, "start": span["start"], "end": {strconv.FormatInt(time.Now().Unix()+1, 10)}}
		getJSON(t, base+"/api/v1/query_exemplars?"+q.Encode(), &res)
		return len(res) > 0
	})
	for _, r := range res {
		for _, e := range r.Exemplars {
			if !traceID.MatchString(e.Labels["trace_id"]) || strings.Trim(e.Labels["trace_id"], "0") == "" || len(e.Labels["span_id"]) != 16 {
				t.Errorf("%s: %v: exemplar %+v has no trace_id and span_id Grafana can link", where, r.SeriesLabels, e)
			}
		}
	}
}
