package promapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestGrafanaDashboard loads deploy/grafana's dashboard and runs every panel's query as
// Grafana does (POST /api/v1/query_range over the dashboard's 5 minutes, $__rate_interval
// as Grafana sets it for a 10 s scrape interval: 4 × 10 s = 40 s, here 1m) against a demo
// store: each answers a matrix with at least one series and a finite value. The
// panels use the dashboard's datasource variable, whose default the provisioning file names. (internal/looktest's
// checkDashboards runs them against slide serve --demo, variables resolved as Grafana does.)
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/dashboards/slide.json")
	if err != nil {
		t.Fatal(err)
	}
	type dsRef struct{ Type, UID string }
	var dash struct {
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
				Datasource *dsRef
				Current    struct{ Value any }
			}
		}
		Panels []struct {
			Title      string
			Datasource dsRef
			Targets    []struct {
				Expr       string
				Datasource dsRef
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	prov, err := os.ReadFile("../deploy/grafana/provisioning/datasources/slide.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Datasources []struct{ UID, Type string }
	}
	if err := yaml.Unmarshal(prov, &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("provisioning: %+v", ds)
	}
	// Every query names the data source through the dashboard's datasource variable, whose
	// default is the provisioned one: imported by hand into a Grafana whose slide data source
	// has another uid, a fixed uid would leave every panel "Datasource slide was not found".
	const dsVar = "${datasource}"
	found := false
	for _, v := range dash.Templating.List {
		switch {
		case v.Type == "datasource":
			found = v.Name == "datasource" && v.Query == "prometheus" && v.Current.Value == ds.Datasources[0].UID
			if !found {
				t.Errorf("datasource variable %+v: want name datasource, query prometheus, current %q", v, ds.Datasources[0].UID)
			}
		case v.Datasource == nil || v.Datasource.UID != dsVar:
			t.Errorf("variable %s: data source %+v, want uid %s", v.Name, v.Datasource, dsVar)
		}
	}
	if !found {
		t.Errorf("no datasource variable in the dashboard's templating")
	}
	d := newDemo(t, "native:5", 4, 10)
	srv := serveDemo(t, d, Config{})
	queries := 0
	for _, p := range dash.Panels {
		if p.Datasource != (dsRef{"prometheus", dsVar}) {
			t.Errorf("panel %q: data source %+v, want uid %s", p.Title, p.Datasource, dsVar)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != (dsRef{"prometheus", dsVar}) {
				t.Errorf("panel %q: query data source %+v, want uid %s", p.Title, tg.Datasource, dsVar)
			}
		}
		for _, tg := range p.Targets {
			queries++
			// The dashboard's variables as Grafana substitutes them: the metric it offers
			// first, All keys; $__interval as Grafana sets it for 5 minutes (10 s).
			expr := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "10s",
				"${metric}", "latency_ms", "$key", ".*").Replace(tg.Expr)
			form := url.Values{"query": {expr}, "start": {ts(d.now.Add(-5 * time.Minute))}, "end": {ts(d.now)}, "step": {"10"}}
			res, err := http.PostForm(srv.URL+"/api/v1/query_range", form)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Status string
				Data   struct {
					ResultType string
					Result     []struct {
						Metric map[string]string
						Values [][2]any
					}
				}
			}
			raw := readAll(t, res)
			if err := json.Unmarshal([]byte(raw), &body); err != nil || body.Status != "success" || body.Data.ResultType != "matrix" || len(body.Data.Result) == 0 {
				t.Errorf("panel %q: %s: %.300s", p.Title, expr, raw)
				continue
			}
			finite := false
			for _, s := range body.Data.Result {
				for _, v := range s.Values {
					f, err := strconv.ParseFloat(v[1].(string), 64)
					if err != nil {
						t.Errorf("panel %q: value %v", p.Title, v)
					}
					finite = finite || (f == f && f < 1e300 && f > -1e300)
				}
			}
			if !finite {
				t.Errorf("panel %q: %s: no finite value in %.300s", p.Title, expr, raw)
			}
		}
	}
	if queries < 5 {
		t.Fatalf("%d queries in the dashboard, want its 5 panels' at least", queries)
	}
}

func ts(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// TestGrafanaDashboardAllKeysPastListingCap: with more keys than the label values listing
// holds (MaxLabelValues, 10,000 by default), the dashboard's key variable set to All still
// selects every key. Grafana builds All from the values it listed unless the variable has
// an allValue, so without one the keys past the cap vanish from every panel.
func TestGrafanaDashboardAllKeysPastListingCap(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/dashboards/slide.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name, AllValue string
				IncludeAll     bool
			}
		}
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	d := newDemo(t, "native:5", 4, 10)
	srv := serveDemo(t, d, Config{MaxLabelValues: 2})
	q := url.Values{"match[]": {"latency_ms_count"}, "start": {ts(d.now.Add(-5 * time.Minute))}, "end": {ts(d.now)}}
	res, err := http.Get(srv.URL + "/api/v1/label/key/values?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	var listed struct{ Data []string }
	if err := json.Unmarshal([]byte(readAll(t, res)), &listed); err != nil || len(listed.Data) != 2 {
		t.Fatalf("key values: %v %v, want the cap's 2", listed.Data, err)
	}
	all := "(" + strings.Join(listed.Data, "|") + ")" // Grafana's All without an allValue
	for _, v := range dash.Templating.List {
		if v.Name == "key" && v.IncludeAll && v.AllValue != "" {
			all = v.AllValue
		}
	}
	expr := ""
	for _, p := range dash.Panels {
		if p.Title == "requests per second per key" {
			expr = strings.NewReplacer("$__rate_interval", "1m", "${metric}", "latency_ms", "$key", all).Replace(p.Targets[0].Expr)
		}
	}
	form := url.Values{"query": {expr}, "start": {ts(d.now.Add(-5 * time.Minute))}, "end": {ts(d.now)}, "step": {"10"}}
	res, err = http.PostForm(srv.URL+"/api/v1/query_range", form)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Data struct {
			Result []struct{ Metric map[string]string }
		}
	}
	out := readAll(t, res)
	if err := json.Unmarshal([]byte(out), &body); err != nil || len(body.Data.Result) != 4 {
		t.Errorf("key=All with 4 keys and a listing of 2: %d series, want 4: %s: %.300s", len(body.Data.Result), expr, out)
	}
}
