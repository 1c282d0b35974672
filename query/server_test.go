package query_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// seed records a few events directly in the store at the env's clock.
func (e *env) seed(evs ...event) {
	e.t.Helper()
	for _, ev := range evs {
		if err := e.store.ObserveAt(e.clock.millis(), window.Event{TS: ev.ts, Metric: ev.metric, Key: ev.key, Value: ev.value, Count: ev.count}); err != nil {
			e.t.Fatalf("observe %+v: %v", ev, err)
		}
	}
}

func (e *env) wantError(method, path string, body []byte, status int, code httperr.Code, param string, hdr ...string) errorAnswer {
	e.t.Helper()
	got, b, h := e.do(method, path, body, hdr...)
	var a errorAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatalf("%s %s: body %q is not a JSON error: %v", method, path, b, err)
	}
	if got != status || a.Error.Code != string(code) || a.Error.Param != param || a.Error.Message == "" {
		e.t.Errorf("%s %s = %d %s, want %d code %q param %q", method, path, got, b, status, code, param)
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return a
}

// TestBadParametersAre400NamingTheParameter: every bad parameter of every read route is a
// 400 whose message and "param" name it.
func TestBadParametersAre400NamingTheParameter(t *testing.T) {
	e := newEnv(t, nil)
	e.seed(event{ts: t0, key: "k", metric: "latency_ms", value: 1})
	for _, c := range []struct{ path, param, msg string }{
		{"/v1/window?key=k", "metric", "required"},
		{"/v1/window?metric=latency_ms", "key", "required"},
		{"/v1/window?metric=latency_ms&key=k&window=7s", "window", "not a multiple of the slot width 10s"},
		{"/v1/window?metric=latency_ms&key=k&window=10m", "window", "longer than the retention 5m"},
		{"/v1/window?metric=cost&key=k&window=90s", "window", `slot width 1m of metric "cost"`},
		{"/v1/window?metric=latency_ms&key=k&window=-1m", "window", "positive"},
		{"/v1/window?metric=latency_ms&key=k&window=soon", "window", "not a duration"},
		{"/v1/window?metric=latency_ms&key=k&q=1.5", "q", `"1.5" is not a quantile`},
		{"/v1/window?metric=latency_ms&key=k&q=0.5,median", "q", `"median"`},
		{"/v1/window?metric=latency_ms&key=k&q=", "q", `"" is not a quantile`},
		{"/v1/window?metric=latency_ms&key=k&windw=5m", "windw", "unknown parameter"},
		{"/v1/window?metric=latency_ms&metric=x&key=k", "metric", "given 2 times"},
		{"/v1/window?metric=%zz", "query", "malformed"},
		{"/v1/top?by=p95", "metric", "required"},
		{"/v1/top?metric=latency_ms&by=p95x", "by", "not one of count, sum"},
		{"/v1/top?metric=latency_ms&k=0", "k", "outside [1, 1000]"},
		{"/v1/top?metric=latency_ms&k=ten", "k", "not an integer"},
		{"/v1/top?metric=latency_ms&window=11s", "window", "multiple"},
		{"/v1/top?metric=latency_ms&q=2", "q", "not a quantile"},
		{"/v1/series?limit=0", "limit", "outside [1, 10000]"},
		{"/v1/series?limit=100001", "limit", "outside"},
		{"/v1/series?cursor=!!", "cursor", "not a cursor"},
		{"/v1/series?cursor=" + url.QueryEscape("bm9udWw"), "cursor", "not a cursor"},
		{"/v1/series?sort=key", "sort", "unknown parameter"},
		{"/v1/metrics?x=1", "x", "takes partial"},
		{"/v1/metrics?partial=maybe", "partial", "not allow or deny"},
		{"/v1/status?x=1", "x", "takes none"},
	} {
		a := e.wantError("GET", c.path, nil, 400, httperr.BadParameter, c.param)
		if !strings.Contains(a.Error.Message, fmt.Sprintf("%q", c.param)) || !strings.Contains(a.Error.Message, c.msg) {
			t.Errorf("GET %s: message %q should name %q and say %q", c.path, a.Error.Message, c.param, c.msg)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	e := newEnv(t, nil)
	e.seed(event{ts: t0, key: "tenant-1", metric: "latency_ms", value: 1})
	a := e.wantError("GET", "/v1/window?metric=latency_ms&key=tenant-2", nil, 404, httperr.NotFound, "")
	if !strings.Contains(a.Error.Message, `"tenant-2"`) {
		t.Errorf("404 message %q does not name the key", a.Error.Message)
	}
	e.wantError("GET", "/v1/window?metric=latency_ms&key=eu-*", nil, 404, httperr.NotFound, "")
	e.wantError("GET", "/v1/window?metric=nope&key=tenant-1", nil, 404, httperr.NotFound, "")
	e.wantError("GET", "/v2/window", nil, 404, httperr.NotFound, "")
	e.wantError("POST", "/v1/window?metric=latency_ms&key=tenant-1", nil, 405, httperr.MethodNotAllowed, "")
	e.wantError("GET", "/v1/events", nil, 405, httperr.MethodNotAllowed, "")
	if _, _, h := e.do("DELETE", "/v1/top", nil); h.Get("Allow") != "GET, HEAD" {
		t.Errorf("405 Allow = %q, want GET, HEAD", h.Get("Allow"))
	}
	if code, _, _ := e.do("HEAD", "/v1/window?metric=latency_ms&key=tenant-1", nil); code != 200 {
		t.Errorf("HEAD /v1/window = %d, want 200", code)
	}
	// No limiter configured: 501, still JSON.
	e.wantError("POST", "/v1/allow", []byte(`{}`), 501, httperr.NotConfigured, "")
}

// TestEventsBodyLimit: a body over the limit is 413 and records nothing, whether its size is
// announced by Content-Length or discovered while reading a chunked body.
func TestEventsBodyLimit(t *testing.T) {
	e := newEnv(t, func(c *query.Config) { c.MaxBodyBytes = 4096 })
	line := event{ts: t0, key: "big", metric: "latency_ms", value: 3}.line()
	body := []byte(strings.Repeat(line, 4096/len(line)+1))
	e.wantError("POST", "/v1/events", body, 413, httperr.BodyTooLarge, "")

	req, _ := http.NewRequest("POST", e.http.URL+"/v1/events", struct{ *strings.Reader }{strings.NewReader(string(body))})
	req.ContentLength = -1 // chunked: the size is only found by reading
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked oversized body: %d, want 413", resp.StatusCode)
	}
	if e.store.Len() != 0 {
		t.Errorf("an oversized body recorded %d series", e.store.Len())
	}
	// At the limit exactly it is accepted.
	fit := []byte(strings.Repeat(line, 4096/len(line)))
	if a := e.post(fit); a.Accepted != 4096/len(line) {
		t.Errorf("body at the limit: %+v", a)
	}
}

func TestBearerTokenOnWriteRoutes(t *testing.T) {
	allowed := 0
	e := newEnv(t, func(c *query.Config) {
		c.AuthToken = "s3cret-token"
		c.Allow = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { allowed++; w.WriteHeader(200) })
	})
	body := []byte(event{ts: t0, key: "a", metric: "latency_ms", value: 1}.line())
	for _, path := range []string{"/v1/events", "/v1/allow"} {
		a := e.wantError("POST", path, body, 401, httperr.Unauthorized, "")
		if !strings.Contains(a.Error.Message, "missing") {
			t.Errorf("%s without token: %q", path, a.Error.Message)
		}
		a = e.wantError("POST", path, body, 401, httperr.Unauthorized, "", "Authorization", "Bearer s3cret-tokem")
		if !strings.Contains(a.Error.Message, "invalid") {
			t.Errorf("%s wrong token: %q", path, a.Error.Message)
		}
		e.wantError("POST", path, body, 401, httperr.Unauthorized, "", "Authorization", "Basic czNjcmV0LXRva2Vu")
		e.wantError("POST", path, body, 401, httperr.Unauthorized, "", "Authorization", "Bearer s3cret-token-and-more")
		if code, b, _ := e.do("POST", path, body, "Authorization", "bearer s3cret-token"); code != 200 {
			t.Errorf("%s with the token: %d %s", path, code, b)
		}
	}
	if allowed != 1 || e.store.Len() != 1 {
		t.Errorf("authorized requests reached the handlers %d times / %d series, want 1 / 1", allowed, e.store.Len())
	}
	if _, _, h := e.do("POST", "/v1/events", body); !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: %q", h.Get("WWW-Authenticate"))
	}
	// Reads need no token.
	if code, b, _ := e.do("GET", "/v1/window?metric=latency_ms&key=a", nil); code != 200 {
		t.Errorf("read with auth configured: %d %s", code, b)
	}
}

func TestReadiness(t *testing.T) {
	var restoring error = errors.New("restoring partitions 0-3")
	e := newEnv(t, func(c *query.Config) { c.Ready = func() error { return restoring } })
	e.seed(event{ts: t0, key: "a", metric: "latency_ms", value: 1})
	a := e.wantError("GET", "/readyz", nil, 503, httperr.NotReady, "")
	if !strings.Contains(a.Error.Message, "restoring partitions 0-3") {
		t.Errorf("readyz message %q", a.Error.Message)
	}
	e.wantError("GET", "/v1/window?metric=latency_ms&key=a", nil, 503, httperr.NotReady, "")
	if code, _, _ := e.do("GET", "/healthz", nil); code != 200 {
		t.Errorf("healthz while restoring = %d, want 200 (alive)", code)
	}
	restoring = nil
	if code, _, _ := e.do("GET", "/readyz", nil); code != 200 {
		t.Errorf("readyz after restore = %d", code)
	}
	if code, _, _ := e.do("GET", "/v1/window?metric=latency_ms&key=a", nil); code != 200 {
		t.Errorf("window after restore = %d", code)
	}
}

// TestSeriesPaging walks every page and finds each series exactly once, in order, even when
// series are added between pages.
func TestSeriesPaging(t *testing.T) {
	e := newEnv(t, nil)
	var want []string
	for i := range 23 {
		k := fmt.Sprintf("tenant-%02d", i)
		e.seed(event{ts: t0, key: k, metric: "latency_ms", value: 1})
		want = append(want, "latency_ms/"+k)
	}
	e.seed(event{ts: t0, key: "tenant-05", metric: "cost", value: 1}, event{ts: t0, key: "x", metric: "cost", value: 1})
	want = append([]string{"cost/tenant-05", "cost/x"}, want...)

	type page struct {
		Series []struct{ Metric, Key string } `json:"series"`
		Next   string                         `json:"next"`
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		var p page
		e.getJSON("/v1/series?limit=10&cursor="+url.QueryEscape(cursor), 200, &p)
		for _, s := range p.Series {
			got = append(got, s.Metric+"/"+s.Key)
		}
		if pages == 0 {
			// A series that sorts before the cursor appears later without shifting the pages.
			e.seed(event{ts: t0, key: "aaa", metric: "cost", value: 1})
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged series\n got %v\nwant %v", got, want)
	}
	var p page
	e.getJSON("/v1/series?metric=latency_ms&prefix=tenant-1", 200, &p)
	if len(p.Series) != 10 || p.Series[0].Key != "tenant-10" || p.Next != "" {
		t.Fatalf("prefix listing = %+v", p)
	}
}

func TestMetricsList(t *testing.T) {
	e := newEnv(t, nil)
	e.seed(event{ts: t0, key: "a", metric: "latency_ms", value: 1}, event{ts: t0, key: "b", metric: "latency_ms", value: 1},
		event{ts: t0, key: "a", metric: "cost", value: 2})
	code, b, _ := e.do("GET", "/v1/metrics", nil)
	want := `{"metrics":[{"name":"cost","series":1,"slot":"1m","slots":60,"retention":"1h"},{"name":"latency_ms","series":2,"slot":"10s","slots":30,"retention":"5m"}]}` + "\n"
	if code != 200 || string(b) != want {
		t.Fatalf("GET /v1/metrics = %d %s\nwant %s", code, b, want)
	}
}

// TestExportedWindows checks the families of --export-windows and the cap, with values the
// data makes exact (a series of one repeated value has every quantile equal to it): count,
// sum and quantiles are one summary, slide_window, as promtool wants them.
func TestExportedWindows(t *testing.T) {
	specs, err := query.ParseExportSpecs("latency_ms:1m:0.95,max,count;cost:1h:sum")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *query.Config) { c.Export = specs; c.ExportMaxSeries = 3 })
	e.clock.set(t0 + 30_000)
	e.seed(
		event{ts: t0 + 1000, key: "a", metric: "latency_ms", value: 40, count: 3},
		event{ts: t0 + 2000, key: "b", metric: "latency_ms", value: 7},
		event{ts: t0 + 2000, key: "b", metric: "latency_ms", value: 9},
		event{ts: t0 + 3000, key: "t1", metric: "cost", value: 2.5},
		event{ts: t0 + 3000, key: "t2", metric: "cost", value: 1},
	)
	want := `
# HELP slide_window_export_skipped_series Series not exported at this scrape because of the export cap.
# TYPE slide_window_export_skipped_series gauge
slide_window_export_skipped_series 1
# HELP slide_window_max Largest value in the window of a series; absent when the window is empty.
# TYPE slide_window_max gauge
slide_window_max{key="a",metric="latency_ms",window="1m"} 40
slide_window_max{key="b",metric="latency_ms",window="1m"} 9
`
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(want), "slide_window_export_skipped_series", "slide_window_max"); err != nil {
		t.Fatal(err)
	}
	type sum struct {
		count    uint64
		sum      float64
		quantile map[float64]float64
	}
	summaries := func() map[string]sum {
		mfs, err := e.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]sum{}
		for _, mf := range mfs {
			if mf.GetName() != "slide_window" {
				continue
			}
			if mf.GetType() != dto.MetricType_SUMMARY {
				t.Fatalf("slide_window is a %v, want a summary", mf.GetType())
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				sm := m.GetSummary()
				x := sum{count: sm.GetSampleCount(), sum: sm.GetSampleSum(), quantile: map[float64]float64{}}
				for _, q := range sm.GetQuantile() {
					x.quantile[q.GetQuantile()] = q.GetValue()
				}
				out[labels["metric"]+"/"+labels["key"]+"/"+labels["window"]] = x
			}
		}
		return out
	}
	got := summaries()
	if len(got) != 3 {
		t.Fatalf("summaries %v, want latency_ms a and b, cost t1 (t2 is over the cap)", got)
	}
	a, b, t1 := got["latency_ms/a/1m"], got["latency_ms/b/1m"], got["cost/t1/1h"]
	if a.count != 3 || a.sum != 120 || a.quantile[0.95] != 40 || len(a.quantile) != 1 {
		t.Errorf("a: %+v", a)
	}
	// b's p95 is a sketch estimate of 7 (rank floor(0.95 × 1) = 0 of {7, 9}), within 1%.
	if b.count != 2 || b.sum != 16 || !within1pct(b.quantile[0.95], 7) {
		t.Errorf("b: %+v", b)
	}
	if t1.count != 1 || t1.sum != 2.5 || len(t1.quantile) != 0 {
		t.Errorf("t1: %+v", t1)
	}
	// After the window slides past the events, the latency series export count 0, no
	// quantile and no max.
	e.clock.set(t0 + 2*60_000)
	got = summaries()
	if a := got["latency_ms/a/1m"]; a.count != 0 || a.sum != 0 || len(a.quantile) != 0 {
		t.Errorf("a after the window: %+v", a)
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(""), "slide_window_max"); err != nil {
		t.Fatal(err)
	}
}

func TestExportWindowCheckedAgainstTheRing(t *testing.T) {
	st, _ := window.NewStore(window.StoreConfig{})
	specs, _ := query.ParseExportSpecs("latency_ms:7s")
	_, err := query.New(query.Config{Store: st, Export: specs, Registerer: prometheus.NewRegistry()})
	if !errors.Is(err, query.ErrConfig) || !strings.Contains(err.Error(), "latency_ms:7s") || !strings.Contains(err.Error(), "slot width 10s") {
		t.Fatalf("New with a 7s export window: %v", err)
	}
	if _, err := query.New(query.Config{}); !errors.Is(err, query.ErrConfig) {
		t.Fatalf("New without a store: %v", err)
	}
	if _, err := query.New(query.Config{Store: st, Export: specs}); !errors.Is(err, query.ErrConfig) {
		t.Fatalf("New with export but no registerer: %v", err)
	}
}

// TestRequestMetrics: requests are counted by route and code and /metrics serves them.
func TestRequestMetrics(t *testing.T) {
	e := newEnv(t, nil)
	e.seed(event{ts: t0, key: "a", metric: "latency_ms", value: 1})
	e.do("GET", "/v1/window?metric=latency_ms&key=a", nil)
	e.do("GET", "/v1/window?metric=latency_ms&key=a", nil)
	e.do("GET", "/v1/window?metric=latency_ms", nil)
	code, b, _ := e.do("GET", "/metrics", nil)
	for _, want := range []string{
		`slide_http_requests_total{code="200",route="window"} 2`,
		`slide_http_requests_total{code="400",route="window"} 1`,
		`slide_http_request_duration_seconds_count{route="window"} 3`,
	} {
		if code != 200 || !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestDashboardIsSelfContained(t *testing.T) {
	e := newEnv(t, nil)
	code, b, h := e.do("GET", "/", nil)
	page := string(b)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(page, "/v1/top?") || !strings.Contains(page, "/v1/metrics") || !strings.Contains(page, "/v1/range?") || !strings.Contains(page, "/v1/status") {
		t.Fatalf("GET / = %d %s", code, h.Get("Content-Type"))
	}
	// The SVG namespace is a name for createElementNS, never fetched.
	page = strings.ReplaceAll(page, `"http://www.w3.org/2000/svg"`, "")
	for _, external := range []string{"http://", "https://", "src=", "href=", "@import", "innerHTML"} {
		if strings.Contains(page, external) {
			t.Errorf("dashboard contains %q: it must load nothing from elsewhere and never inject data as HTML", external)
		}
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	os.WriteFile(p, []byte("  abc123\n"), 0o600)
	if tok, err := query.ReadTokenFile(p); err != nil || tok != "abc123" {
		t.Fatalf("ReadTokenFile = %q, %v", tok, err)
	}
	os.WriteFile(p, []byte("\n"), 0o600)
	if _, err := query.ReadTokenFile(p); !errors.Is(err, query.ErrEmptyToken) {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := query.ReadTokenFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
	// A wrong path is refused after 64 KiB, not read whole: /dev/zero never ends.
	if _, err := query.ReadTokenFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 64 KiB: not a token file") {
		t.Fatalf("/dev/zero: %v", err)
	}
}
