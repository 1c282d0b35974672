package query_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// fakeCluster is a peer holding remote, merged the way the cluster package merges: the
// server's own store plus the peer's partials. missing is what it could not cover.
type fakeCluster struct {
	local   *window.Store
	remote  *window.Store
	isLocal bool
	missing []int32
	calls   atomic.Int64
	unavail atomic.Int64
	mu      sync.Mutex
	asked   []keysAsk // each Keys call's page, under mu
}

// keysAsk is the page one Keys call asked for.
type keysAsk struct {
	after *window.SeriesID
	limit int
}

func (f *fakeCluster) Local() bool { return f.isLocal }

// match selects the series of key as the cluster package does: by their key label.
func (f *fakeCluster) match(key string) window.SeriesMatch {
	sel, err := window.CompileSelector(key, nil)
	if err != nil {
		panic(err)
	}
	return func(k string, _ int32) bool { return sel.Match(k) }
}

func (f *fakeCluster) Merge(_ context.Context, now int64, metric, key string, win time.Duration, bins bool, p *window.Partial) ([]int32, error) {
	f.calls.Add(1)
	p.NoBins = !bins
	for _, s := range []*window.Store{f.local, f.remote} {
		var q window.Partial
		q.NoBins = !bins
		if err := s.MergePartial(now, metric, f.match(key), win, &q); err != nil {
			return nil, err
		}
		p.Merge(&q)
	}
	return f.missing, nil
}

func (f *fakeCluster) MergeGroups(_ context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, _ bool, g *window.GroupPartials) ([]int32, error) {
	f.calls.Add(1)
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return nil, err
	}
	for _, s := range []*window.Store{f.local, f.remote} {
		if err := s.MergeGroupPartials(now, metric, func(k string, _ int32) bool { return sel.Match(k) }, win, g); err != nil {
			return nil, err
		}
	}
	return f.missing, nil
}

func (f *fakeCluster) Each(_ context.Context, now int64, metric, pattern string, win time.Duration, bins bool, fn func(string, *window.Partial)) ([]int32, error) {
	f.calls.Add(1)
	byKey := map[string]*window.Partial{}
	for _, s := range []*window.Store{f.local, f.remote} {
		err := s.EachPartial(now, metric, f.match(pattern), win, bins, func(k string, _ int32, p *window.Partial) {
			q := byKey[k]
			if q == nil {
				q = &window.Partial{NoBins: !bins}
				byKey[k] = q
			}
			q.Merge(p)
		})
		if err != nil {
			return nil, err
		}
	}
	for k, p := range byKey {
		fn(k, p)
	}
	return f.missing, nil
}

func (f *fakeCluster) Keys(_ context.Context, metric, prefix string, ms []window.Matcher, after *window.SeriesID, limit int) ([]window.SeriesID, []int32, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.asked = append(f.asked, keysAsk{after, limit})
	f.mu.Unlock()
	sel, err := window.CompileSelector("", ms)
	if err != nil {
		return nil, nil, err
	}
	seen := map[window.SeriesID]bool{}
	for _, s := range []*window.Store{f.local, f.remote} {
		s.EachSeries(func(m, k string, _ int32) {
			if (metric == "" || m == metric) && strings.HasPrefix(k, prefix) && sel.Match(k) {
				seen[window.SeriesID{Metric: m, Key: k}] = true
			}
		})
	}
	var ids []window.SeriesID
	for id := range seen {
		if after == nil || id.Metric > after.Metric || id.Metric == after.Metric && id.Key > after.Key {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b window.SeriesID) int {
		return strings.Compare(a.Metric+"\x00"+a.Key, b.Metric+"\x00"+b.Key)
	})
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, f.missing, nil
}

func (f *fakeCluster) Unavailable(string) { f.unavail.Add(1) }

// VisitSlotsKey hands the server's own series, then the peer's: a series lives on one of
// them, as it lives in one partition.
func (f *fakeCluster) VisitSlotsKey(_ context.Context, _, at int64, metric, key string, ms []window.Matcher, fn func(string, int64, []window.SlotView) bool) ([]int32, error) {
	f.calls.Add(1)
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return nil, err
	}
	for _, s := range []*window.Store{f.local, f.remote} {
		s.VisitSlots(at, metric, sel, nil, fn)
	}
	return f.missing, nil
}

// clusterEnv is a server whose store holds the even keys, a peer with the odd ones, and a
// reference server whose store holds them all.
func clusterEnv(t *testing.T) (*env, *env, *fakeCluster) {
	t.Helper()
	ref := newEnv(t, nil)
	remote := newEnv(t, nil).store
	f := &fakeCluster{remote: remote}
	e := newEnv(t, func(c *query.Config) { c.Cluster = f })
	f.local = e.store
	for i := range 400 {
		key := "tenant-" + strconv.Itoa(i%20)
		ev := window.Event{TS: t0 - int64(i)*500, Metric: "latency_ms", Key: key, Value: float64(1 + i%97), Feed: window.FeedOf(int32(i % 20 % 4))}
		dst := e.store
		if i%2 == 1 {
			dst = remote
		}
		for _, s := range []*window.Store{dst, ref.store} {
			if err := s.ObserveAt(t0, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e, ref, f
}

// Through the cluster, every read route answers what one instance holding every series
// answers, byte for byte.
func TestClusterReadsEqualOneInstance(t *testing.T) {
	e, ref, f := clusterEnv(t)
	for _, path := range []string{
		"/v1/window?metric=latency_ms&key=tenant-3&window=5m",
		"/v1/window?metric=latency_ms&key=tenant-*&window=1m&q=0.5,0.9",
		"/v1/window?metric=latency_ms&key=tenant-1*&window=5m",
		"/v1/top?metric=latency_ms&by=p95&k=5&window=5m&q=0.99",
		"/v1/top?metric=latency_ms&by=count&k=3&key=tenant-1*",
		"/v1/series?metric=latency_ms&limit=7",
		"/v1/series?limit=3&cursor=bGF0ZW5jeV9tcwB0ZW5hbnQtMTE",
		"/v1/metrics",
	} {
		code, got, _ := e.do("GET", path, nil)
		wantCode, want, _ := ref.do("GET", path, nil)
		if code != wantCode || string(got) != string(want) {
			t.Errorf("GET %s:\n cluster %d %s\n one     %d %s", path, code, got, wantCode, want)
		}
	}
	if f.calls.Load() == 0 {
		t.Fatal("the cluster was never asked")
	}
	code, _, _ := e.do("GET", "/v1/window?metric=latency_ms&key=nobody", nil)
	if code != 404 {
		t.Errorf("unknown key: %d, want 404", code)
	}
	// Holding every partition, the server reads its own store: no call, no hop.
	f.isLocal = true
	before := f.calls.Load()
	e.do("GET", "/v1/window?metric=latency_ms&key=tenant-*&window=5m", nil)
	if f.calls.Load() != before {
		t.Error("a local cluster was still asked")
	}
}

// /v1/series asks the cluster for a page and one more after the cursor, never for every
// series (each instance then answers a page, not all it holds); /v1/metrics counts them all.
func TestClusterSeriesAsksForAPage(t *testing.T) {
	e, _, f := clusterEnv(t)
	for _, tc := range []struct {
		path string
		want keysAsk
	}{
		{"/v1/series?metric=latency_ms&limit=7", keysAsk{nil, 8}},
		{"/v1/series?limit=3&cursor=bGF0ZW5jeV9tcwB0ZW5hbnQtMTE", keysAsk{&window.SeriesID{Metric: "latency_ms", Key: "tenant-11"}, 4}},
		{"/v1/metrics", keysAsk{nil, 0}},
	} {
		f.mu.Lock()
		f.asked = nil
		f.mu.Unlock()
		if code, body, _ := e.do("GET", tc.path, nil); code != 200 {
			t.Fatalf("GET %s: %d %s", tc.path, code, body)
		}
		f.mu.Lock()
		asked := f.asked
		f.mu.Unlock()
		if len(asked) != 1 || !reflect.DeepEqual(asked[0], tc.want) {
			t.Errorf("GET %s asked Keys for %+v, want one call for %+v", tc.path, asked, tc.want)
		}
	}
}

// Missing partitions are a 503 unavailable naming them, or with partial=allow a 200
// flagged partial: never a silently smaller answer.
func TestClusterMissingPartitions(t *testing.T) {
	e, _, f := clusterEnv(t)
	f.missing = []int32{3, 5}
	for _, path := range []string{
		"/v1/window?metric=latency_ms&key=tenant-*&window=5m",
		"/v1/top?metric=latency_ms",
		"/v1/series?metric=latency_ms",
		"/v1/metrics",
	} {
		code, b, h := e.do("GET", path, nil)
		var body struct {
			Error struct {
				Code    string
				Message string
				Missing []int32 `json:"missing_partitions"`
			}
		}
		if err := json.Unmarshal(b, &body); err != nil || code != 503 || body.Error.Code != string(httperr.Unavailable) ||
			!reflect.DeepEqual(body.Error.Missing, f.missing) || h.Get("Retry-After") != "1" || body.Error.Message == "" {
			t.Errorf("GET %s: %d %s, want 503 unavailable with missing_partitions [3,5]", path, code, b)
		}
		var flagged struct {
			Partial bool
			Missing []int32 `json:"missing_partitions"`
		}
		sep := "&"
		if !strings.Contains(path, "?") {
			sep = "?" // /v1/metrics takes partial= alone: the dashboard lists what is reachable
		}
		e.getJSON(path+sep+"partial=allow", 200, &flagged)
		if !flagged.Partial || !reflect.DeepEqual(flagged.Missing, f.missing) {
			t.Errorf("GET %s&partial=allow: %+v, want partial with [3 5]", path, flagged)
		}
	}
	if f.unavail.Load() == 0 {
		t.Error("unavailable reads were not counted")
	}
	if code, b, _ := e.do("GET", "/v1/window?metric=latency_ms&key=x&partial=maybe", nil); code != 400 || !strings.Contains(string(b), `"param":"partial"`) {
		t.Errorf("partial=maybe: %d %s, want 400 naming partial", code, b)
	}
}

// History fans out: /v1/range through the cluster answers what one instance holding every
// series answers, byte for byte; partitions no instance served are a 503 naming them, or
// with partial=allow the answer flagged partial.
func TestClusterRangeEqualsOneInstance(t *testing.T) {
	e, ref, f := clusterEnv(t)
	for _, path := range []string{
		"/v1/range?metric=latency_ms&key=tenant-*&window=1m&step=10s",
		"/v1/range?metric=latency_ms&key=tenant-3&q=0.5,0.99",
		"/v1/range?metric=latency_ms&key=tenant-1*&window=5m&step=1m",
		"/v1/range?metric=latency_ms&key=nobody",
	} {
		before := f.calls.Load()
		code, got, _ := e.do("GET", path, nil)
		wantCode, want, _ := ref.do("GET", path, nil)
		if code != wantCode || string(got) != string(want) {
			t.Errorf("GET %s:\n cluster %d %s\n one     %d %s", path, code, got, wantCode, want)
		}
		if f.calls.Load() == before {
			t.Errorf("GET %s: the cluster was not asked", path)
		}
	}
	f.missing = []int32{1, 3}
	path := "/v1/range?metric=latency_ms&key=tenant-*&window=1m&step=10s"
	code, b, _ := e.do("GET", path, nil)
	var body struct {
		Error struct {
			Code    string
			Message string
			Missing []int32 `json:"missing_partitions"`
		}
	}
	if err := json.Unmarshal(b, &body); err != nil || code != 503 || body.Error.Code != string(httperr.Unavailable) ||
		!reflect.DeepEqual(body.Error.Missing, f.missing) || !strings.Contains(body.Error.Message, "no reachable, restored owner") {
		t.Fatalf("GET %s: %d %s, want 503 unavailable naming partitions [1 3]", path, code, b)
	}
	var flagged struct {
		Partial bool
		Missing []int32 `json:"missing_partitions"`
		Points  []struct{ Count uint64 }
	}
	e.getJSON(path+"&partial=allow", 200, &flagged)
	if !flagged.Partial || !reflect.DeepEqual(flagged.Missing, f.missing) || len(flagged.Points) == 0 {
		t.Fatalf("GET %s&partial=allow: %+v, want the points flagged partial with [1 3]", path, flagged)
	}
	// Holding every partition, the server reads its own store: no call, and a whole answer.
	f.isLocal, f.missing = true, nil
	before := f.calls.Load()
	var whole map[string]any
	e.getJSON(path, 200, &whole)
	if _, ok := whole["partial"]; ok || f.calls.Load() != before {
		t.Errorf("local range flagged partial or asked the cluster: %v", whole)
	}
}

// Labelled series, each held by one of two instances: match= and by= reads through the
// cluster (each selected series' partial from its owner, merged here) answer what one
// instance holding every series answers, byte for byte, and key= selects by the key label.
func TestClusterLabelledReadsEqualOneInstance(t *testing.T) {
	e, ref, f := clusterEnv(t)
	routes, codes := []string{"/pay", "/login", ""}, []string{"200", "503", ""}
	for i := range 900 {
		var ls []window.Label
		if c := codes[i/3%3]; c != "" {
			ls = append(ls, window.Label{Name: "code", Value: c})
		}
		if r := routes[i%3]; r != "" {
			ls = append(ls, window.Label{Name: "route", Value: r})
		}
		series, err := window.AppendSeries(nil, "tenant-"+strconv.Itoa(i/9%6), ls)
		if err != nil {
			t.Fatal(err)
		}
		dst := e.store
		if len(series)%2 == 1 { // a series lives on one instance, as it lives in one partition
			dst = f.remote
		}
		ev := window.Event{TS: t0 - int64(i)*300, Metric: "requests", Key: string(series), Value: float64(1 + i*37%500)}
		for _, s := range []*window.Store{dst, ref.store} {
			if err := s.ObserveAt(t0, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, path := range []string{
		"/v1/window?metric=requests&key=tenant-3&window=5m&q=0.5",
		"/v1/window?metric=requests&key=tenant-*&window=5m&q=0.9",
		"/v1/window?metric=requests&match=code%3D~%225..%22&window=5m&q=0.5,0.99",
		"/v1/window?metric=requests&key=tenant-1&match=route!%3D%22%2Fpay%22&window=1m",
		"/v1/window?metric=requests&by=code&window=5m&q=0.5,0.99",
		"/v1/window?metric=requests&key=tenant-*&by=route,code&window=5m&q=0.9",
		"/v1/window?metric=requests&match=code%3D%22%22&by=key&window=5m",
		"/v1/window?metric=requests&match=code%3D%22404%22",
		"/v1/top?metric=requests&by=max&k=5&match=route%3D%22%2Fpay%22&q=0.5",
		"/v1/top?metric=requests&by=count&key=tenant-2",
		"/v1/series?metric=requests&limit=7&match=code%3D%22503%22",
		"/v1/range?metric=requests&key=tenant-3&window=1m&step=30s&q=0.5",
		"/v1/range?metric=requests&match=code%3D~%225..%22&window=1m&step=10s&q=0.5,0.99",
		"/v1/range?metric=requests&key=tenant-*&by=route,code&window=30s&step=30s&q=0.9",
		"/v1/range?metric=requests&by=service",
	} {
		code, got, _ := e.do("GET", path, nil)
		wantCode, want, _ := ref.do("GET", path, nil)
		if code != wantCode || string(got) != string(want) {
			t.Errorf("GET %s:\n cluster %d %s\n one     %d %s", path, code, got, wantCode, want)
		}
	}
}
