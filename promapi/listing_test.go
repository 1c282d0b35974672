package promapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// TestListingsHoldOnlyWhatTheyAnswer: /api/v1/series, labels and label values answer at
// most limit= (or MaxLabelValues) items, so that is all they may hold. They gathered every
// match[] set's whole answer before cutting it: 10 copies of one broad match[] over 200,000
// series took slide serve from 0.45 GB to 1.2 GB for a 600-byte request answering one series.
// Here 60 copies over 20,000 series must not grow the heap by the 1.2M labels they select.
func TestListingsHoldOnlyWhatTheyAnswer(t *testing.T) {
	const keys, sets = 20_000, 60
	now := t0.UnixMilli()
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		s, err := window.AppendSeries(nil, fmt.Sprintf("k%05d", i), []window.Label{{Name: "route", Value: fmt.Sprintf("/r%d", i%7)}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.ObserveAt(now, window.Event{TS: now, Metric: "m", Key: string(s), Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serveDemo(t, &demo{store: st, now: t0}, Config{})
	match := strings.Repeat("&match[]="+url.QueryEscape(`m_count{key=~"k.*"}`), sets)

	defer debug.SetGCPercent(debug.SetGCPercent(10)) // garbage collected soon: the heap is what is held
	for _, c := range []struct{ path, prefix string }{
		{"/api/v1/series?limit=3" + match, `{"status":"success","data":[{"__name__":"m_count","key":"k00000","route":"/r0"},{"__name__":"m_count","key":"k00001","route":"/r1"},{"__name__":"m_count","key":"k00002","route":"/r2"}],"warnings":["results truncated due to limit"]}`},
		{"/api/v1/label/key/values?limit=2" + match, `{"status":"success","data":["k00000","k00001"],"warnings":["results truncated due to limit"]}`},
		{"/api/v1/label/route/values?" + match, `{"status":"success","data":["/r0","/r1","/r2","/r3","/r4","/r5","/r6"]}`},
		{"/api/v1/labels?" + match, `{"status":"success","data":["__name__","key","route"]}`},
	} {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		var peak atomic.Uint64
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
				select {
				case <-done:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		res, err := http.Get(srv.URL + c.path)
		close(done)
		<-sampled
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != 200 || body != c.prefix {
			t.Errorf("%.60s: %d %s, want %s", c.path, res.StatusCode, body, c.prefix)
		}
		if grew := int64(peak.Load()) - int64(base); grew > 32<<20 {
			t.Errorf("%.60s: heap grew by %d MB while answering at most 3 items", c.path, grew>>20)
		}
	}
}

// TestListingsTimeOut: the listings share a query's timeout (Config.Timeout), as the engine's
// queries do: 300 match[] sets over a large store took 14–17 s with none, past the server's
// write deadline, so the client got its connection closed with no answer.
func TestListingsTimeOut(t *testing.T) {
	now := t0.UnixMilli()
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := st.ObserveAt(now, window.Event{TS: now, Metric: "m", Key: fmt.Sprintf("k%05d", i), Value: 1, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	srv := serveDemo(t, &demo{store: st, now: t0}, Config{Timeout: time.Nanosecond}) // past before the scan starts
	for _, path := range []string{"/api/v1/series?match[]=m_count", "/api/v1/labels?match[]=m_count", "/api/v1/label/key/values?match[]=m_count"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"errorType":"timeout"`) {
			t.Errorf("%s with a timeout already past: %d %.200s, want 503 timeout", path, res.StatusCode, body)
		}
	}
}

// TestQueriesWaitForASlot: at most MaxConcurrent queries and listings are evaluated at once
// (Prometheus' --query.max-concurrency): another waits for a slot up to the query timeout,
// then answers errorType "timeout", and goes on as soon as one is free.
func TestQueriesWaitForASlot(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	a, err := New(Config{Store: d.store, Now: func() time.Time { return d.now }, MaxConcurrent: 2, Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	paths := []string{"/api/v1/query?query=sum(latency_ms_count)", "/api/v1/series?match[]=latency_ms_count", "/api/v1/labels"}
	var running []func()
	for range 2 { // two evaluations running
		done, err := a.gate.Start(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, done)
	}
	for _, path := range paths {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `"errorType":"timeout"`) || !strings.Contains(body, "all 2 read slots") || res.Header.Get("Retry-After") != "1" {
			t.Errorf("%s with every slot busy: %d %s (Retry-After %q), want 503 timeout naming the slots, with Retry-After", path, res.StatusCode, body, res.Header.Get("Retry-After"))
		}
	}
	go func() { time.Sleep(50 * time.Millisecond); running[0]() }() // one ends within the wait
	for _, path := range paths {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, res); res.StatusCode != 200 {
			t.Errorf("%s with a slot freed: %d %s", path, res.StatusCode, body)
		}
	}
	// The 1 still running holds its slot: one more starts, a second would wait.
	done, err := a.gate.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	past, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	if _, err := a.gate.Start(past); err == nil {
		t.Error("a third evaluation started beside the 2 held: the answers kept no slot or freed one twice")
	}
	done()
	running[1]()
}

// TestListingsHoldToStartEnd: /api/v1/labels, label values and series list the series with
// samples in [start, end], as Prometheus does. They ignored both, so a Grafana template
// variable over a dashboard of yesterday (label_values(latency_ms_count, key), asked with
// the dashboard's start and end) offered today's keys, whose panels then showed nothing.
// A series' samples span its metric's retention up to now: a range before the retention
// or after now lists nothing, one overlapping it what no bounds list.
func TestListingsHoldToStartEnd(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	srv := serveDemo(t, d, Config{})
	sec := func(t time.Time) string { return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000) }
	for _, path := range []string{"/api/v1/labels?", "/api/v1/label/key/values?", "/api/v1/series?match[]=latency_ms_count&"} {
		all := get(t, srv.URL+path)
		if !strings.Contains(all, `"k0aa"`) && !strings.Contains(all, `"route"`) {
			t.Fatalf("%s without bounds: %s", path, all)
		}
		for _, c := range []struct {
			bounds string
			want   string
		}{
			{"start=" + sec(d.now.Add(-2*time.Hour)) + "&end=" + sec(d.now.Add(-time.Hour)), `{"status":"success","data":[]}`},
			{"end=" + url.QueryEscape(d.now.Add(-6*time.Minute).UTC().Format(time.RFC3339)), `{"status":"success","data":[]}`},
			{"start=" + sec(d.now.Add(time.Hour)), `{"status":"success","data":[]}`},
			{"start=" + sec(d.now.Add(-time.Hour)) + "&end=" + sec(d.now.Add(-4*time.Minute)), all},
			{"start=" + sec(d.now.Add(-time.Minute)) + "&end=" + sec(d.now.Add(time.Hour)), all},
		} {
			if got := get(t, srv.URL+path+c.bounds); got != c.want {
				t.Errorf("%s%s: %s, want %s", path, c.bounds, got, c.want)
			}
		}
	}
}

func get(t *testing.T, u string) string {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b := new(strings.Builder)
	if _, err := io.Copy(b, res.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestOversizeFormSaysItsBound: a POST form over the 1 MiB bound (a metrics browser's
// /api/v1/series with thousands of match[] sets) is refused saying the bound and what to
// do; it said only "error parsing form values: http: request body too large".
func TestOversizeFormSaysItsBound(t *testing.T) {
	d := newDemo(t, "native:5", 1, 1)
	srv := serveDemo(t, d, Config{})
	body := "match[]=" + strings.Repeat("latency_ms_count%7Bkey%3D%22k%22%7D&match[]=", 40_000) + "latency_ms_count"
	res, err := http.Post(srv.URL+"/api/v1/series", "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":"error","errorType":"bad_data","error":"the request body is over 1 MiB, the bound of a form: ask with fewer or shorter parameters (several requests of fewer match[] sets)"}`
	if got := readAll(t, res); res.StatusCode != 400 || got != want {
		t.Errorf("%d %s, want 400 %s", res.StatusCode, got, want)
	}
}
