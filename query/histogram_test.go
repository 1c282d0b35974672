package query_test

import (
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// buckets decodes native-histogram spans and deltas into counts by bucket index.
func buckets(spans []*dto.BucketSpan, deltas []int64) map[int]int64 {
	out := map[int]int64{}
	idx, di := 0, 0
	var c int64
	for i, sp := range spans {
		if i == 0 {
			idx = int(sp.GetOffset())
		} else {
			idx += int(sp.GetOffset())
		}
		for range sp.GetLength() {
			c += deltas[di]
			di++
			if c != 0 {
				out[idx] = c
			}
			idx++
		}
	}
	if di != len(deltas) {
		panic("spans and deltas disagree")
	}
	return out
}

// scrapeProto scrapes h's /metrics as Prometheus with native histograms does (protobuf)
// and returns the families by name.
func scrapeProto(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3")
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	dec := expfmt.NewDecoder(rec.Body, expfmt.ResponseFormat(rec.Result().Header))
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding the scrape: %v", err)
		}
		if _, dup := out[mf.GetName()]; dup {
			t.Fatalf("family %s twice", mf.GetName())
		}
		out[mf.GetName()] = &mf
	}
	return out
}

// exported is the native histogram of one exported series in a protobuf scrape of h.
func exported(t *testing.T, h http.Handler, metric, key string) *dto.Histogram {
	t.Helper()
	mf := scrapeProto(t, h)["slide_window_values"]
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("slide_window_values: type %v", mf.GetType())
	}
	for _, m := range mf.GetMetric() {
		var mm, kk string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "metric":
				mm = l.GetValue()
			case "key":
				kk = l.GetValue()
			}
		}
		if mm == metric && kk == key {
			return m.GetHistogram()
		}
	}
	t.Fatalf("no slide_window_values{metric=%q,key=%q}", metric, key)
	return nil
}

// TestExportedHistogramIsClientGolangsExactly: over a native:5 ring, the exported window
// is bucket for bucket the native histogram client_golang builds from the same raw values
// (zero and negative values included), with the exact count and sum; over a ddsketch ring
// the window is re-bucketed into schema 5 and a quantile read from its buckets stays within
// the documented 1% + 2.2%.
func TestExportedHistogramIsClientGolangsExactly(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{
		Metrics: map[string]window.RingConfig{"latency_ms": {Sketch: sketch.Kind{Name: sketch.NameNative}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(t0 + 25_000)
	reg := prometheus.NewRegistry()
	specs, err := query.ParseHistogramSpecs("latency_ms:5m; other:1m")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := query.New(query.Config{Store: st, Now: func() time.Time { return now }, ExportHistograms: specs, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Help: "ref", NativeHistogramBucketFactor: math.Exp2(1.0/32) * (1 + 1e-9)})
	rng := rand.New(rand.NewPCG(15, 3))
	var vals []float64
	sum := 0.0
	for i := range 5000 {
		v := math.Exp(math.Log(60) + rng.NormFloat64())
		switch i % 500 {
		case 0:
			v = 0
		case 1:
			v = -v
		}
		ts := t0 + int64(i%25)*1000
		for _, m := range []string{"latency_ms", "other"} {
			if err := st.ObserveAt(now.UnixMilli(), window.Event{TS: ts, Metric: m, Key: "a", Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		ref.Observe(v)
		vals = append(vals, v)
		sum += v
	}
	var rm dto.Metric
	if err := ref.Write(&rm); err != nil {
		t.Fatal(err)
	}
	want, got := rm.GetHistogram(), exported(t, h, "latency_ms", "a")
	if got.GetSchema() != 5 || got.GetSchema() != want.GetSchema() || got.GetZeroThreshold() != want.GetZeroThreshold() ||
		got.GetZeroCount() != want.GetZeroCount() || got.GetSampleCount() != 5000 || math.Abs(got.GetSampleSum()-sum) > 1e-9*sum {
		t.Fatalf("exported schema %d zero %v/%d count %d sum %v; client_golang %d %v/%d %d, sum %v",
			got.GetSchema(), got.GetZeroThreshold(), got.GetZeroCount(), got.GetSampleCount(), got.GetSampleSum(),
			want.GetSchema(), want.GetZeroThreshold(), want.GetZeroCount(), want.GetSampleCount(), sum)
	}
	for _, side := range []struct {
		name      string
		got, want map[int]int64
	}{
		{"positive", buckets(got.GetPositiveSpan(), got.GetPositiveDelta()), buckets(want.GetPositiveSpan(), want.GetPositiveDelta())},
		{"negative", buckets(got.GetNegativeSpan(), got.GetNegativeDelta()), buckets(want.GetNegativeSpan(), want.GetNegativeDelta())},
	} {
		if len(side.got) != len(side.want) || len(side.want) == 0 {
			t.Errorf("%s: %d buckets, client_golang %d", side.name, len(side.got), len(side.want))
		}
		for i, c := range side.want {
			if side.got[i] != c {
				t.Errorf("%s bucket %d: %d, client_golang %d", side.name, i, side.got[i], c)
			}
		}
	}

	// Re-bucketed from the default DDSketch ring: read p95 off the buckets (the upper bound
	// of the bucket holding rank 0.95·count) and compare with the exact p95 of the positives.
	re := exported(t, h, "other", "a")
	if re.GetSchema() != 5 || re.GetSampleCount() != 5000 {
		t.Fatalf("re-bucketed: schema %d count %d", re.GetSchema(), re.GetSampleCount())
	}
	pos := buckets(re.GetPositiveSpan(), re.GetPositiveDelta())
	keys := slices.Sorted(func(yield func(int) bool) {
		for k := range pos {
			if !yield(k) {
				return
			}
		}
	})
	slices.Sort(vals)
	var positives []float64
	for _, v := range vals {
		if v > 0 {
			positives = append(positives, v)
		}
	}
	rank := int64(0.95 * float64(len(positives)))
	var cum int64
	for _, k := range keys {
		cum += pos[k]
		if cum > rank {
			upper := math.Exp2(float64(k) / 32)
			exact := positives[int(0.95*float64(len(positives)-1))]
			if rel := math.Abs(upper-exact) / exact; rel > 0.01+0.022 {
				t.Errorf("re-bucketed p95 bucket upper bound %v, exact %v: %.2f%% off", upper, exact, 100*rel)
			}
			break
		}
	}
}

// TestMetricsNegotiatesFormats: /metrics answers OpenMetrics when asked (ending in # EOF),
// the classic text format by default, and protobuf with the native histograms appended
// uncompressed even when the scraper accepts gzip.
func TestMetricsNegotiatesFormats(t *testing.T) {
	specs, _ := query.ParseHistogramSpecs("latency_ms:5m")
	e := newEnv(t, func(c *query.Config) { c.ExportHistograms = specs })
	e.seed(event{ts: t0, key: "a", metric: "latency_ms", value: 12})
	code, b, h := e.do("GET", "/metrics", nil, "Accept", "application/openmetrics-text;version=1.0.0")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/openmetrics-text") || !strings.HasSuffix(string(b), "# EOF\n") ||
		!strings.Contains(string(b), `slide_window_values_count{key="a",metric="latency_ms",window="5m"} 1`) {
		t.Errorf("OpenMetrics: %d %s\n%s", code, h.Get("Content-Type"), b)
	}
	code, b, h = e.do("GET", "/metrics", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(string(b), "# TYPE slide_window_values histogram") {
		t.Errorf("text: %d %s", code, h.Get("Content-Type"))
	}
	mf := scrapeProto(t, e.srv.Handler())
	if v := mf["slide_window_values"]; len(v.GetMetric()) != 1 || v.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
		t.Errorf("protobuf: %v", v)
	}
	if mf["slide_http_requests_total"] == nil {
		t.Error("protobuf scrape lacks the registry's families")
	}
}

// TestExportSkipsSeriesItCannotExport (issue #25): a key that is not UTF-8 (which no door
// admits, but a store fed around them can hold) sorts among good ones. Every scrape, in the
// text and the protobuf formats, exports every other series of both exports and counts the
// bad one once per export in slide_window_export_errors_total{reason="invalid_utf8"};
// before, client_golang's panic in the collector dropped every series after it.
func TestExportSkipsSeriesItCannotExport(t *testing.T) {
	specs, _ := query.ParseExportSpecs("latency_ms:5m:count,max")
	hists, _ := query.ParseHistogramSpecs("latency_ms:5m")
	e := newEnv(t, func(c *query.Config) { c.Export, c.ExportHistograms = specs, hists })
	good := []string{"k-1", "k-2", "k-4", "k-5"}
	for _, k := range []string{"k-1", "k-2", "k-3\xff", "k-4", "k-5"} {
		e.seed(event{ts: t0, key: k, metric: "latency_ms", value: 12})
	}
	code, b, _ := e.do("GET", "/metrics", nil)
	text := string(b)
	if code != 200 || strings.Contains(text, "panic") {
		t.Fatalf("text scrape: %d\n%s", code, text)
	}
	for _, k := range good {
		for _, want := range []string{
			`slide_window_count{key="` + k + `",metric="latency_ms",window="5m"} 1`,
			`slide_window_max{key="` + k + `",metric="latency_ms",window="5m"} 12`,
			`slide_window_values_count{key="` + k + `",metric="latency_ms",window="5m"} 1`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("text scrape lacks %s", want)
			}
		}
	}
	if n := strings.Count(text, "\nslide_window_count{"); n != len(good) {
		t.Errorf("text scrape: %d slide_window_count series, want %d", n, len(good))
	}
	mf := scrapeProto(t, e.srv.Handler())
	if n := len(mf["slide_window_values"].GetMetric()); n != len(good) {
		t.Errorf("protobuf scrape: %d histograms, want %d", n, len(good))
	}
	if n := len(mf["slide_window"].GetMetric()); n != len(good) {
		t.Errorf("protobuf scrape: %d summaries, want %d", n, len(good))
	}
	// Each scrape skips the key once in the window export and once in the histograms; the
	// window export counts before the counter is collected, the histograms (another
	// registry, or appended to the protobuf answer) after: the third scrape shows 2 + 2 + 1.
	code, b, _ = e.do("GET", "/metrics", nil)
	if code != 200 {
		t.Fatal(code)
	}
	for _, want := range []string{
		`slide_window_export_errors_total{reason="invalid_utf8"} 5`,
		`slide_window_export_errors_total{reason="invalid_metric"} 0`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("third scrape lacks %s:\n%s", want, grepLines(string(b), "slide_window_export_errors_total"))
		}
	}
}

func grepLines(text, substr string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExportCarriesLabels (issue #27): labelled and unlabelled series of one metric, in
// both exports, scraped in the text and protobuf formats. Each exported series shows its key
// and its own labels only, and a label named as one the exports set (window) is exported as
// exported_window, prefixed again past a label of the series already named so.
func TestExportCarriesLabels(t *testing.T) {
	specs, _ := query.ParseExportSpecs("latency_ms:5m:count,max")
	hists, _ := query.ParseHistogramSpecs("latency_ms:5m")
	e := newEnv(t, func(c *query.Config) { c.Export, c.ExportHistograms = specs, hists })
	series := func(key string, ls ...window.Label) string {
		b, err := window.AppendSeries(nil, key, ls)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, k := range []string{
		"a",
		series("a", window.Label{Name: "route", Value: "/pay"}),
		series("b", window.Label{Name: "code", Value: "500"}, window.Label{Name: "route", Value: "/x"}),
		series("c", window.Label{Name: "exported_window", Value: "z"}, window.Label{Name: "window", Value: "w1"}),
	} {
		e.seed(event{ts: t0, key: k, metric: "latency_ms", value: 12})
	}
	const rest = `metric="latency_ms",`
	want := []string{
		`{key="a",` + rest + `window="5m"}`,
		`{key="a",` + rest + `route="/pay",window="5m"}`,
		`{code="500",key="b",` + rest + `route="/x",window="5m"}`,
		`{exported_exported_window="w1",exported_window="z",key="c",` + rest + `window="5m"}`,
	}
	code, b, _ := e.do("GET", "/metrics", nil)
	text := string(b)
	if code != 200 {
		t.Fatalf("text scrape: %d\n%s", code, text)
	}
	for _, ls := range want {
		for _, line := range []string{"slide_window_count" + ls + " 1", "slide_window_max" + ls + " 12", "slide_window_values_count" + ls + " 1"} {
			if !strings.Contains(text, "\n"+line+"\n") {
				t.Errorf("text scrape lacks %s:\n%s", line, grepLines(text, "slide_window_"))
			}
		}
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := tp.TextToMetricFamilies(strings.NewReader(text)); err != nil {
		t.Errorf("text scrape does not parse: %v", err)
	}
	if strings.Contains(text, `reason="invalid_utf8"} 1`) || strings.Contains(text, `reason="invalid_metric"} 1`) {
		t.Errorf("labelled series counted as export errors:\n%s", grepLines(text, "export_errors"))
	}
	mf := scrapeProto(t, e.srv.Handler())
	for _, name := range []string{"slide_window", "slide_window_max", "slide_window_values"} {
		ms := mf[name].GetMetric()
		if len(ms) != len(want) {
			t.Errorf("protobuf %s: %d series, want %d", name, len(ms), len(want))
			continue
		}
		var got []string
		for _, m := range ms {
			var b strings.Builder
			b.WriteByte('{')
			for j, l := range m.GetLabel() {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(l.GetName() + "=" + strconv.Quote(l.GetValue()))
			}
			b.WriteByte('}')
			got = append(got, b.String())
		}
		slices.Sort(got) // the registry orders a family's metrics by label values
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Errorf("protobuf %s series:\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	if _, err := e.reg.Gather(); err != nil {
		t.Errorf("gathering the registry: %v", err)
	}
}
