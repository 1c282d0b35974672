package cluster

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// addListingSeries gives ti's two instances (and its one-store oracle) series of three
// metrics whose keys interleave between the instances in listing order: each series lands
// on a random partition, a third of them on one of each instance's too (a series both
// hold), some with labels.
func addListingSeries(t *testing.T, ti *twoInstances) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	codes := []string{"", "200", "503"}
	for i := range 1500 {
		var ls []window.Label
		if c := codes[i%3]; c != "" {
			ls = append(ls, window.Label{Name: "code", Value: c})
		}
		series, err := window.AppendSeries(nil, fmt.Sprintf("s-%03d", rng.IntN(400)), ls)
		if err != nil {
			t.Fatal(err)
		}
		metric := []string{"a", "m", "z"}[rng.IntN(3)]
		parts := []int32{rng.Int32N(4)}
		if i%3 == 0 {
			parts = []int32{rng.Int32N(2), 2 + rng.Int32N(2)}
		}
		for _, p := range parts {
			ev := window.Event{TS: t0 - rng.Int64N(200_000), Metric: metric, Key: string(series), Value: 1, Feed: window.FeedOf(p)}
			dst := ti.a.cfg.Store
			if p >= 2 {
				dst = ti.storeB
			}
			for _, s := range []*window.Store{dst, ti.all} {
				if err := s.ObserveAt(t0, ev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// oneStoreListing is what one store holding every series lists: the series of metric (all
// when empty) with prefix that ms select, sorted by metric then key.
func oneStoreListing(t *testing.T, st *window.Store, metric, prefix string, ms []window.Matcher) []window.SeriesID {
	t.Helper()
	sel, err := window.CompileSelector("", ms)
	if err != nil {
		t.Fatal(err)
	}
	var ids []window.SeriesID
	st.EachSeries(func(m, k string, _ int32) {
		if (metric == "" || m == metric) && strings.HasPrefix(k, prefix) && sel.Match(k) {
			ids = append(ids, window.SeriesID{Metric: m, Key: k})
		}
	})
	slices.SortFunc(ids, window.CompareSeriesIDs)
	return ids
}

// pageThrough pages through c's listing limit at a time as /v1/series does (a page and
// one more, the next page after the page's last series) and checks each page, and whether
// another follows, against the one-store listing want. It returns the number of pages.
func pageThrough(t *testing.T, c *Cluster, metric, prefix string, ms []window.Matcher, limit int, want []window.SeriesID) int {
	t.Helper()
	var after *window.SeriesID
	for page := 0; ; page++ {
		ids, missing, err := c.Keys(context.Background(), metric, prefix, ms, after, limit+1)
		if err != nil || len(missing) != 0 {
			t.Fatalf("page %d: missing %v, err %v", page, missing, err)
		}
		from := page * limit
		end := min(from+limit, len(want))
		got, more := ids[:min(limit, len(ids))], len(ids) > limit
		if !reflect.DeepEqual(got, want[from:end]) && (len(got) > 0 || from < end) {
			t.Fatalf("page %d of %d: %v, want %v", page, limit, got, want[from:end])
		}
		if wantMore := end < len(want); more != wantMore {
			t.Fatalf("page %d of %d: more %v, want %v", page, limit, more, wantMore)
		}
		if !more {
			return page + 1
		}
		after = &got[len(got)-1]
	}
}

// keyAnswers wraps a peer handler, decoding each opKeys answer it writes and keeping how
// many ids each held.
type keyAnswers struct {
	mu     sync.Mutex
	counts []int
	limits []string
}

func (ka *keyAnswers) wrap(t *testing.T, strip bool) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strip {
				// A peer of the version before the page: it never reads these fields.
				q := r.URL.Query()
				for _, f := range []string{"m", "after_metric", "after_key", "limit"} {
					q.Del(f)
				}
				r.URL.RawQuery = q.Encode()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if r.URL.Query().Get("op") == opKeys && rec.Code == http.StatusOK {
				a, err := decodeAnswer(opKeys, rec.Body.Bytes())
				if err != nil {
					t.Errorf("peer answer: %v", err)
				}
				ka.mu.Lock()
				ka.counts = append(ka.counts, len(a.keys))
				ka.limits = append(ka.limits, r.URL.Query().Get("limit"))
				ka.mu.Unlock()
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
}

// Paging through a two-instance cluster's listing gives, page after page, exactly what one
// store holding every series lists: the same series in the same order, the same "another
// page follows", for every metric or one, with a prefix and with label matchers; and so
// it does when the peer is of the version before the page and answers everything, and
// when the group signs its requests (the page's fields are signed with the rest).
func TestKeysPagesEqualOneStore(t *testing.T) {
	ms503 := []window.Matcher{{Name: "code", Op: window.MatchEqual, Value: "503"}}
	for _, peer := range []struct {
		name, token string
		old         bool
	}{{"new_peer", "", false}, {"old_peer", "", true}, {"signed", "group-token", false}} {
		t.Run(peer.name, func(t *testing.T) {
			var ka keyAnswers
			ti := newTwo(t, peer.token, ka.wrap(t, peer.old))
			addListingSeries(t, ti)
			for _, tc := range []struct {
				metric, prefix string
				ms             []window.Matcher
			}{
				{"", "", nil}, {"m", "", nil}, {"", "s-1", nil}, {"z", "s-2", nil},
				{"", "", ms503}, {"a", "s-0", ms503}, {"nope", "", nil}, {"m", "s-", ms503},
			} {
				want := oneStoreListing(t, ti.all, tc.metric, tc.prefix, tc.ms)
				if tc.metric != "nope" && len(want) < 20 {
					t.Fatalf("%+v: %d series, too few to page through", tc, len(want))
				}
				for _, limit := range []int{1, 3, 7, 100, 5000} {
					if len(want) > 100*limit {
						continue // a page of 1 or 3 through a long listing: a thousand round trips
					}
					pages := pageThrough(t, ti.a, tc.metric, tc.prefix, tc.ms, limit, want)
					if wantPages := max(1, (len(want)+limit-1)/limit); pages != wantPages {
						t.Errorf("%+v by %d: %d pages, want %d", tc, limit, pages, wantPages)
					}
				}
			}
			// The pages interleave: both instances hold series of the listing's first
			// pages, and series both hold are listed once.
			first := oneStoreListing(t, ti.all, "", "", nil)[:50]
			var onA, onB, both int
			for _, id := range first {
				a, b := slices.Contains(ti.a.cfg.Store.Keys(id.Metric, id.Key), id.Key), slices.Contains(ti.storeB.Keys(id.Metric, id.Key), id.Key)
				switch {
				case a && b:
					both++
				case a:
					onA++
				case b:
					onB++
				}
			}
			if onA == 0 || onB == 0 || both == 0 {
				t.Errorf("first 50 series: %d on A only, %d on B only, %d on both; want some of each", onA, onB, both)
			}
			if len(ka.counts) == 0 {
				t.Fatal("no peer answered a listing")
			}
		})
	}
}

// A peer asked for a page answers at most the page's ids (and one more), not every series
// it holds; asked without a limit (an asker of the version before the page), it answers
// every one, as before.
func TestKeysPeerAnswerIsAPage(t *testing.T) {
	var ka keyAnswers
	ti := newTwo(t, "", ka.wrap(t, false))
	addListingSeries(t, ti)
	held := len(oneStoreListing(t, ti.storeB, "", "", nil))
	const limit = 10
	if held <= 10*limit {
		t.Fatalf("peer holds %d series: too few", held)
	}
	var after *window.SeriesID
	for range 5 {
		ids, missing, err := ti.a.Keys(context.Background(), "", "", nil, after, limit+1)
		if err != nil || len(missing) != 0 || len(ids) != limit+1 {
			t.Fatalf("%d ids, missing %v, err %v", len(ids), missing, err)
		}
		after = &ids[limit-1]
	}
	if len(ka.counts) != 5 {
		t.Fatalf("%d peer answers, want 5", len(ka.counts))
	}
	for i, n := range ka.counts {
		if n > limit+1 || n == 0 {
			t.Errorf("answer %d (limit=%s) held %d ids, want 1 to %d of the %d the peer holds", i, ka.limits[i], n, limit+1, held)
		}
	}
	// An asker of the version before the page sends no cursor, limit nor matchers.
	q := url.Values{"op": {opKeys}, "metric": {""}, "key": {""}, "window": {"0"}, "now": {"0"}, "parts": {"2,3"}}
	req := httptest.NewRequest("GET", PeerPath+"?"+q.Encode(), nil)
	req.Header.Set(HeaderPeer, "x:1")
	w := httptest.NewRecorder()
	ti.b.PeerHandler().ServeHTTP(w, req)
	a, err := decodeAnswer(opKeys, w.Body.Bytes())
	if err != nil || len(a.keys) != held {
		t.Errorf("without a limit: %d ids, err %v, want all %d", len(a.keys), err, held)
	}
}

// A listing whose peer cannot answer names the peer's partitions missing and lists this
// instance's page: the caller decides (503, or partial=allow).
func TestKeysPeerDownIsMissing(t *testing.T) {
	ti := newTwo(t, "", func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusBadGateway) })
	})
	addListingSeries(t, ti)
	local := oneStoreListing(t, ti.a.cfg.Store, "m", "", nil)
	after := local[4]
	ids, missing, err := ti.a.Keys(context.Background(), "m", "", nil, &after, 8)
	if err != nil || !reflect.DeepEqual(missing, []int32{2, 3}) {
		t.Fatalf("missing %v, err %v; want [2 3]", missing, err)
	}
	if !reflect.DeepEqual(ids, local[5:13]) {
		t.Errorf("%v, want this instance's %v", ids, local[5:13])
	}
}

// A page larger than a peer answers (maxDecodeItems) is refused with an error of its own:
// every peer refused it with a 400, so the listing came back with their partitions missing,
// as if they were down.
func TestKeysPageOverThePeersBound(t *testing.T) {
	ti := newTwo(t, "", nil)
	for _, limit := range []int{maxDecodeItems + 1, math.MaxInt} {
		_, missing, err := ti.a.Keys(context.Background(), "m", "", nil, nil, limit)
		if err == nil || !strings.Contains(err.Error(), "at most") {
			t.Errorf("limit %d: missing %v, err %v; want the page refused", limit, missing, err)
		}
	}
	ids, missing, err := ti.a.Keys(context.Background(), "m", "", nil, nil, maxDecodeItems)
	if err != nil || len(missing) != 0 || len(ids) == 0 {
		t.Errorf("limit %d: %d ids, missing %v, err %v", maxDecodeItems, len(ids), missing, err)
	}
}
