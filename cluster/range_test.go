package cluster

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// rangeRings are the rings of the range test: "lat" in the default 10 s × 30 slots, "cost"
// a tiered ring of 5 minutes of minute slots and 4 hours.
var rangeRings = map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 5, Tiers: []window.Tier{{Slot: time.Hour, Slots: 4}}}}

// rangeCluster is two instances as serve wires them (a store, a Cluster, the query API and
// the peer route on one HTTP server): A serves partitions 0 and 1, B 2 and 3. oracle is the
// query API of one store holding every event, and aStore is A's store.
type rangeCluster struct {
	bases  [2]string
	oracle string
	aStore *window.Store
}

// newRangeCluster fills the stores with 5 minutes of "lat" (integer values: sums are exact
// in any order) over 12 keys, each series labelled code=200|500, its events round robin
// over every partition, so most series live on both instances and merge slot by slot, and
// 4 hours of "cost" for org-1 and org-2. Both clocks stand at promNow.
func newRangeCluster(t *testing.T) *rangeCluster {
	t.Helper()
	clock := func() int64 { return promNow }
	now := func() time.Time { return time.UnixMilli(promNow) }
	newSt := func() *window.Store {
		s, err := window.NewStore(window.StoreConfig{Now: clock, Metrics: rangeRings})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	all, stores := newSt(), [2]*window.Store{newSt(), newSt()}
	add := func(metric string, series []byte, part int32, ts, at int64, v float64) {
		ev := window.Event{TS: ts, Metric: metric, Key: string(series), Value: v, Feed: window.FeedOf(part)}
		for _, st := range []*window.Store{stores[part/2], all} {
			if err := st.ObserveAt(at, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	cur := window.FloorDiv(promNow, 10_000)
	for i := cur - 29; i <= cur; i++ {
		at := min(i*10_000+9_999, promNow) // as they arrive: past slots pack
		for n := range 60 {
			s, err := window.AppendSeries(nil, "k-"+strconv.Itoa(rng.IntN(12)), []window.Label{{Name: "code", Value: []string{"200", "500"}[rng.IntN(2)]}})
			if err != nil {
				t.Fatal(err)
			}
			add("lat", s, int32(n%4), min(i*10_000+rng.Int64N(10_000), promNow), at, float64(1+rng.IntN(2000)))
		}
	}
	for ts := promNow - 4*3_600_000 + 60_000; ts <= promNow; ts += 50_000 {
		add("cost", []byte("org-"+strconv.Itoa(1+int(ts/50_000%2))), int32(ts/50_000%4), ts, ts, float64(1+ts/50_000%9))
	}
	rc := &rangeCluster{aStore: stores[0]}
	var handlers [2]http.Handler
	var addrs [2]string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlers[i].ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		rc.bases[i], addrs[i] = srv.URL, strings.TrimPrefix(srv.URL, "http://")
	}
	view := &View{Partitions: 4, Members: 2, Owner: map[int32]string{0: addrs[0], 1: addrs[0], 2: addrs[1], 3: addrs[1]}}
	for i := range 2 {
		parts := []int32{int32(2 * i), int32(2*i + 1)}
		c, err := New(Config{Store: stores[i], Brokers: []string{"127.0.0.1:1"}, Advertise: addrs[i], Now: clock,
			Timeout: 5 * time.Second, Local: func() []int32 { return parts }})
		if err != nil {
			t.Fatal(err)
		}
		c.view.Store(view)
		qs, err := query.New(query.Config{Store: stores[i], Cluster: c, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(PeerPath, c.PeerHandler())
		mux.Handle("/", qs.Handler())
		handlers[i] = mux
	}
	oracle, err := query.New(query.Config{Store: all, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(oracle.Handler())
	t.Cleanup(srv.Close)
	rc.oracle = srv.URL
	return rc
}

func rangeGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestRangeThroughTheCluster: /v1/range through either of two instances, each holding half
// the partitions, answers byte for byte what one instance holding every event answers (so
// count, sum, min and max exactly, and the quantiles exactly too: they are read from the
// same merged bins), for one key, a glob, match= and by=, every shape of window and step.
func TestRangeThroughTheCluster(t *testing.T) {
	rc := newRangeCluster(t)
	for _, path := range []string{
		"/v1/range?metric=lat&key=k-3&q=0.5,0.99",
		"/v1/range?metric=lat&key=k-1*&window=1m&step=20s&q=0.9",
		"/v1/range?metric=lat&key=k-*&window=5m&step=1m",
		"/v1/range?metric=lat&match=code%3D%22500%22&window=30s&step=10s&q=0.5",
		"/v1/range?metric=lat&key=k-1&match=code!%3D%22200%22&window=1m&step=1m&q=0.99",
		"/v1/range?metric=lat&by=code&window=1m&step=30s&q=0.5,0.95",
		"/v1/range?metric=lat&key=k-*&by=key,code&window=20s&step=20s&q=0.99",
		"/v1/range?metric=cost&key=org-*&window=1m&step=1m&q=0.5",
		"/v1/range?metric=lat&key=nobody",
	} {
		wantCode, want := rangeGet(t, rc.oracle+path)
		if wantCode != http.StatusOK && !strings.Contains(path, "nobody") {
			t.Fatalf("oracle %s: %d %s", path, wantCode, want)
		}
		for i, base := range rc.bases {
			if code, got := rangeGet(t, base+path); code != wantCode || got != want {
				t.Errorf("instance %d %s: %d\n got %.600s\nwant %.600s", i, path, code, got, want)
			}
		}
	}
	// A's store alone holds part of every point: the answers above are the peers' too.
	alone, err := rc.aStore.ReadRangeSelected(promNow, "lat", nil, time.Minute, time.Minute, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var whole struct{ Points []struct{ Count uint64 } }
	if _, b := rangeGet(t, rc.oracle+"/v1/range?metric=lat&key=k-*&window=1m&step=1m"); json.Unmarshal([]byte(b), &whole) != nil || len(whole.Points) != len(alone) || whole.Points[0].Count <= alone[0].Count {
		t.Fatalf("A alone %+v, every partition %s: the test shows nothing", alone, b)
	}
}

// TestRangeThroughTheClusterPastTheSlots: the tiers do not travel, so on an instance holding
// some partitions a span past the retention answers the retention's points, the oracle's,
// with a warning saying so, and a window past it is refused, naming the retention.
func TestRangeThroughTheClusterPastTheSlots(t *testing.T) {
	rc := newRangeCluster(t)
	_, want := rangeGet(t, rc.oracle+"/v1/range?metric=cost&key=org-*&window=1m&step=1m&span=5m&q=0.5")
	code, got := rangeGet(t, rc.bases[1]+"/v1/range?metric=cost&key=org-*&window=1m&step=1m&span=3h&q=0.5")
	var a, b map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		t.Fatalf("span=3h: %d %s", code, got)
	}
	warnings, _ := a["warnings"].([]any)
	delete(a, "warnings")
	if len(warnings) != 1 || !strings.Contains(warnings[0].(string), "span 3h reaches past the retention 5m into the tiers, which are not read across instances") ||
		!reflect.DeepEqual(a, b) {
		t.Errorf("span=3h through the cluster: %s\nwant the warning and the points of %s", got, want)
	}
	code, got = rangeGet(t, rc.bases[0]+"/v1/range?metric=cost&key=org-1&window=1h&step=1h&span=3h")
	if code != http.StatusBadRequest || !strings.Contains(got, `"param":"window"`) || !strings.Contains(got, "a range window is at most 5m") {
		t.Errorf("window=1h through the cluster: %d %s, want 400 naming the window and the retention", code, got)
	}
	// One store holding every partition reads its tiers, as before.
	if code, got := rangeGet(t, rc.oracle+"/v1/range?metric=cost&key=org-1&window=1h&step=1h&span=3h"); code != http.StatusOK || strings.Contains(got, "warnings") {
		t.Errorf("window=1h on one store: %d %s", code, got)
	}
}
