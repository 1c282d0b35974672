package query_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// TestRangeReadsTheTiers: four days of cost events into the rings 1m:60+1h:48+1d:36; an
// hourly and a daily /v1/range reach back past the hour tier into the day tier, their points
// tile the span without overlap, and each holds exactly the events of its [from, to).
func TestRangeReadsTheTiers(t *testing.T) {
	st, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60,
		NoSketch: true, Tiers: []window.Tier{{Slot: time.Hour, Slots: 48}, {Slot: 24 * time.Hour, Slots: 36}}}}})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *query.Config) { c.Store = st })
	rng := rand.New(rand.NewPCG(29, 15))
	type ev struct {
		ts int64
		v  float64
	}
	var evs []ev
	now := t0 + 5*60_000 + 7_000
	for end := now + 4*24*3_600_000; now < end; {
		now += rng.Int64N(60 * 60_000)
		v := float64(1 + rng.IntN(5))
		if err := st.ObserveAt(now, window.Event{TS: now, Metric: "cost", Key: "tenant-1", Value: v, Count: 1}); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev{now, v})
	}
	e.clock.set(now + 3*60_000)
	for _, c := range []struct{ win, step string }{{"1h", "1h"}, {"1d", "1d"}} {
		var a rangeAnswer
		e.getJSON(fmt.Sprintf("/v1/range?metric=cost&key=tenant-1&window=%s&step=%s&span=4d", c.win, c.step), 200, &a)
		if len(a.Points) < 2 || e.clock.millis()-a.From < 50*3_600_000 {
			t.Fatalf("window %s: %d points from %d ms before now: the range stops short of the day tier", c.win, len(a.Points), e.clock.millis()-a.From)
		}
		for i, p := range a.Points {
			if i > 0 && p.From != a.Points[i-1].To {
				t.Fatalf("window %s: point %d starts at %d, the one before ends at %d", c.win, i, p.From, a.Points[i-1].To)
			}
			var n uint64
			var sum float64
			for _, x := range evs {
				if x.ts >= p.From && x.ts < p.To {
					n++
					sum += x.v
				}
			}
			if p.Count != n || p.Sum != sum {
				t.Fatalf("window %s point %d [%d, %d): count %d sum %v, the events there %d, %v", c.win, i, p.From, p.To, p.Count, p.Sum, n, sum)
			}
		}
	}
	// Without span, the retention: the ring's own slots, as for a ring without tiers; a
	// window longer than it is one point.
	var a rangeAnswer
	e.getJSON("/v1/range?metric=cost&key=tenant-1", 200, &a)
	if len(a.Points) != 60 || a.Points[0].To-a.Points[0].From != 60_000 {
		t.Fatalf("no span: %d points, the first [%d, %d)", len(a.Points), a.Points[0].From, a.Points[0].To)
	}
	e.getJSON("/v1/range?metric=cost&key=tenant-1&window=1d&step=1d", 200, &a)
	if len(a.Points) != 1 || a.Points[0].To-a.Points[0].From < 24*3_600_000 {
		t.Fatalf("window 1d, no span: %d points, the first [%d, %d)", len(a.Points), a.Points[0].From, a.Points[0].To)
	}
	if code, b, _ := e.do("GET", "/v1/range?metric=cost&key=tenant-1&window=2h&span=1h", nil); code != 400 {
		t.Fatalf("a span shorter than the window: %d %s", code, b)
	}
	// Past the reach (37 days here) a window is refused, as /v1/window refuses it.
	if code, b, _ := e.do("GET", "/v1/range?metric=cost&key=tenant-1&window=40d&step=1d", nil); code != 400 {
		t.Fatalf("a window past the reach: %d %s", code, b)
	}
}
