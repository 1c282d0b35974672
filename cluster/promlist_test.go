package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/window"
)

// promPair is two instances, A (partitions 0, 1) and B (2, 3), each with its peer route
// (behind wrap) and its Prometheus API on one HTTP server, and the API of one store
// holding every event, the oracle. Every clock stands at promNow.
type promPair struct {
	apis   [2]*promapi.API
	cls    [2]*Cluster
	stores [2]*window.Store
	all    *window.Store
	oracle *promapi.API
}

// newPromPair fills the pair with listings' material: series of "lat" interleaved between
// the instances by key (a third on A, a third on B, a third on both, each instance's copy
// starting at another slot), their first slots spread over the retention so a listing's
// end decides which are in range; "req", on B alone; and "idle", whose events are all
// older than the retention at now (listed by nothing).
func newPromPair(t *testing.T, wrap func(http.Handler) http.Handler) *promPair {
	t.Helper()
	clock := func() int64 { return promNow }
	newSt := func() *window.Store {
		s, err := window.NewStore(window.StoreConfig{Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pp := &promPair{all: newSt()}
	for i := range pp.stores {
		pp.stores[i] = newSt()
	}
	add := func(metric, key string, ls []window.Label, part int32, slot int64) {
		s, err := window.AppendSeries(nil, key, ls)
		if err != nil {
			t.Fatal(err)
		}
		ts := min(slot*10_000+3_000, promNow)
		ev := window.Event{TS: ts, Metric: metric, Key: string(s), Value: 5, Feed: window.FeedOf(part)}
		for _, st := range []*window.Store{pp.stores[part/2], pp.all} {
			if err := st.ObserveAt(max(ts, promNow-300_000+1), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	cur := window.FloorDiv(promNow, 10_000)
	for i := range 60 {
		key := fmt.Sprintf("k-%02d", i)
		ls := []window.Label{{Name: "code", Value: []string{"200", "500"}[i%2]}}
		if i%4 == 0 {
			ls = append(ls, window.Label{Name: "env", Value: "prod"})
		}
		first := cur - int64(i*7%30) // every slot of the retention, over the keys
		switch i % 3 {
		case 0:
			add("lat", key, ls, int32(i/3%2), first)
		case 1:
			add("lat", key, ls, 2+int32(i/3%2), first)
		default: // both: B's copy begins later than A's, or earlier
			add("lat", key, ls, 0, first)
			add("lat", key, ls, 2, min(cur, first+int64(i%5)-1))
		}
		add("lat", key, ls, int32(i%4), cur) // every series has the current slot too, on some partition
		if i%5 == 0 {
			add("req", fmt.Sprintf("r-%d", i), []window.Label{{Name: "route", Value: "/" + strconv.Itoa(i)}}, 3, first)
		}
	}
	for i := range 5 {
		add("idle", "i", nil, 1, cur-45+int64(i)) // observed when they happened: evicted at now
	}
	addrs := make([]string, 2)
	handlers := make([]http.Handler, 2)
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handlers[i].ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		addrs[i] = strings.TrimPrefix(srv.URL, "http://")
	}
	owner := map[int32]string{0: addrs[0], 1: addrs[0], 2: addrs[1], 3: addrs[1]}
	now := func() time.Time { return time.UnixMilli(promNow) }
	for i := range 2 {
		parts := []int32{int32(2 * i), int32(2*i + 1)}
		c, err := New(Config{Store: pp.stores[i], Brokers: []string{"127.0.0.1:1"}, Advertise: addrs[i], Now: clock,
			Timeout: 5 * time.Second, Local: func() []int32 { return parts }})
		if err != nil {
			t.Fatal(err)
		}
		c.view.Store(&View{Partitions: 4, Members: 2, Owner: owner})
		api, err := promapi.New(promapi.Config{Store: pp.stores[i], Cluster: c, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(PeerPath, wrap(c.PeerHandler()))
		mux.Handle("/api/v1/", api.Handler())
		handlers[i] = mux
		pp.apis[i], pp.cls[i] = api, c
	}
	var err error
	if pp.oracle, err = promapi.New(promapi.Config{Store: pp.all, Now: now}); err != nil {
		t.Fatal(err)
	}
	return pp
}

// opCounter wraps a peer handler, counting the requests of each op; refuse lists the ops it
// answers as a peer of the version before them does: the request goes to the handler with
// its op renamed to one it does not know, so every check an old peer makes of it before
// the op's (the window, the clock, the signature) answers as the old peer would.
type opCounter struct {
	mu     sync.Mutex
	asked  map[string]int
	bytes  map[string]int
	refuse []string
}

func (oc *opCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := r.URL.Query().Get("op")
		oc.mu.Lock()
		if oc.asked == nil {
			oc.asked, oc.bytes = map[string]int{}, map[string]int{}
		}
		oc.asked[op]++
		refuse := oc.refuse
		oc.mu.Unlock()
		for _, no := range refuse {
			if op == no {
				q := r.URL.Query()
				q.Set("op", op+"-unknown")
				r.URL.RawQuery = q.Encode()
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		oc.mu.Lock()
		oc.bytes[op] += rec.Body.Len()
		oc.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// listingQueries are the listings of the pair's tests: label names, a label's values and
// series, with and without match[], over ranges ending now and earlier (a series whose
// first slot is after a range's end is not in it), as Grafana's variables ask them.
func listingQueries() []struct {
	path string
	q    url.Values
} {
	sec := func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
	type lq = struct {
		path string
		q    url.Values
	}
	var out []lq
	for _, r := range [][2]int64{{0, 0}, {promNow - 3_600_000, promNow}, {promNow - 300_000, promNow - 60_000}, {promNow - 120_000, promNow - 150_000 + 120_000 - 30_000}, {promNow - 290_000, promNow - 200_000}, {promNow - 280_000, promNow - 275_000}} {
		rng := url.Values{}
		if r[1] != 0 {
			rng = url.Values{"start": {sec(r[0])}, "end": {sec(r[1])}}
		}
		with := func(kv ...string) url.Values {
			q := url.Values{}
			for k, v := range rng {
				q[k] = v
			}
			for i := 0; i < len(kv); i += 2 {
				q.Add(kv[i], kv[i+1])
			}
			return q
		}
		out = append(out,
			lq{"/api/v1/labels", with()},
			lq{"/api/v1/labels", with("match[]", "req_count")},
			lq{"/api/v1/label/key/values", with("match[]", "lat_count")},
			lq{"/api/v1/label/key/values", with("match[]", `lat{env="prod"}`)},
			lq{"/api/v1/label/key/values", with("match[]", `{__name__=~"lat|req_sum",code!="500"}`)},
			lq{"/api/v1/label/code/values", with()},
			lq{"/api/v1/label/__name__/values", with()},
			lq{"/api/v1/series", with("match[]", `lat_max{code="500"}`)},
			lq{"/api/v1/series", with("match[]", `lat_count{key=~"k-[0-2].*"}`, "match[]", "req")},
		)
	}
	return out
}

// peerVersions are the peers the listing tests read through: one of this version, and one of
// the version before the extent read, which refuses it.
var peerVersions = []struct {
	name   string
	refuse []string
}{{"new_peer", nil}, {"old_peer", []string{"extents"}}}

// PromQL's listings through either instance of a pair answer byte for byte what one store
// holding every event answers, for every range and matcher; and so they do when the peer
// is of the version before the extent read and refuses it (the asker then reads its slots,
// as before).
func TestPromListingsThroughTheCluster(t *testing.T) {
	for _, peer := range peerVersions {
		t.Run(peer.name, func(t *testing.T) {
			oc := &opCounter{refuse: peer.refuse}
			pp := newPromPair(t, oc.wrap)
			alone, err := promapi.New(promapi.Config{Store: pp.stores[0], Now: func() time.Time { return time.UnixMilli(promNow) }})
			if err != nil {
				t.Fatal(err)
			}
			differ, nonEmpty := 0, 0
			qs := listingQueries()
			for _, c := range qs {
				code, want := promGet(t, pp.oracle.Handler(), c.path, c.q)
				if code != http.StatusOK {
					t.Fatalf("oracle %s %v: %d %s", c.path, c.q, code, want)
				}
				if !strings.Contains(want, `"data":[]`) {
					nonEmpty++
				}
				if _, local := promGet(t, alone.Handler(), c.path, c.q); local != want {
					differ++
				}
				for i, api := range pp.apis {
					code, got := promGet(t, api.Handler(), c.path, c.q)
					if code != http.StatusOK || got != want {
						t.Errorf("instance %d %s %v: %d\n got %.600s\nwant %.600s", i, c.path, c.q, code, got, want)
					}
				}
			}
			// The listings show something: most list series, and A's store alone lists
			// otherwise than the two instances do.
			if nonEmpty < len(qs)*2/3 || differ < len(qs)/2 {
				t.Errorf("%d of %d listings list something, %d differ from A's store alone: the test shows little", nonEmpty, len(qs), differ)
			}
			// A new peer is asked extents, never slots; an old one refuses extents once
			// per asker, which remembers it and asks it slots from then on.
			if peer.refuse == nil && (oc.asked["extents"] == 0 || oc.asked["slots"] != 0) {
				t.Errorf("new peer asked %v: want extents only", oc.asked)
			}
			if peer.refuse != nil && (oc.asked["extents"] != 2 || oc.asked["slots"] < len(qs)) {
				t.Errorf("old peer asked %v: want extents twice (once by each instance), then slots", oc.asked)
			}
		})
	}
}

// extentsOf is what c's VisitExtents hands for metric, and what VisitSlots hands (its cur
// and first slot, of the series it hands with one), at the instant at.
func extentsOf(t *testing.T, c *Cluster, metric string, at int64) (got, want map[string][2]int64) {
	t.Helper()
	got, want = map[string][2]int64{}, map[string][2]int64{}
	missing, err := c.VisitExtents(context.Background(), promNow, at, metric, nil, func(series string, cur, first int64) bool {
		if _, twice := got[series]; twice {
			t.Errorf("%s visited twice", series)
		}
		got[series] = [2]int64{cur, first}
		return true
	})
	if err != nil || len(missing) != 0 {
		t.Fatalf("VisitExtents: missing %v, err %v", missing, err)
	}
	missing, err = c.VisitSlots(context.Background(), promNow, at, metric, nil, func(series string, cur int64, slots []window.SlotView) bool {
		if len(slots) > 0 {
			want[series] = [2]int64{cur, slots[0].Index}
		}
		return true
	})
	if err != nil || len(missing) != 0 {
		t.Fatalf("VisitSlots: missing %v, err %v", missing, err)
	}
	return got, want
}

// VisitExtents hands, of every series, the cur and first slot VisitSlots does, through
// either instance, at now and at past instants, from new and old peers; and so it does
// when one instance's rings stand a slot ahead of the other's (its clock ahead): a series
// both hold whose copy on the other begins at the oldest slot of the retention loses that
// slot in the merge, and the extents alone cannot tell the next one, so it is read again;
// and through three instances, whose two peers' copies of a series merge too.
func TestVisitExtentsEqualsVisitSlots(t *testing.T) {
	for _, peer := range peerVersions {
		t.Run(peer.name, func(t *testing.T) {
			oc := &opCounter{refuse: peer.refuse}
			pp := newPromPair(t, oc.wrap)
			cur := window.FloorDiv(promNow, 10_000)
			for _, at := range []int64{promNow, promNow - 60_000, promNow - 200_000, promNow - 285_000} {
				for i, c := range pp.cls {
					got, want := extentsOf(t, c, "lat", at)
					if len(want) == 0 || !reflect.DeepEqual(got, want) {
						t.Errorf("instance %d at %d: %v, want %v", i, at, got, want)
					}
				}
			}
			// Series on both, each instance's copy from the oldest slot of the retention
			// (B's with a later one too, A's not), then A's rings a slot ahead: the merged
			// retention drops the oldest slot.
			for i := range 6 {
				s, err := window.AppendSeries(nil, fmt.Sprintf("x-%d", i), nil)
				if err != nil {
					t.Fatal(err)
				}
				for j, st := range pp.stores {
					for _, slot := range []int64{cur - 29, cur - 29 + int64(j*(i+1))} {
						ev := window.Event{TS: slot*10_000 + 1, Metric: "skew", Key: string(s), Value: 1, Feed: window.FeedOf(int32(2 * j))}
						if err := st.ObserveAt(ev.TS, ev); err != nil {
							t.Fatal(err)
						}
					}
				}
				ahead := window.Event{TS: (cur+1)*10_000 + 1, Metric: "skew", Key: string(s), Value: 1, Feed: window.FeedOf(0)}
				if err := pp.stores[0].ObserveAt(ahead.TS, ahead); err != nil {
					t.Fatal(err)
				}
			}
			before := oc.asked["slots"]
			for i, c := range pp.cls {
				got, want := extentsOf(t, c, "skew", promNow)
				if len(want) < 5 || !reflect.DeepEqual(got, want) {
					t.Errorf("instance %d, A's rings ahead: %v, want %v", i, got, want)
				}
			}
			if peer.refuse == nil && oc.asked["slots"] == before+2 {
				t.Errorf("A's rings ahead: no series read again (%d slot reads, all VisitSlots')", oc.asked["slots"]-before)
			}
		})
	}
	// Three instances, most series on all three: two peers' copies merge too.
	pc := newPromCluster(t, "")
	for _, at := range []int64{promNow, promNow - 100_000} {
		for i, c := range pc.cls {
			got, want := extentsOf(t, c, "lat", at)
			if len(want) < 20 || !reflect.DeepEqual(got, want) {
				t.Errorf("three instances, through %d at %d: %v, want %v", i, at, got, want)
			}
		}
	}
}

// An opExtents answer whose slots lie outside the bounds index arithmetic keeps clear of,
// or that announces more series than it holds, is corrupt; a request whose instant is
// after its now, or missing, is refused.
func TestExtentsBounds(t *testing.T) {
	for name, body := range map[string][]byte{
		"first too far back": appendExtent(binary.AppendUvarint(appendServed(nil, nil), 1), "k", 5, 5-maxSlotBack-1),
		"cur too late":       appendExtent(binary.AppendUvarint(appendServed(nil, nil), 1), "k", maxSlotIndex+1, maxSlotIndex),
		"cur too early":      appendExtent(binary.AppendUvarint(appendServed(nil, nil), 1), "k", -maxSlotIndex-1, -maxSlotIndex-1),
		"short":              appendExtent(binary.AppendUvarint(appendServed(nil, nil), 3), "k", 5, 4),
	} {
		if _, err := decodeAnswer(opExtents, body); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if a, err := decodeAnswer(opExtents, appendExtent(binary.AppendUvarint(appendServed(nil, nil), 1), "k", 5, 5-maxSlotBack)); err != nil || a.extents[0].first != 5-maxSlotBack {
		t.Errorf("the furthest first slot: %+v, %v", a.extents, err)
	}
	ti := newTwo(t, "", func(h http.Handler) http.Handler { return h })
	for _, at := range []string{strconv.FormatInt(t0+1, 10), ""} {
		q := url.Values{"op": {opExtents}, "metric": {"m"}, "key": {""}, "now": {strconv.FormatInt(t0, 10)}, "at": {at}, "parts": {"2,3"}}
		req := httptest.NewRequest("GET", PeerPath+"?"+q.Encode(), nil)
		req.Header.Set(HeaderPeer, "x:1")
		w := httptest.NewRecorder()
		ti.b.PeerHandler().ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "bad at") {
			t.Errorf("at %q: %d %s", at, w.Code, w.Body)
		}
	}
}

// An asker remembers a peer's refusal of opExtents for olderFor, asking it opSlots straight
// away meanwhile, and asks it opExtents again after: an old peer costs one refused request
// a minute, and one upgraded since is read through extents again. A refusal is expected
// while a rolling upgrade is half done: counted as result="older_version" and said at
// INFO, not counted as a failed read and warned of (an alert on result="error" fired for
// every upgrade).
func TestOlderPeerRemembered(t *testing.T) {
	oc := &opCounter{refuse: []string{opExtents}}
	pp := newPromPair(t, oc.wrap)
	c := pp.cls[0]
	var logs strings.Builder
	var logMu sync.Mutex
	c.log = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	defer func() {
		refused := testutil.ToFloat64(c.m.requests.WithLabelValues(opExtents, "older_version"))
		failed := testutil.ToFloat64(c.m.requests.WithLabelValues(opExtents, "error"))
		if refused != 2 || failed != 0 {
			t.Errorf("extents refused %v times as older_version, %v as error; want 2 and 0", refused, failed)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if n := strings.Count(logs.String(), "level=INFO msg=\"cluster: peer runs an older version"); n != 2 || strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("%d INFO lines of an older peer, want 2, and no WARN:\n%s", n, logs.String())
		}
	}()
	list := func(clock int64, extents, slots int) {
		t.Helper()
		c.now = func() int64 { return clock }
		if _, err := c.VisitExtents(context.Background(), promNow, promNow, "lat", nil, func(string, int64, int64) bool { return true }); err != nil {
			t.Fatal(err)
		}
		oc.mu.Lock()
		defer oc.mu.Unlock()
		if oc.asked[opExtents] != extents || oc.asked[opSlots] != slots {
			t.Errorf("at %+d ms: asked %v, want %d extents and %d slots", clock-promNow, oc.asked, extents, slots)
		}
	}
	list(promNow, 1, 1)
	list(promNow, 1, 2)
	list(promNow+olderFor.Milliseconds()-1, 1, 3)
	list(promNow+olderFor.Milliseconds(), 2, 4) // refused again
	oc.mu.Lock()
	oc.refuse = nil // the peer is upgraded
	oc.mu.Unlock()
	list(promNow+olderFor.Milliseconds()+1, 2, 5)
	list(promNow+2*olderFor.Milliseconds(), 3, 5)
	list(promNow+2*olderFor.Milliseconds(), 4, 5)
}

// A listing of a metric whose retention is past a year (the longest window a peer takes)
// reads an old peer through opSlots too: the window opExtents carries for such a peer was
// the retention, which it refused as "bad now or window" before finding the op unknown, so
// the listing lost that peer's partitions (missing) for the whole upgrade.
func TestExtentsOldPeerLongRetention(t *testing.T) {
	cfg := window.StoreConfig{Now: func() int64 { return promNow }, Metrics: map[string]window.RingConfig{"year": {Slot: time.Hour, Slots: 9000}}}
	stores := [2]*window.Store{}
	for i := range stores {
		var err error
		if stores[i], err = window.NewStore(cfg); err != nil {
			t.Fatal(err)
		}
		ev := window.Event{TS: promNow - int64(i)*3_600_000, Metric: "year", Key: "k-" + strconv.Itoa(i), Value: 1, Feed: window.FeedOf(int32(2 * i))}
		if err := stores[i].ObserveAt(promNow, ev); err != nil {
			t.Fatal(err)
		}
	}
	oc := &opCounter{refuse: []string{opExtents}}
	bc, err := New(Config{Store: stores[1], Brokers: []string{"127.0.0.1:1"}, Advertise: "b:1", Now: func() int64 { return promNow },
		Local: func() []int32 { return []int32{2, 3} }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(oc.wrap(bc.PeerHandler()))
	t.Cleanup(srv.Close)
	peer := strings.TrimPrefix(srv.URL, "http://")
	ac, err := New(Config{Store: stores[0], Brokers: []string{"127.0.0.1:1"}, Advertise: "a:1", Now: func() int64 { return promNow },
		Timeout: 5 * time.Second, Local: func() []int32 { return []int32{0, 1} }})
	if err != nil {
		t.Fatal(err)
	}
	ac.view.Store(&View{Partitions: 4, Members: 2, Owner: map[int32]string{0: "a:1", 1: "a:1", 2: peer, 3: peer}})
	got := map[string]int64{}
	missing, err := ac.VisitExtents(context.Background(), promNow, promNow, "year", nil, func(series string, _, first int64) bool {
		got[series] = first
		return true
	})
	cur := window.FloorDiv(promNow, 3_600_000)
	if want := map[string]int64{"k-0": cur, "k-1": cur - 1}; err != nil || len(missing) != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("missing %v, err %v, visited %v; want %v", missing, err, got, want)
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.asked[opSlots] != 1 {
		t.Errorf("asked %v, want opSlots once after the refusal", oc.asked)
	}
}
