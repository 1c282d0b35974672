package promapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// layoutQueries read the histogram series every way whose answer could depend on its
// bucket layout: raw samples, rates, sums, quantiles, counts, over an instant and a range.
var layoutQueries = []string{
	`histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m])))`,
	`histogram_quantile(0.5, sum by (route) (increase(latency_ms[1m])))`,
	`sum by (key) (rate(latency_ms[1m]))`,
	`histogram_count(latency_ms)`,
	`histogram_fraction(0, 100, rate(latency_ms[2m]))`,
	`sum_over_time(latency_ms[1m])`,
	`latency_ms`,
}

// ask answers a query of layoutQueries through h, as an instant query at now and as a
// range over the retention at 10 s steps.
func ask(t *testing.T, h http.Handler, q string, now time.Time) string {
	t.Helper()
	var out string
	for _, path := range []string{"/api/v1/query?" + url.Values{"query": {q}, "time": {sec(now)}}.Encode(),
		"/api/v1/query_range?" + url.Values{"query": {q}, "start": {sec(now.Add(-5 * time.Minute))}, "end": {sec(now)}, "step": {"10"}}.Encode()} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, body)
		}
		out += string(body) + "\n"
	}
	return out
}

func sec(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

// TestSpanLayoutKeepsAnswers: the samples' spans skip runs of empty buckets (spanGap), a
// layout the engine reads differently from one span over the series' whole range (its
// copies, subtraction and compaction meet fewer buckets); every answer is the same, byte
// for byte, for an exact native ring and a re-bucketed DDSketch one, negative values and
// zeros among them.
func TestSpanLayoutKeepsAnswers(t *testing.T) {
	for _, kind := range []string{"native:5", "ddsketch:0.01"} {
		d := newDemo(t, kind, 6, 8)
		// Negative values and zeros too, so both sides and the zero bucket have spans.
		for i, slot := range []int64{3, 4, 9, 20, 21} {
			ts := d.now.UnixMilli() - slot*10_000
			d.add(t, "latency_ms", "k0aa", "/pay", ts, -float64(5+40*i))
			d.add(t, "latency_ms", "k1aa", "/search", ts, 0)
		}
		answers := func(gap int32) []string {
			defer func(g int32) { spanGap = g }(spanGap)
			spanGap = gap
			a, err := New(Config{Store: d.store, Now: d.now_})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, q := range layoutQueries {
				out = append(out, ask(t, a.Handler(), q, d.now))
			}
			return out
		}
		compact, whole := answers(spanGap), answers(1<<30)
		if raw := compact[len(compact)-1]; !strings.Contains(raw, `,"-`) {
			t.Fatalf("%s: no negative bucket in the raw samples: %.300s", kind, raw)
		}
		for i, q := range layoutQueries {
			if compact[i] != whole[i] {
				t.Errorf("%s %s: with gaps skipped\n%.600s\nwith one span\n%.600s", kind, q, compact[i], whole[i])
			}
		}
	}
}

// TestSlotCacheFollowsTheRing: a second query reads the packed slots the first one cached;
// a late event reopens a packed slot (a new slot, never the cached one), and the next
// answer counts it, as an API with nothing cached answers.
func TestSlotCacheFollowsTheRing(t *testing.T) {
	d := newDemo(t, "ddsketch:0.01", 4, 6)
	a, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		t.Fatal(err)
	}
	q := `histogram_quantile(0.9, sum by (key) (rate(latency_ms[5m])))`
	first := ask(t, a.Handler(), q, d.now)
	c := a.q.caches.of(d.store.RingConfig("latency_ms").Sketch)
	c.mu.RLock()
	cached := len(c.cur)
	c.mu.RUnlock()
	if cached == 0 {
		t.Fatal("the first query cached no series")
	}
	if again := ask(t, a.Handler(), q, d.now); again != first {
		t.Fatalf("the cached read differs:\n%.600s\n%.600s", again, first)
	}
	// A large late value in a slot two minutes back, for every key of route /pay.
	ts := d.now.UnixMilli() - 2*time.Minute.Milliseconds()
	for k := range 4 {
		key := "k" + string(rune('0'+k%10)) + "aa"
		d.add(t, "latency_ms", key, "/pay", ts, 50_000)
	}
	after := ask(t, a.Handler(), q, d.now)
	fresh, err := New(Config{Store: d.store, Now: d.now_})
	if err != nil {
		t.Fatal(err)
	}
	if want := ask(t, fresh.Handler(), q, d.now); after != want {
		t.Fatalf("after a late event, cached:\n%.600s\nuncached:\n%.600s", after, want)
	}
	if after == first {
		t.Fatal("the late events changed no answer: the test reads nothing")
	}
}

// TestSlotCacheGenerations: past slotCacheSeries series the current generation becomes the
// old one; a series found there is a hit (its buckets as inserted) and moves back to the
// current one, and a generation later what was not read again is gone.
func TestSlotCacheGenerations(t *testing.T) {
	ix, err := sketch.Kind{Name: "native"}.Indexer()
	if err != nil {
		t.Fatal(err)
	}
	var bins sketch.Bins
	bins.Add(ix, 12.5, 3)
	bins.Add(ix, -40, 1)
	slot := sketch.SlotOf(&bins)
	slot.Pack()
	slots := []window.SlotView{{Index: 7, Count: 4, Bins: slot}}
	want := cachedSlot{bins: append(slot.AppendBins(nil, false), slot.AppendBins(nil, true)...), neg: 1}
	var c slotCache
	fill := func(prefix string) {
		for i := range slotCacheSeries + 1 {
			ls, _ := c.lookup(prefix+strconv.Itoa(i), slots, nil)
			ls[0].c = want
			c.insert(prefix+strconv.Itoa(i), slots, ls)
		}
	}
	fill("a")
	ls, fresh := c.lookup("a0", slots, nil)
	if fresh || ls[0].state != lookHit || !slices.Equal(ls[0].c.bins, want.bins) || ls[0].c.neg != 1 {
		t.Fatalf("a0 after one rotation: fresh %v, %+v, want a hit in the old generation of %+v", fresh, ls[0], want)
	}
	c.insert("a0", slots, ls) // promoted
	if _, fresh := c.lookup("a0", slots, nil); !fresh {
		t.Fatal("a0 was not promoted")
	}
	fill("b")
	if ls, _ := c.lookup("a1", slots, nil); ls[0].state != lookMiss {
		t.Fatalf("a1 two generations later: %+v, want a miss", ls[0])
	}
	if ls, _ := c.lookup("a0", slots, nil); ls[0].state != lookHit {
		t.Fatalf("a0, promoted, one generation later: %+v, want a hit", ls[0])
	}
}
