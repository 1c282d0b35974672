package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// serveDemo serves the API over a demo store.
func serveDemo(t *testing.T, d *demo, cfg Config) *httptest.Server {
	t.Helper()
	cfg.Store, cfg.Now = d.store, func() time.Time { return d.now }
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func clientOf(t *testing.T, addr string) v1.API {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}

// TestClientGolang runs client_golang's v1 client against the API: each endpoint it has
// answers, decoded by the client, with what the store holds.
func TestClientGolang(t *testing.T) {
	d := newDemo(t, "native:5", 4, 20)
	srv := serveDemo(t, d, Config{})
	c := clientOf(t, srv.URL)
	ctx := context.Background()

	v, warn, _, err := c.Query(ctx, `histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`, d.now)
	if err != nil || len(warn) > 0 {
		t.Fatalf("query: %v %v", err, warn)
	}
	vec := v.(model.Vector)
	oracle := d.valuesBy(math.MinInt64, math.MaxInt64, func(e demoEvent) string { return e.key })
	if len(vec) != len(oracle) {
		t.Fatalf("%d keys, want %d", len(vec), len(oracle))
	}
	for _, s := range vec {
		exact := nearestRank(oracle[string(s.Metric["key"])], 0.95)
		if rel := math.Abs(float64(s.Value)-exact) / exact; rel > 0.025 {
			t.Errorf("%v: p95 %v, exact %g", s.Metric, s.Value, exact)
		}
		if s.Timestamp.Time().UnixMilli() != d.now.UnixMilli() {
			t.Errorf("timestamp %v, want %v", s.Timestamp, d.now)
		}
	}

	// The native histogram itself, as the client decodes Prometheus' histogram JSON.
	v, _, _, err = c.Query(ctx, `sum(latency_ms)`, d.now)
	if err != nil {
		t.Fatal(err)
	}
	h := v.(model.Vector)[0].Histogram
	if h == nil || int(h.Count) != len(d.events) || len(h.Buckets) == 0 {
		t.Fatalf("sum(latency_ms): %+v, want a histogram of %d values", h, len(d.events))
	}
	var inBuckets model.FloatString
	for _, b := range h.Buckets {
		inBuckets += b.Count
	}
	if int(inBuckets) != len(d.events) {
		t.Errorf("buckets hold %v values, want %d", inBuckets, len(d.events))
	}

	rng := v1.Range{Start: d.now.Add(-2 * time.Minute), End: d.now, Step: 10 * time.Second}
	v, _, _, err = c.QueryRange(ctx, `sum by (key) (rate(latency_ms_count[1m]))`, rng)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(model.Matrix)
	if len(m) != 4 {
		t.Fatalf("range: %d series, want 4", len(m))
	}
	for _, ss := range m {
		if len(ss.Values) != 13 {
			t.Errorf("%v: %d points, want 13", ss.Metric, len(ss.Values))
		}
		for _, p := range ss.Values {
			if p.Value <= 0 {
				t.Errorf("%v at %v: rate %v", ss.Metric, p.Timestamp, p.Value)
			}
		}
	}

	names, _, _, err := c.LabelNames(ctx, nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toStrings(names), ","); got != "__name__,decision,key,route" {
		t.Errorf("labels: %s", got)
	}
	vals, _, _, err := c.LabelValues(ctx, "__name__", []string{`{key="k0aa"}`}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toStrings(vals), ","); got != "errors,errors_count,errors_max,errors_sum,latency_ms,latency_ms_count,latency_ms_max,latency_ms_sum,limiter_decisions,limiter_decisions_count,limiter_decisions_max,limiter_decisions_sum" {
		t.Errorf("__name__ values: %s", got)
	}
	vals, _, _, err = c.LabelValues(ctx, "key", []string{`latency_ms_count{route="/pay"}`}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toStrings(vals), ","); got != "k0aa,k1aa,k2aa,k3aa" {
		t.Errorf("key values: %s", got)
	}
	sets, _, _, err := c.Series(ctx, []string{`latency_ms_max{key="k1aa"}`}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || sets[0]["route"] != "/pay" || sets[1]["route"] != "/search" || sets[0]["__name__"] != "latency_ms_max" {
		t.Errorf("series: %v", sets)
	}
	md, err := c.Metadata(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(md) != 12 || md["latency_ms"][0].Type != v1.MetricTypeHistogram || md["latency_ms_count"][0].Type != v1.MetricTypeCounter || md["latency_ms_max"][0].Type != v1.MetricTypeGauge {
		t.Errorf("metadata: %v", md)
	}
	ex, err := c.QueryExemplars(ctx, "latency_ms", d.now.Add(-time.Minute), d.now)
	if err != nil || len(ex) != 0 {
		t.Errorf("exemplars: %v %v", ex, err)
	}
	bi, err := c.Buildinfo(ctx)
	if err != nil || !strings.HasPrefix(bi.Version, "3.") {
		t.Errorf("buildinfo: %+v %v", bi, err)
	}

	// A bad query is a bad_data error the client surfaces with its type.
	_, _, _, err = c.Query(ctx, `sum(`, d.now)
	var perr *v1.Error
	if !errors.As(err, &perr) || perr.Type != v1.ErrBadData {
		t.Errorf("bad query: %v", err)
	}
}

func toStrings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestGrafanaRequests sends what Grafana's Prometheus data source sends: the health check
// (POST /api/v1/query, query=1+1, a form body), the flavour probe, and an exemplar query,
// and checks status and body byte for byte.
func TestGrafanaRequests(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	form := url.Values{"query": {"1+1"}, "time": {"1800000004.5"}}
	res, err := http.Post(srv.URL+"/api/v1/query", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, res)
	if want := `{"status":"success","data":{"resultType":"scalar","result":[1800000004.500,"2"]}}`; res.StatusCode != 200 || body != want {
		t.Errorf("health check: %d %s, want %s", res.StatusCode, body, want)
	}
	for _, c := range []struct{ path, want string }{
		{"/api/v1/query_exemplars?query=latency_ms&start=1&end=2", `{"status":"success","data":[]}`},
		{"/api/v1/label/key/values?match[]=errors_count", `{"status":"success","data":["k0aa","k1aa"]}`},
		{"/api/v1/query?query=" + url.QueryEscape("count_over_time(latency_ms_max[5y:1s])"), `{"status":"error","errorType":"bad_data","error":"subquery latency_ms_max[5y:1s] evaluates 157680000 steps, more than 11000: widen its step"}`},
		{"/api/v1/nope", `{"status":"error","errorType":"not_found","error":"no route /api/v1/nope in slide's Prometheus API"}`},
		{"/api/v1/query_range?query=1&start=10&end=1&step=1", `{"status":"error","errorType":"bad_data","error":"invalid parameter \"end\": end timestamp must not be before start time"}`},
	} {
		res, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); body != c.want {
			t.Errorf("%s: %s, want %s", c.path, body, c.want)
		}
	}
	res, err = http.Get(srv.URL + "/api/v1/status/buildinfo")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 200 || !strings.Contains(body, `"version":"3.`) {
		t.Errorf("buildinfo: %d %s", res.StatusCode, body)
	}
}

// TestNestedSubqueriesCapped: a subquery inside others is evaluated over their ranges and
// its own, so nesting subqueries that each pass the 11,000-step cap alone is refused as one
// of their sum (twenty max_over_time((…)[3h:1s]) held 3 GB and a core for a minute), while
// a nesting within the cap and a lone subquery as long as the cap still run.
func TestNestedSubqueriesCapped(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	nest := func(n int, sub string) string {
		e := "vector(1)"
		for range n {
			e = "max_over_time((" + e + ")" + sub + ")"
		}
		return e
	}
	for _, c := range []struct {
		query  string
		status int
		want   string
	}{
		{nest(20, "[3h:1s]"), 400, `evaluates 21600 steps over its range and those of the 1 subqueries around it, more than 11000: widen its step or nest fewer"}`},
		{nest(2, "[3h:1s]"), 400, `{"status":"error","errorType":"bad_data","error":"subquery (vector(1))[3h:1s] evaluates 21600 steps over its range and those of the 1 subqueries around it, more than 11000: widen its step or nest fewer"}`},
		{nest(2, "[3h:2s]"), 200, `"value":[1800000000,"1"]`},
		{nest(3, "[1h:1s]"), 200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1800000000,"1"]}]}}`},
		{"max_over_time(vector(1)[11000s:1s])", 200, `"value":[1800000000,"1"]`},
	} {
		res, err := http.Get(srv.URL + "/api/v1/query?time=1800000000&query=" + url.QueryEscape(c.query))
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%.60s: %d %s, want %d %s", c.query, res.StatusCode, body, c.status, c.want)
		}
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLimitsAndPartitions: the series cap is a cost_limit error, a query over part of the
// partitions is a 503 naming them, or with partial=allow an answer with a warning.
func TestLimitsAndPartitions(t *testing.T) {
	d := newDemo(t, "native:5", 4, 5)
	srv := serveDemo(t, d, Config{MaxSeries: 5})
	_, _, _, err := clientOf(t, srv.URL).Query(context.Background(), `sum(latency_ms_count)`, d.now)
	var perr *v1.Error
	if !errors.As(err, &perr) || perr.Type != v1.ErrorType(errCostLimit) {
		t.Errorf("over the series cap: %v", err)
	}
	srv = serveDemo(t, d, Config{Remote: func() []int32 { return []int32{3, 7} }})
	res, err := http.Get(srv.URL + "/api/v1/query?query=1")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 503 || !strings.Contains(body, `"errorType":"unavailable"`) || !strings.Contains(body, "(3,7)") {
		t.Errorf("part of the partitions: %d %s", res.StatusCode, body)
	}
	_, warn, _, err := clientOf(t, srv.URL).Query(context.Background(), `count(latency_ms_count)`, d.now, v1.WithTimeout(time.Minute))
	if err == nil || len(warn) != 0 {
		t.Errorf("without partial=allow: %v %v", err, warn)
	}
	res, err = http.Get(srv.URL + "/api/v1/query?query=1&time=5&partial=allow")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 200 || body != `{"status":"success","data":{"resultType":"scalar","result":[5,"1"]},"warnings":["partial answer: partitions 3,7 are held by other instances and were not read (partial=allow)"]}` {
		t.Errorf("partial=allow: %d %s", res.StatusCode, body)
	}
}

// TestClientThatLeavesStopsTheQuery: a request whose client has gone (its context canceled)
// is not evaluated: the engine and the store scan both ask the context, and the answer is
// Prometheus' canceled (499); a Select under a canceled context fails with its error.
func TestClientThatLeavesStopsTheQuery(t *testing.T) {
	d := newDemo(t, "native:5", 200, 2)
	a, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/query?query=sum(rate(latency_ms[5m]))", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != 499 || !strings.Contains(rec.Body.String(), `"errorType":"canceled"`) {
		t.Errorf("canceled request: %d %s", rec.Code, rec.Body.String())
	}
	q, _ := a.Queryable().Querier(0, d.now.UnixMilli())
	ss := q.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "latency_ms"))
	for ss.Next() {
	}
	if !errors.Is(ss.Err(), context.Canceled) {
		t.Errorf("Select under a canceled context: %v", ss.Err())
	}
}

// TestNotReady: while Config.Ready fails, every route answers Prometheus' 503 unavailable.
func TestNotReady(t *testing.T) {
	d := newDemo(t, "native:5", 1, 1)
	srv := serveDemo(t, d, Config{Ready: func() error { return errors.New("restoring windows from Kafka") }})
	res, err := http.Get(srv.URL + "/api/v1/query?query=1")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); res.StatusCode != 503 || body != `{"status":"error","errorType":"unavailable","error":"not ready: restoring windows from Kafka"}` {
		t.Errorf("not ready: %d %s", res.StatusCode, body)
	}
}

// TestClassicBucketsWarn: the dashboards' classic form, histogram_quantile over
// sum by (le) of M_bucket, selects nothing (slide shows M as a native histogram), and the
// answer says what to write instead, through client_golang as Grafana would see it; a name
// that is no slide metric's buckets gets the warning of any unknown name, not this one.
func TestClassicBucketsWarn(t *testing.T) {
	d := newDemo(t, "native:5", 4, 5)
	for _, off := range []bool{false, true} {
		testClassicBuckets(t, d, off)
	}
}

func testClassicBuckets(t *testing.T, d *demo, enginesOnly bool) {
	srv := serveDemo(t, d, Config{DisablePushdown: enginesOnly})
	c := clientOf(t, srv.URL)
	v, warn, _, err := c.Query(context.Background(), `histogram_quantile(0.95, sum by (le, key) (rate(latency_ms_bucket[5m])))`, d.now)
	if err != nil || v.String() != "" || len(warn) != 1 || !strings.Contains(warn[0], "latency_ms_bucket: slide has no classic le buckets") ||
		!strings.Contains(warn[0], "histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))") {
		t.Errorf("classic buckets (engine only: %v): %v %q %v", enginesOnly, v, warn, err)
	}
	if v, warn, _, err := c.Query(context.Background(), `rate(nosuch_bucket[5m])`, d.now); err != nil || v.String() != "" || len(warn) != 1 || !strings.Contains(warn[0], "nosuch_bucket is no name slide has") {
		t.Errorf("buckets of no slide metric (engine only: %v): %v %q %v", enginesOnly, v, warn, err)
	}
}

// TestMatchSetsAsPrometheus: a match[] set of /api/v1/series, labels and label values that
// every series would satisfy ({route=""}, {route=~".*"}) is refused as Prometheus refuses
// it, rather than listing the whole store; and a match[] of /api/v1/series that does not
// parse is named as the parameter, byte for byte Prometheus' answer.
func TestMatchSetsAsPrometheus(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	empty := `{"status":"error","errorType":"bad_data","error":"match[] must contain at least one non-empty matcher"}`
	for _, c := range []struct{ path, want string }{
		{"/api/v1/series?match[]=" + url.QueryEscape(`{route=""}`), `{"status":"error","errorType":"bad_data","error":"invalid parameter \"match[]\": match[] must contain at least one non-empty matcher"}`},
		{"/api/v1/series?match[]=latency_ms&match[]=" + url.QueryEscape(`{route=~".*"}`), `{"status":"error","errorType":"bad_data","error":"invalid parameter \"match[]\": match[] must contain at least one non-empty matcher"}`},
		{"/api/v1/labels?match[]=" + url.QueryEscape(`{route=""}`), empty},
		{"/api/v1/label/key/values?match[]=" + url.QueryEscape(`{route!="/pay"}`), empty},
		{"/api/v1/series?match[]=" + url.QueryEscape(`latency_ms{`), `{"status":"error","errorType":"bad_data","error":"invalid parameter \"match[]\": 1:12: parse error: unexpected end of input inside braces"}`},
	} {
		res, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != 400 || body != c.want {
			t.Errorf("%s: %d %s, want 400 %s", c.path, res.StatusCode, body, c.want)
		}
	}
	res, err := http.Get(srv.URL + "/api/v1/label/key/values?match[]=" + url.QueryEscape(`{route="/pay"}`))
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, res); body != `{"status":"success","data":["k0aa","k1aa"]}` {
		t.Errorf("a set with a non-empty matcher: %s", body)
	}
}

// TestDashedNameWarns: a slide metric may hold "-" or "." (req-latency), which PromQL reads
// as an operator outside quotes: req-latency_count is req minus latency_count, two selectors
// of nothing, and the answer was empty with no word of why. The answer now says how to
// select the metric; the parts of a name that is no slide metric's are warned of as unknown
// names (TestUnknownNameWarns), with no quoting hint.
func TestDashedNameWarns(t *testing.T) {
	d := newDemo(t, "native:5", 1, 2)
	d.add(t, "req-latency", "k1", "/pay", t0.UnixMilli()-1000, 5)
	srv := serveDemo(t, d, Config{})
	c := clientOf(t, srv.URL)
	for q, want := range map[string]string{`req-latency_count`: "req-latency_count", `sum(req-latency_sum)`: "req-latency_sum", `req-latency`: "req-latency"} {
		v, warn, _, err := c.Query(context.Background(), q, d.now)
		if hint := `{__name__="` + want + `"}`; err != nil || v.String() != "" || len(warn) != 1 || !strings.Contains(warn[0], hint) {
			t.Errorf("%s: %v %q %v; want an empty answer whose one warning names %s", q, v, warn, err, hint)
		}
	}
	// A range of it does not parse (a subtraction of a range): the error says the same.
	if _, _, _, err := c.Query(context.Background(), `rate(req-latency_count[5m])`, d.now); err == nil || !strings.Contains(err.Error(), `{__name__="req-latency_count"}`) {
		t.Errorf("rate(req-latency_count[5m]): %v; want the parse error to name {__name__=\"req-latency_count\"}", err)
	}
	if v, _, _, err := c.Query(context.Background(), `{__name__="req-latency_count"}`, d.now); err != nil || v.String() == "" {
		t.Errorf("the quoted form selects nothing: %v %v", v, err)
	}
	if v, warn, _, err := c.Query(context.Background(), `nosuch-thing_count`, d.now); err != nil || v.String() != "" || len(warn) != 2 || strings.Contains(strings.Join(warn, " "), "__name__") {
		t.Errorf("no slide metric's parts: %v %q %v", v, warn, err)
	}
}

// TestExemplarsRefuseWhatPrometheusRefuses: with or without exemplars, a request
// Prometheus refuses (a query that does not parse, a bad start or end, end before start) is
// refused with its 400 bad_data, not answered with an empty success that tells Grafana's
// user the query was fine.
func TestExemplarsRefuseWhatPrometheusRefuses(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	for _, c := range []struct {
		query url.Values
		code  int
		want  string
	}{
		{url.Values{"query": {"sum("}}, 400, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}`},
		{url.Values{"query": {"latency_ms"}, "start": {"yesterday"}}, 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"start\": cannot parse \"yesterday\" to a valid timestamp"}`},
		{url.Values{"query": {"latency_ms"}, "end": {"NaN"}}, 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"end\": cannot parse \"NaN\" to a valid timestamp"}`},
		{url.Values{"query": {"latency_ms"}, "start": {"10"}, "end": {"1"}}, 400, `{"status":"error","errorType":"bad_data","error":"end timestamp must not be before start timestamp"}`},
		{url.Values{"query": {"latency_ms"}}, 200, `{"status":"success","data":[]}`},
		{url.Values{"query": {"latency_ms"}, "start": {"1"}, "end": {"1"}}, 200, `{"status":"success","data":[]}`},
	} {
		res, err := http.Get(srv.URL + "/api/v1/query_exemplars?" + c.query.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != c.code || body != c.want {
			t.Errorf("%v: %d %s, want %d %s", c.query, res.StatusCode, body, c.code, c.want)
		}
	}
	// The client surfaces the refusal with its type.
	_, err := clientOf(t, srv.URL).QueryExemplars(context.Background(), "rate(", d.now.Add(-time.Minute), d.now)
	var perr *v1.Error
	if !errors.As(err, &perr) || perr.Type != v1.ErrBadData {
		t.Errorf("bad exemplar query through client_golang: %v", err)
	}
}

// TestFormatQuery: /api/v1/format_query (Grafana's query editor, client_golang's
// FormatQuery) answers Prometheus' own pretty-printing of the expression, by GET and by
// POST, and a query that does not parse is a 400 bad_data naming the parameter.
func TestFormatQuery(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	long := `histogram_quantile(0.95, sum by (key, route) (rate(latency_ms{route=~"/pay|/search", key!="k0aa"}[5m]))) > on (key) group_left () max by (key) (latency_ms_max)`
	want := "  histogram_quantile(\n    0.95,\n    sum by (key, route) (rate(latency_ms{key!=\"k0aa\",route=~\"/pay|/search\"}[5m]))\n  )\n" +
		"> on (key) group_left ()\n  max by (key) (latency_ms_max)"
	// client_golang hands back data's raw JSON (against Prometheus too): a JSON string,
	// with Prometheus' codec's HTML escapes (\u003e for >).
	raw, err := clientOf(t, srv.URL).FormatQuery(context.Background(), long)
	var got string
	if err == nil {
		err = json.Unmarshal([]byte(raw), &got)
	}
	if err != nil || got != want || !strings.Contains(raw, `\u003e on`) {
		t.Errorf("client_golang FormatQuery: %s %v, want %q", raw, err, want)
	}
	for _, c := range []struct {
		method, query string
		code          int
		want          string
	}{
		{"GET", "sum(rate(latency_ms_count[5m]))by(key)", 200, `{"status":"success","data":"sum by (key) (rate(latency_ms_count[5m]))"}`},
		{"POST", "sum(rate(latency_ms_count[5m]))by(key)", 200, `{"status":"success","data":"sum by (key) (rate(latency_ms_count[5m]))"}`},
		{"GET", "sum(", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unclosed left parenthesis"}`},
		{"POST", "", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": unknown position: parse error: no expression found in input"}`},
	} {
		form := url.Values{"query": {c.query}}.Encode()
		var res *http.Response
		if c.method == "GET" {
			res, err = http.Get(srv.URL + "/api/v1/format_query?" + form)
		} else {
			res, err = http.Post(srv.URL+"/api/v1/format_query", "application/x-www-form-urlencoded", strings.NewReader(form))
		}
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != c.code || body != c.want {
			t.Errorf("%s %q: %d %s, want %d %s", c.method, c.query, res.StatusCode, body, c.code, c.want)
		}
	}
}

// TestNoRules: slide evaluates no rules, and says so as a Prometheus without rules does:
// /api/v1/rules an empty list of groups, /api/v1/alerts an empty list of alerts. Grafana
// asks for the rules of a Prometheus data source (its alert list, with "manage alerts" on
// by default, and its query editor's recording rules), and a 404 there was an error on
// Grafana's alerting page ("404 from rule state endpoint. Perhaps ruler API is not
// enabled?").
func TestNoRules(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/api/v1/rules", 200, `{"status":"success","data":{"groups":[]}}`},
		{"/api/v1/rules?type=alert&rule_name[]=x&exclude_alerts=true", 200, `{"status":"success","data":{"groups":[]}}`},
		{"/api/v1/rules?type=RECORD", 200, `{"status":"success","data":{"groups":[]}}`},
		{"/api/v1/rules?type=bogus", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"type\": not supported value \"bogus\""}`},
		{"/api/v1/rules?match[]=" + url.QueryEscape(`{x=""}`), 400, `{"status":"error","errorType":"bad_data","error":"match[] must contain at least one non-empty matcher"}`},
		{"/api/v1/alerts", 200, `{"status":"success","data":{"alerts":[]}}`},
	} {
		res, err := http.Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != c.code || body != c.want {
			t.Errorf("%s: %d %s, want %d %s", c.path, res.StatusCode, body, c.code, c.want)
		}
	}
	c := clientOf(t, srv.URL)
	rules, err := c.Rules(context.Background(), nil)
	if err != nil || rules.Groups == nil || len(rules.Groups) != 0 {
		t.Errorf("client_golang Rules: %+v %v", rules, err)
	}
	alerts, err := c.Alerts(context.Background())
	if err != nil || alerts.Alerts == nil || len(alerts.Alerts) != 0 {
		t.Errorf("client_golang Alerts: %+v %v", alerts, err)
	}
}

// TestUnknownNameWarns: a selector of a name slide does not expose (latency_count for
// latency_ms_count, a Prometheus exporter's http_requests_total) answered an empty result
// with no word of why, as Prometheus does, though slide knows every name it has; a
// newcomer's Grafana panel stayed blank. The answer now says the name is none of slide's,
// the nearest one, and how slide names its metrics, with the quantile pushdown on or off.
func TestUnknownNameWarns(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	for _, off := range []bool{false, true} {
		c := clientOf(t, serveDemo(t, d, Config{DisablePushdown: off}).URL)
		for _, tc := range []struct{ query, want string }{
			{`rate(latency_count[5m])`, `did you mean latency_ms_count?`},
			{`histogram_quantile(0.95, sum by (key) (rate(latency_seconds[5m])))`, `slide metrics: latency_ms`},
			{`sum(rate(http_requests_total[5m]))`, `; slide metrics: `},
		} {
			v, warn, _, err := c.Query(context.Background(), tc.query, d.now)
			if err != nil || v.String() != "" || len(warn) != 1 || !strings.Contains(warn[0], "is no name slide has") || !strings.Contains(warn[0], tc.want) {
				t.Errorf("%s (engine only: %v): %v %q %v; want an empty answer whose one warning says %q", tc.query, off, v, warn, err, tc.want)
			}
		}
		// A name slide has, with no series in the answer, is not warned of.
		if v, warn, _, err := c.Query(context.Background(), `latency_ms_count{key="nobody"}`, d.now); err != nil || v.String() != "" || len(warn) != 0 {
			t.Errorf("a known name selecting nothing (engine only: %v): %v %q %v", off, v, warn, err)
		}
	}
}
