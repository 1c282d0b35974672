package promapi

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// t0 is the demo's now: a slot boundary plus 4.5 s, so the current slot is in progress.
var t0 = time.UnixMilli(1_800_000_000_000 + 4_500)

// demoEvent is one event of the demo store, kept for the oracles.
type demoEvent struct {
	key, route string
	ts         int64
	v          float64
}

// demo is a store of latency_ms (the ring of kind) over its whole default retention (30
// slots of 10 s): keys k0..k(keys-1), two routes each, lognormal latencies, per slot a
// count that varies; and errors (count only) and limiter_decisions by decision.
type demo struct {
	store  *window.Store
	events []demoEvent
	now    time.Time
}

// now_ is the demo's clock, as Config.Now takes one.
func (d *demo) now_() time.Time { return d.now }

func newDemo(tb testing.TB, kind string, keys, perSlot int) *demo {
	tb.Helper()
	k, err := sketch.ParseKind(kind)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := window.NewStore(window.StoreConfig{Ring: window.RingConfig{Sketch: k}, Now: func() int64 { return t0.UnixMilli() }})
	if err != nil {
		tb.Fatal(err)
	}
	d := &demo{store: st, now: t0}
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0.UnixMilli()
	cur := window.FloorDiv(now, 10_000)
	routes := []string{"/pay", "/search"}
	for i := cur - 29; i <= cur; i++ {
		for ki := range keys {
			key := "k" + string(rune('0'+ki%10)) + string(rune('a'+ki/10%26)) + string(rune('a'+ki/260))
			for ri, route := range routes {
				n := perSlot/2 + rng.IntN(perSlot)
				for range n {
					ts := i*10_000 + rng.Int64N(10_000)
					if ts > now {
						ts = now
					}
					v := math.Exp(rng.NormFloat64()*0.6+4) * float64(1+ri+ki%3)
					d.add(tb, "latency_ms", key, route, ts, v)
				}
				if rng.IntN(4) == 0 {
					d.add(tb, "errors", key, route, i*10_000, 1)
				}
				d.add(tb, "limiter_decisions", key, []string{"allowed", "denied"}[rng.IntN(2)], i*10_000+1, 1)
			}
		}
	}
	return d
}

func (d *demo) add(tb testing.TB, metric, key, label string, ts int64, v float64) {
	name := "route"
	if metric == "limiter_decisions" {
		name = "decision"
	}
	s, err := window.AppendSeries(nil, key, []window.Label{{Name: name, Value: label}})
	if err != nil {
		tb.Fatal(err)
	}
	// Written as they would arrive: at their slot's end (or now), so the ring advances and
	// packs its past slots as a live one does.
	at := min(window.FloorDiv(ts, 10_000)*10_000+9_999, d.now.UnixMilli())
	if err := d.store.ObserveAt(at, window.Event{TS: ts, Metric: metric, Key: string(s), Value: v, Count: 1}); err != nil {
		tb.Fatal(err)
	}
	if metric == "latency_ms" {
		d.events = append(d.events, demoEvent{key: key, route: label, ts: ts, v: v})
	}
}

// nearestRank is the exact q quantile of vs by the nearest-rank rule.
func nearestRank(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	r := int(math.Ceil(q * float64(len(s))))
	return s[max(r, 1)-1]
}

// valuesBy groups the events' values whose ts is in [from, to] by f.
func (d *demo) valuesBy(from, to int64, f func(demoEvent) string) map[string][]float64 {
	out := map[string][]float64{}
	for _, e := range d.events {
		if e.ts >= from && e.ts <= to {
			out[f(e)] = append(out[f(e)], e.v)
		}
	}
	return out
}
