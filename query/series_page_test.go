package query_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestSeriesPagesEqualASortedListing: paging /v1/series on one instance (the page chosen
// while the store is scanned, window.SeriesPage) gives, page after page, exactly the
// sorted listing of the series that metric=, prefix= and match= select, whatever the limit,
// with labelled and unlabelled series of three metrics interleaved.
func TestSeriesPagesEqualASortedListing(t *testing.T) {
	e := newEnv(t, nil)
	rng := rand.New(rand.NewPCG(3, 5))
	type id struct{ metric, key, route string }
	var all []id
	for range 400 {
		m := []string{"latency_ms", "cost", "bytes"}[rng.IntN(3)]
		k := fmt.Sprintf("%s-%d", []string{"tenant", "ops", "t"}[rng.IntN(3)], rng.IntN(40))
		route := []string{"", "/pay", "/login"}[rng.IntN(3)]
		var ls []window.Label
		if route != "" {
			ls = append(ls, window.Label{Name: "route", Value: route})
		}
		series, err := window.AppendSeries(nil, k, ls)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.ObserveAt(e.clock.millis(), window.Event{TS: t0, Metric: m, Key: string(series), Value: 1}); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(all, func(x id) bool { return x == id{m, string(series), route} }) {
			all = append(all, id{m, string(series), route})
		}
	}
	slices.SortFunc(all, func(a, b id) int {
		return window.CompareSeriesIDs(window.SeriesID{Metric: a.metric, Key: a.key}, window.SeriesID{Metric: b.metric, Key: b.key})
	})
	type page struct {
		Series []struct {
			Metric, Key string
			Labels      map[string]string
		} `json:"series"`
		Next string `json:"next"`
	}
	for _, c := range []struct{ metric, prefix, match string }{
		{}, {metric: "cost"}, {prefix: "tenant-1"}, {metric: "latency_ms", prefix: "t"},
		{match: `route="/pay"`}, {metric: "bytes", match: `route!="/pay"`}, {metric: "nosuch"},
	} {
		var want []string
		for _, x := range all {
			key := x.key
			if i := strings.IndexByte(key, window.LabelSep); i >= 0 {
				key = key[:i]
			}
			if (c.metric == "" || x.metric == c.metric) && strings.HasPrefix(x.key, c.prefix) &&
				(c.match == "" || (c.match == `route="/pay"`) == (x.route == "/pay")) {
				want = append(want, x.metric+"/"+key+"/"+x.route)
			}
		}
		for _, limit := range []int{1, 3, 7, 50, 1000} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > len(all)+1 {
					t.Fatalf("%+v limit %d: paging does not end", c, limit)
				}
				q := url.Values{"limit": {fmt.Sprint(limit)}, "cursor": {cursor}, "metric": {c.metric}, "prefix": {c.prefix}, "match": {c.match}}
				var p page
				e.getJSON("/v1/series?"+q.Encode(), 200, &p)
				if len(p.Series) > limit || (p.Next != "" && len(p.Series) != limit) {
					t.Fatalf("%+v limit %d: a page of %d, next %q", c, limit, len(p.Series), p.Next)
				}
				for _, s := range p.Series {
					got = append(got, s.Metric+"/"+s.Key+"/"+s.Labels["route"])
				}
				if p.Next == "" {
					break
				}
				cursor = p.Next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%+v limit %d: paged\n got %v\nwant %v", c, limit, got, want)
			}
		}
	}
}

// BenchmarkSeriesPage is one page of 100 of GET /v1/series on one instance holding 200,000
// series of two metrics, from a cursor halfway through, with and without metric=.
func BenchmarkSeriesPage(b *testing.B) {
	e := newEnv(b, nil)
	for i := range 200_000 {
		m := []string{"latency_ms", "cost"}[i%2]
		if err := e.store.ObserveAt(t0, window.Event{TS: t0, Metric: m, Key: fmt.Sprintf("tenant-%06d", i*7919%200_000), Value: 1}); err != nil {
			b.Fatal(err)
		}
	}
	h := e.srv.Handler()
	for _, metric := range []string{"", "latency_ms"} {
		b.Run("metric="+metric, func(b *testing.B) {
			cursor := base64.RawURLEncoding.EncodeToString([]byte("latency_ms\x00tenant-100000")) // a cursor as the API writes it
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/series?limit=100&metric="+metric+"&cursor="+cursor, nil))
				if w.Code != 200 || !strings.Contains(w.Body.String(), `"next"`) {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}

// A largest page past what a cluster's owners answer (a page and one more) is refused at
// New: every /v1/series of that size came back with the peers' partitions missing, and a
// limit of math.MaxInt made the page and one more negative (every series).
func TestMaxSeriesLimitBounded(t *testing.T) {
	s, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{query.MaxMaxSeriesLimit + 1, math.MaxInt} {
		if _, err := query.New(query.Config{Store: s, MaxSeriesLimit: max}); !errors.Is(err, query.ErrConfig) {
			t.Errorf("MaxSeriesLimit %d: %v, want ErrConfig", max, err)
		}
	}
	if _, err := query.New(query.Config{Store: s, MaxSeriesLimit: query.MaxMaxSeriesLimit}); err != nil {
		t.Errorf("MaxSeriesLimit %d: %v", query.MaxMaxSeriesLimit, err)
	}
}
