package promapi

import (
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// seriesStartStore is a store at t0 of metric m (10 s slots, 30 kept) with three series:
// "old" with events in every slot of the retention, "new" whose first event is in slot
// cur−10, and "idle" whose events run from before the retention (cur−40) to slot cur−15,
// its ring not moved since: slots before the retention's start are still in it.
func seriesStartStore(t *testing.T) (st *window.Store, cur int64) {
	t.Helper()
	now := t0.UnixMilli()
	st, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cur = window.FloorDiv(now, 10_000)
	for i := cur - 40; i <= cur; i++ {
		for _, key := range []string{"old", "new", "idle"} {
			if key == "old" && i < cur-29 || key == "new" && i < cur-10 || key == "idle" && i > cur-15 {
				continue
			}
			ts := i*10_000 + 3_000
			at := min(i*10_000+9_999, now)
			if err := st.ObserveAt(at, window.Event{TS: ts, Metric: "m", Key: key, Value: float64(10 + i%7), Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st, cur
}

func secs(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

// TestInstantEqualsRangeOverSeriesStart: a series has no sample before its first event's
// slot, as a Prometheus series has none before its first (with the created-timestamp zero,
// at its start): an instant query before it answers nothing and a range query has no point
// there, for the series itself and under rate, increase, sum and histogram_quantile; and
// at every past step an instant query answers what the range query's point at that instant
// is, series by series, on the engine and on the pushdown.
func TestInstantEqualsRangeOverSeriesStart(t *testing.T) {
	st, cur := seriesStartStore(t)
	now := t0.UnixMilli()
	first := (cur - 10) * 10_000 // the start of "new"'s first slot
	pushed, engine := pushedAndEngine(t, st, now)
	exprs := []string{
		`m_count`,
		`m_count{key="new"}`,
		`rate(m_count[1m])`,
		`increase(m_sum{key="new"}[30s])`,
		`sum(rate(m_count{key="new"}[1m]))`,
		`sum by (key) (increase(m_count[2m]))`,
		`histogram_quantile(0.9, sum by (key) (rate(m[1m])))`,
		`histogram_quantile(0.5, rate(m{key="new"}[30s]))`,
		`m_max`,
	}
	for _, api := range []*API{pushed, engine} {
		for _, q := range exprs {
			for _, c := range []struct{ start, step int64 }{
				{now - 280_000, 10_000}, {now - 280_000, 7_000},
				// Grafana's steps, aligned to slot boundaries: one falls on the first slot's start.
				{window.FloorDiv(now-280_000, 10_000) * 10_000, 5_000},
			} {
				start, step := c.start, c.step
				rv := url.Values{"query": {q}, "start": {secs(start)}, "end": {secs(now)}, "step": {secs(step)}}
				rng := pdGet(t, api.Handler(), "/api/v1/query_range", rv)
				if rng.code != 200 {
					t.Fatalf("%s: %d %s", q, rng.code, rng.err)
				}
				byT := map[string]map[string]string{} // instant → series → value
				for m, ps := range rng.points {
					for _, p := range ps {
						if byT[p[0]] == nil {
							byT[p[0]] = map[string]string{}
						}
						byT[p[0]][m] = p[1]
					}
				}
				for at := start; at < now-liveSkew.Milliseconds(); at += step {
					inst := pdGet(t, api.Handler(), "/api/v1/query", url.Values{"query": {q}, "time": {secs(at)}})
					ts := fmt.Sprint(float64(at) / 1000)
					want := byT[ts]
					if len(inst.points) != len(want) {
						t.Errorf("%s at %s (first slot of new at %s): instant %v, range's point %v", q, ts, secs(first), inst.points, want)
						continue
					}
					for m, ps := range inst.points {
						if w, ok := want[m]; !ok || ps[0][1] != w {
							t.Errorf("%s at %s: %s instant %v, range's point %q", q, ts, m, ps, w)
						}
					}
				}
				for m, ps := range rng.points {
					for _, p := range ps {
						ms, _ := strconv.ParseFloat(p[0], 64)
						if int64(ms*1000) < first && (m == `{"__name__":"m_count","key":"new"}` || m == `{}` && q != `m_count`) {
							t.Errorf("%s: %s has a point at %s, before the series' first slot (%s)", q, m, p[0], secs(first))
						}
					}
				}
			}
		}
	}
}

// TestPointsAtSlicesTheMetricsPoints: a series' points, sliced from the metric's listed
// once a read, are the points(cur, first) of its first slot, for every first slot (before,
// at and after the retention's start, the read's instant), ring length, instant (slot
// boundaries among them), live or past, and current slot.
func TestPointsAtSlicesTheMetricsPoints(t *testing.T) {
	for _, live := range []bool{false, true} {
		for _, n := range []int64{1, 2, 5} {
			for now := int64(100_000); now <= 160_000; now += 2_500 {
				for cur := now / 10_000; cur <= now/10_000+1; cur++ {
					sh := shape{width: 10_000, n: n, now: now, live: live, mint: math.MinInt64, maxt: math.MaxInt64}
					b := builder{sh: sh}
					for first := cur - n - 1; first <= cur+1; first++ {
						var slots []window.SlotView
						if first >= cur-n+1 {
							slots = []window.SlotView{{Index: first, Count: 1}}
						}
						b.pointsAt(cur, slots)
						wt, wth := sh.points(cur, first, nil, nil)
						if len(slots) == 0 {
							wt, wth = nil, nil
						}
						if !slices.Equal(b.ts, wt) || !slices.Equal(b.through, wth) {
							t.Errorf("live %v n %d now %d cur %d first %d: %v %v, want %v %v", live, n, now, cur, first, b.ts, b.through, wt, wth)
						}
					}
				}
			}
		}
	}
}

// TestListingsHoldToASeriesStart: the listings (series, label values) hold to start and
// end by a series' samples, which begin at its first slot: a range that ends before it
// does not list the series, one that reaches it does.
func TestListingsHoldToASeriesStart(t *testing.T) {
	st, cur := seriesStartStore(t)
	pushed, _ := pushedAndEngine(t, st, t0.UnixMilli())
	first := (cur - 10) * 10_000
	for _, c := range []struct {
		end  int64
		want string
	}{
		{first - 1_000, `["idle","old"]`},
		{first, `["idle","new","old"]`},
	} {
		v := url.Values{"match[]": {"m_count"}, "start": {secs(first - 60_000)}, "end": {secs(c.end)}}
		rec := httptest.NewRecorder()
		pushed.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/label/key/values?"+v.Encode(), nil))
		if want := `{"status":"success","data":` + c.want + `}`; rec.Body.String() != want {
			t.Errorf("key values to %s (first slot of new at %s): %s, want %s", secs(c.end), secs(first), rec.Body.String(), want)
		}
	}
}
