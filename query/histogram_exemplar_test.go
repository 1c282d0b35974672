package query_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// promAccept is Prometheus' Accept header when it scrapes native histograms.
const promAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"

// exemplarServer serves --export-histograms latency_ms:1m, with --export-exemplars when
// export, over a store that keeps exemplars (10 s slots) and holds evs, at now; it returns
// the server's URL.
func exemplarServer(t *testing.T, now int64, export bool, evs ...window.Event) string {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{Exemplars: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		ev.Metric = "latency_ms"
		if err := st.ObserveAt(now, ev); err != nil {
			t.Fatal(err)
		}
	}
	specs, _ := query.ParseHistogramSpecs("latency_ms:1m")
	reg := prometheus.NewRegistry()
	srv, err := query.New(query.Config{Store: st, Now: func() time.Time { return time.UnixMilli(now) }, ExportHistograms: specs, ExportExemplars: export, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// scrapeBody GETs url's /metrics with accept and returns the body and its Content-Type.
func scrapeBody(t *testing.T, url, accept string) ([]byte, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return b, resp.Header.Get("Content-Type")
}

// promExemplars reads a protobuf scrape with Prometheus' own parser, calling Exemplar as
// its scrape loop does, and returns the exemplars of each slide_window_values histogram by
// key ("labels value @ms after t0"), every histogram's key present.
func promExemplars(t *testing.T, body []byte) map[string][]string {
	t.Helper()
	p := textparse.NewProtobufParser(body, false, false, false, false, labels.NewSymbolTable())
	got := map[string][]string{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return got
		} else if err != nil {
			t.Fatalf("Prometheus' parser: %v", err)
		}
		if entry != textparse.EntryHistogram {
			continue
		}
		var ls labels.Labels
		p.Labels(&ls)
		if ls.Get(labels.MetricName) != "slide_window_values" {
			continue
		}
		if _, _, h, _ := p.Histogram(); h == nil {
			t.Fatalf("%s: no integer native histogram", ls)
		}
		key := ls.Get("key")
		got[key] = []string{}
		var ex exemplar.Exemplar
		for p.Exemplar(&ex) {
			if !ex.HasTs {
				t.Errorf("%s: exemplar %v without a timestamp", key, ex)
			}
			got[key] = append(got[key], fmt.Sprintf("%s %v @%d", ex.Labels, ex.Value, ex.Ts-t0))
		}
	}
}

// traceID is a trace id that shows b in its hex.
func traceID(b byte) [16]byte { return [16]byte{0: 0xab, 1: b, 15: 0x0f} }

// TestExportedHistogramsCarryTheWindowsExemplars: a protobuf scrape of /metrics, read by
// Prometheus' own protobuf parser as its scrape loop reads it, gives the exported native
// histogram of a series the exemplars the store keeps of its window's slots, oldest first,
// with their trace_id and span_id (lower-case hex; no span_id for a span without one),
// value and time (ms, a fraction of a second kept): the exemplar of a slot older than the
// window is left out, and the series around it, which have no traced events, get none.
// The text formats (classic, OpenMetrics 1.0) carry none, nor a scrape without
// Config.ExportExemplars (--export-exemplars).
func TestExportedHistogramsCarryTheWindowsExemplars(t *testing.T) {
	now := t0 + 125_000 // slot 12: the 1m window reads slots 7 to 12
	evs := []window.Event{
		{TS: t0 + 5_000, Key: "checkout", Value: 900, TraceID: traceID(1), SpanID: [8]byte{0: 1, 7: 0xfe}}, // slot 0: outside
		{TS: t0 + 70_001, Key: "checkout", Value: 10, TraceID: traceID(2), SpanID: [8]byte{0: 2}},
		{TS: t0 + 80_250, Key: "checkout", Value: 120, TraceID: traceID(3), SpanID: [8]byte{0: 3, 7: 0xfe}},
		{TS: t0 + 81_000, Key: "checkout", Value: 300},                     // slower, but no trace
		{TS: t0 + 84_000, Key: "checkout", Value: 60, TraceID: traceID(4)}, // faster than slot 8's
		{TS: t0 + 121_007, Key: "checkout", Value: 45, TraceID: traceID(5)},
		{TS: t0 + 100_000, Key: "cart", Value: 3},
		{TS: t0 + 110_000, Key: "search", Value: 4},
	}
	url := exemplarServer(t, now, true, evs...)
	body, ctype := scrapeBody(t, url, promAccept)
	if !strings.HasPrefix(ctype, "application/vnd.google.protobuf") {
		t.Fatalf("scrape answered %s", ctype)
	}
	got := promExemplars(t, body)
	want := map[string][]string{
		"cart": {},
		"checkout": {
			`{span_id="0200000000000000", trace_id="ab02000000000000000000000000000f"} 10 @70001`,
			`{span_id="03000000000000fe", trace_id="ab03000000000000000000000000000f"} 120 @80250`,
			`{trace_id="ab05000000000000000000000000000f"} 45 @121007`,
		},
		"search": {},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exemplars Prometheus reads:\n got %q\nwant %q", got, want)
	}
	// Without --export-exemplars the same store's histograms carry none.
	off, _ := scrapeBody(t, exemplarServer(t, now, false, evs...), promAccept)
	if got := promExemplars(t, off); fmt.Sprint(got) != fmt.Sprint(map[string][]string{"cart": {}, "checkout": {}, "search": {}}) {
		t.Errorf("without --export-exemplars Prometheus reads %q", got)
	}
	for _, accept := range []string{"text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"} {
		if text, _ := scrapeBody(t, url, accept); strings.Contains(string(text), "trace_id") ||
			!strings.Contains(string(text), `slide_window_values_count{key="checkout",metric="latency_ms",window="1m"} 5`) {
			t.Errorf("%s:\n%s", accept, grepLines(string(text), "slide_window_values"))
		}
	}
}

// TestPrometheusParserReadsTheFirstHistogramsExemplarsOnly pins a limit of Prometheus'
// protobuf parser (v0.316.0, Prometheus 3.16) that docs/sre.md states: within one metric
// family it reads a native histogram's exemplars from where the previous histogram's ended
// (ProtobufParser.exemplarPos is reset only between families), so of two series with
// exemplars the second loses as many of its first ones as the first had. The scrape carries
// them (TestHistogramProtoEqualsCollector); if this test fails, Prometheus reads them all
// now: drop the caveat from docs/sre.md.
func TestPrometheusParserReadsTheFirstHistogramsExemplarsOnly(t *testing.T) {
	now := t0 + 125_000
	url := exemplarServer(t, now, true,
		window.Event{TS: t0 + 80_000, Key: "a", Value: 1, TraceID: traceID(1)},
		window.Event{TS: t0 + 90_000, Key: "a", Value: 2, TraceID: traceID(2)},
		window.Event{TS: t0 + 80_000, Key: "b", Value: 3, TraceID: traceID(3)},
		window.Event{TS: t0 + 90_000, Key: "b", Value: 4, TraceID: traceID(4)},
		window.Event{TS: t0 + 100_000, Key: "b", Value: 5, TraceID: traceID(5)},
	)
	body, _ := scrapeBody(t, url, promAccept)
	got := promExemplars(t, body)
	if len(got["a"]) != 2 || len(got["b"]) != 1 || !strings.HasSuffix(got["b"][0], " 5 @100000") {
		t.Errorf("Prometheus' parser read %q: not the limit docs/sre.md states", got)
	}
}
