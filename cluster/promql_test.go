package cluster

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/window"
)

// promNow is the PromQL test's clock: 4.5 s into a 10 s slot, so the current slot is in
// progress and the live sample shows.
const promNow = int64(1_800_000_004_500)

// promCluster is three instances (A: partitions 0 and 1, B: 2 and 3, C: 4 and 5), each
// with its peer route and its Prometheus API on one HTTP server, and the API of one store
// holding every event, the oracle.
type promCluster struct {
	apis   []*promapi.API
	srvs   []*httptest.Server
	stores []*window.Store
	cls    []*Cluster
	hang   [3]atomic.Bool // the instance's server holds every request until the asker leaves
	oracle *promapi.API
}

// newPromCluster (peers signing with a key derived from token, when set) fills the stores with 5 minutes of "lat" (integer values, so sums are exact
// in any order) over 30 keys, each series labelled code=200|500, its events spread over
// every partition round robin, so most series live on all three instances and merge slot
// by slot, while key k-0 is on partition 4 alone; and "only_c", a metric only C holds.
func newPromCluster(t *testing.T, token string) *promCluster {
	t.Helper()
	clock := func() int64 { return promNow }
	newSt := func() *window.Store {
		s, err := window.NewStore(window.StoreConfig{Now: clock, Exemplars: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pc := &promCluster{}
	all := newSt()
	for range 3 {
		pc.stores = append(pc.stores, newSt())
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var spans uint32 // each event a span of its own trace, for the exemplars
	add := func(metric, key, code string, part int32, ts int64, v float64) {
		s, err := window.AppendSeries(nil, key, []window.Label{{Name: "code", Value: code}})
		if err != nil {
			t.Fatal(err)
		}
		at := min(window.FloorDiv(ts, 10_000)*10_000+9_999, promNow) // as they arrive: slots pack
		spans++
		ev := window.Event{TS: ts, Metric: metric, Key: string(s), Value: v, Feed: window.FeedOf(part),
			TraceID: [16]byte{0: byte(spans >> 8), 1: byte(spans), 15: 1}, SpanID: [8]byte{0: byte(spans)}}
		for _, st := range []*window.Store{pc.stores[part/2], all} {
			if err := st.ObserveAt(at, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	cur := window.FloorDiv(promNow, 10_000)
	for i := cur - 29; i <= cur; i++ {
		for n := range 200 {
			ts := min(i*10_000+rng.Int64N(10_000), promNow)
			k := rng.IntN(30)
			part := int32(n % 6)
			if k == 0 {
				part = 4
			}
			add("lat", "k-"+strconv.Itoa(k), []string{"200", "500"}[rng.IntN(2)], part, ts, float64(1+rng.IntN(2000)))
		}
		add("only_c", "c", "200", 5, i*10_000, 7)
	}
	// "idle", on B's partition 2 alone: events from before the retention to slot cur−15,
	// its ring not moved since, so it still holds slots the retention at now has evicted.
	for i := cur - 40; i <= cur-15; i++ {
		add("idle", "i", "200", 2, i*10_000+1, 1)
	}
	addrs := make([]string, 3)
	handlers := make([]http.Handler, 3)
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if pc.hang[i].Load() {
				<-r.Context().Done()
				return
			}
			handlers[i].ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		pc.srvs = append(pc.srvs, srv)
		addrs[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	owner := map[int32]string{}
	for p := range int32(6) {
		owner[p] = addrs[p/2]
	}
	now := func() time.Time { return time.UnixMilli(promNow) }
	for i := range 3 {
		parts := []int32{int32(2 * i), int32(2*i + 1)}
		c, err := New(Config{Store: pc.stores[i], Brokers: []string{"127.0.0.1:1"}, Advertise: addrs[i], Now: clock,
			Timeout: 5 * time.Second, Token: token, Local: func() []int32 { return parts }})
		if err != nil {
			t.Fatal(err)
		}
		c.view.Store(&View{Partitions: 6, Members: 3, Owner: owner})
		api, err := promapi.New(promapi.Config{Store: pc.stores[i], Cluster: c, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(PeerPath, c.PeerHandler())
		mux.Handle("/api/v1/", api.Handler())
		handlers[i] = mux
		pc.apis = append(pc.apis, api)
		pc.cls = append(pc.cls, c)
	}
	var err error
	if pc.oracle, err = promapi.New(promapi.Config{Store: all, Now: now}); err != nil {
		t.Fatal(err)
	}
	return pc
}

// get answers path?q through h: the status and the body.
func promGet(t *testing.T, h http.Handler, path string, q url.Values) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, path+"?"+q.Encode(), nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// promQueries are the reads every instance must answer as the oracle does.
func promQueries() []struct {
	path string
	q    url.Values
} {
	at := strconv.FormatFloat(float64(promNow)/1000, 'f', 3, 64)
	start := strconv.FormatFloat(float64(promNow-240_000)/1000, 'f', 3, 64)
	return []struct {
		path string
		q    url.Values
	}{
		{"/api/v1/query", url.Values{"query": {"histogram_quantile(0.95, sum by (key) (rate(lat[5m])))"}, "time": {at}}},
		{"/api/v1/query", url.Values{"query": {`histogram_quantile(0.5, sum by (code) (rate(lat{key=~"k-[0-4]"}[1m])))`}, "time": {at}}},
		{"/api/v1/query", url.Values{"query": {"sum by (key, code) (increase(lat_count[5m]))"}, "time": {at}}},
		{"/api/v1/query", url.Values{"query": {"max by (key) (max_over_time(lat_max[2m])) + on() group_left sum(only_c_count)"}, "time": {at}}},
		{"/api/v1/query", url.Values{"query": {`increase(lat_sum{key="k-0",code="200"}[3m])`}, "time": {strconv.FormatFloat(float64(promNow-60_000)/1000, 'f', 3, 64)}}},
		{"/api/v1/query_range", url.Values{"query": {"sum by (code) (rate(lat_count[1m]))"}, "start": {start}, "end": {at}, "step": {"10"}}},
		{"/api/v1/query_range", url.Values{"query": {"histogram_quantile(0.99, sum by (key) (rate(lat[1m])))"}, "start": {start}, "end": {at}, "step": {"30"}}},
		{"/api/v1/label/key/values", url.Values{"match[]": {"lat_count"}}},
		{"/api/v1/label/__name__/values", nil},
		{"/api/v1/labels", nil},
		{"/api/v1/series", url.Values{"match[]": {`lat_max{code="500",key=~"k-0|k-1.*"}`}}},
		{"/api/v1/metadata", nil},
		// Each slot's slowest span of a series spread over the three instances: the
		// slowest of the three instances' (window.Exemplar.Before), as the oracle keeps it.
		{"/api/v1/query_exemplars", url.Values{"query": {`histogram_quantile(0.9, rate(lat{key=~"k-[0-3]"}[1m])) or lat_max{code="500"}`}, "start": {start}, "end": {at}}},
	}
}

// TestPromQLThroughTheCluster: PromQL (quantiles per key and per label, increases, ranges,
// label values, series, metadata) through any of three instances, each holding a third of
// the partitions, answers byte for byte what one instance holding every event answers: the
// peers' slots merge with the local ones, slot by slot where one series lives on several
// instances.
func TestPromQLThroughTheCluster(t *testing.T) {
	pc := newPromCluster(t, "")
	alone, err := promapi.New(promapi.Config{Store: pc.stores[0], Now: func() time.Time { return time.UnixMilli(promNow) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range promQueries() {
		code, want := promGet(t, pc.oracle.Handler(), c.path, c.q)
		if code != http.StatusOK || strings.Contains(want, `"result":[]`) || strings.Contains(want, `"data":[]`) {
			t.Fatalf("oracle %s %v: %d %s", c.path, c.q, code, want)
		}
		if _, local := promGet(t, alone.Handler(), c.path, c.q); local == want && c.path != "/api/v1/labels" {
			t.Errorf("%s %v: A's store alone answers what every partition does: the test shows nothing", c.path, c.q)
		}
		for i, api := range pc.apis {
			code, got := promGet(t, api.Handler(), c.path, c.q)
			if code != http.StatusOK || got != want {
				t.Errorf("instance %d %s %v: %d\n got %.600s\nwant %.600s", i, c.path, c.q, code, got, want)
			}
		}
	}
}

// TestPromQLOwnerDown: with C's server gone, a query through A answers 503 unavailable
// naming C's partitions, and with partial=allow the answer over A's and B's partitions with
// a warning naming them, which equals the oracle's answer without C's events.
func TestPromQLOwnerDown(t *testing.T) {
	pc := newPromCluster(t, "")
	pc.srvs[2].Close()
	q := url.Values{"query": {"sum(increase(lat_count[5m]))"}, "time": {strconv.FormatFloat(float64(promNow)/1000, 'f', 3, 64)}}
	for _, path := range []string{"/api/v1/query", "/api/v1/label/key/values", "/api/v1/metadata", "/api/v1/query_exemplars"} {
		code, body := promGet(t, pc.apis[0].Handler(), path, q)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"errorType":"unavailable"`) || !strings.Contains(body, "partitions 4,5") {
			t.Errorf("%s with C down: %d %s", path, code, body)
		}
	}
	// The exemplars of k-0, which lives on C's partition 4 alone: none, and never silently.
	ex := url.Values{"query": {`lat{key="k-0"}`}}
	if code, body := promGet(t, pc.apis[0].Handler(), "/api/v1/query_exemplars", ex); code != http.StatusServiceUnavailable || !strings.Contains(body, "partitions 4,5") {
		t.Errorf("exemplars of k-0 (partition 4) with C down: %d %s", code, body)
	}
	ex.Set("partial", "allow")
	if code, body := promGet(t, pc.apis[0].Handler(), "/api/v1/query_exemplars", ex); code != http.StatusOK || !strings.Contains(body, `"data":[]`) || !strings.Contains(body, "partitions 4,5 were not read") {
		t.Errorf("exemplars of k-0 with C down, partial=allow: %d %s", code, body)
	}
	q.Set("partial", "allow")
	code, body := promGet(t, pc.apis[0].Handler(), "/api/v1/query", q)
	if code != http.StatusOK || !strings.Contains(body, `"warnings":["partial answer: partitions 4,5 were not read`) {
		t.Fatalf("partial=allow with C down: %d %s", code, body)
	}
	// What A and B hold: the oracle's count less C's share.
	var want float64
	for _, st := range pc.stores[:2] {
		a, err := st.ReadSelected(promNow, "lat", nil, 5*time.Minute, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want += float64(a.Count)
	}
	if !strings.Contains(body, `"`+strconv.FormatFloat(want, 'f', -1, 64)+`"`) {
		t.Errorf("partial answer %s, want A's and B's count %v", body, want)
	}
	// A hung owner: the read gives up at the peer timeout and names its partitions.
	pc2 := newPromCluster(t, "")
	pc2.hang[1].Store(true)
	pc2.cls[0].cfg.Timeout = 300 * time.Millisecond // --peer-timeout
	start := time.Now()
	code, body = promGet(t, pc2.apis[0].Handler(), "/api/v1/query", q)
	if code != http.StatusOK || !strings.Contains(body, "partitions 2,3 were not read") {
		t.Errorf("B hung, partial=allow: %d %s", code, body)
	}
	if d := time.Since(start); d > 3*time.Second { // slack for a loaded machine
		t.Errorf("took %v past a 300 ms peer timeout", d)
	}
}

// TestPromQLSignedPeers: with a group key the slot read is signed both ways like every peer
// read: instances sharing the token answer as one store, and an instance with another
// token is refused by its peers, so its query answers 503 naming their partitions.
func TestPromQLSignedPeers(t *testing.T) {
	pc := newPromCluster(t, "token-one")
	q := promQueries()[0]
	_, want := promGet(t, pc.oracle.Handler(), q.path, q.q)
	if code, got := promGet(t, pc.apis[1].Handler(), q.path, q.q); code != http.StatusOK || got != want {
		t.Errorf("signed: %d %.300s, want %.300s", code, got, want)
	}
	other, err := New(Config{Store: pc.stores[0], Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1", Now: func() int64 { return promNow },
		Timeout: 5 * time.Second, Token: "token-two", Local: func() []int32 { return []int32{0, 1} }})
	if err != nil {
		t.Fatal(err)
	}
	other.view.Store(pc.cls[0].view.Load())
	api, err := promapi.New(promapi.Config{Store: pc.stores[0], Cluster: other, Now: func() time.Time { return time.UnixMilli(promNow) }})
	if err != nil {
		t.Fatal(err)
	}
	if code, got := promGet(t, api.Handler(), q.path, q.q); code != http.StatusServiceUnavailable || !strings.Contains(got, "partitions 2,3,4,5") {
		t.Errorf("another key: %d %.300s", code, got)
	}
}

// TestPromQLPastInstantOfIdleSeries: a past instant reads a series as its ring stands at
// now, through the cluster and on one store alike: an idle series' ring, which no event
// moved since its last slot, still holds slots older than the retention, and an instant
// query counted them where the range query's step at the same instant did not.
func TestPromQLPastInstantOfIdleSeries(t *testing.T) {
	pc := newPromCluster(t, "")
	at := promNow - 60_000
	q := url.Values{"query": {"idle_count"}, "time": {strconv.FormatFloat(float64(at)/1000, 'f', 3, 64)}}
	// The retention at now holds slots cur−29 … cur−15 of it: 15 events.
	want := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"idle_count","code":"200","key":"i"},"value":[1799999944.500,"15"]}]}}`
	for i, h := range []http.Handler{pc.oracle.Handler(), pc.apis[0].Handler(), pc.apis[1].Handler()} {
		if code, got := promGet(t, h, "/api/v1/query", q); code != http.StatusOK || got != want {
			t.Errorf("API %d (0 one store, 1 through a peer, 2 the owner): %d %s, want %s", i, code, got, want)
		}
	}
}
