package window

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// seriesStates is every series of s at now by its metric and key: its partition, current slot
// and slots as a snapshot writes them (sums and bins bit for bit). A snapshot's bytes follow
// the store's map order, so two stores holding the same are compared series by series.
func seriesStates(s *Store, now int64) map[string]string {
	out := map[string]string{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for se := range sh.all() {
			var b []byte
			cur := se.ring.export(now, func(st SlotState) { b = appendSlot(b, uint64(st.Idx), st) })
			out[se.metric+"\xff"+se.key] = fmt.Sprint(se.partition, cur, b)
		}
		sh.mu.Unlock()
	}
	return out
}

// TestObserveFromAllMatchesOneByOne gives two stores the same records, one event at a time
// through ObserveFrom and a record at a time through ObserveFromAll: every event's error, the
// stats and every series' slots (sums and bins bit for bit) must agree. The
// records hold up to 300 events (past a block of 256) of up to 45 series (past a block's 32
// groups), keys interned and copied (one series under two addresses), empty keys, NaN, events
// late, expired and ahead, and new series whose first event is refused while both caps are
// nearly full, so that a later event creates the series after others were (the cases where
// grouping by series could change which series a cap refuses).
func TestObserveFromAllMatchesOneByOne(t *testing.T) { testObserveAllMatchesOneByOne(t, false) }

// TestObserveAtAllMatchesOneByOne is TestObserveFromAllMatchesOneByOne for ObserveAtAll
// against ObserveAt (the spans of a request over HTTP): the same records, judged by now.
func TestObserveAtAllMatchesOneByOne(t *testing.T) { testObserveAllMatchesOneByOne(t, true) }

func testObserveAllMatchesOneByOne(t *testing.T, at bool) {
	for _, caps := range []StoreConfig{{}, {MaxSeries: 30}, {MaxSeriesPerMetric: 12}} {
		t.Run(fmt.Sprintf("max%d_per_metric%d", caps.MaxSeries, caps.MaxSeriesPerMetric), func(t *testing.T) {
			cfg := caps
			cfg.Ring = RingConfig{Slot: time.Second, Slots: 10}
			one, all := newTestStore(t, cfg), newTestStore(t, cfg)
			rng := rand.New(rand.NewPCG(7, 31))
			keys := make([]string, 45)
			for i := range keys {
				keys[i] = fmt.Sprintf("svc-%02d", i)
			}
			metrics := []string{"duration_ms", "bytes"}
			now := t0
			var evs []Event
			var ptrs []*Event
			for rec := range 400 {
				now += int64(rng.IntN(400))
				rts := now - int64(rng.IntN(2000))
				if rng.IntN(20) == 0 {
					rts = now - 30_000 // a replay: its events late against the record
				}
				src := Source{RecordTS: rts}
				n := 1 + rng.IntN(300)
				series := 1 + rng.IntN(len(keys))
				evs = evs[:0]
				for range n {
					k := keys[rng.IntN(series)]
					if rng.IntN(4) == 0 {
						k = strings.Clone(k) // the same series under another address
					}
					ev := Event{Metric: metrics[rng.IntN(len(metrics))], Key: k, Value: math.Exp(2 + rng.NormFloat64()), TS: rts - int64(rng.IntN(3000)),
						Feed: FeedOf(int32(rng.IntN(2)))}
					switch rng.IntN(60) {
					case 0:
						ev.Key = ""
					case 1:
						ev.Value = math.NaN()
					case 2:
						ev.TS = rts - 20_000 // late
					case 3:
						ev.TS = now + 5_000 // ahead
					case 4:
						ev.Count = uint64(1 + rng.IntN(5))
					}
					evs = append(evs, ev)
				}
				ptrs = ptrs[:0]
				for i := range evs {
					ptrs = append(ptrs, &evs[i])
				}
				got := make([]error, n)
				if at {
					all.ObserveAtAll(now, ptrs, got)
				} else {
					all.ObserveFromAll(now, src, ptrs, got)
				}
				for i := range evs {
					ev := evs[i]
					var want error
					if at {
						want = one.ObserveAt(now, ev)
					} else {
						want = one.ObserveFrom(now, src, &ev)
					}
					if want != got[i] {
						t.Fatalf("record %d, event %d (%s %q ts %d): all at once %v, one by one %v", rec, i, ev.Metric, ev.Key, ev.TS, got[i], want)
					}
				}
			}
			if a, b := all.Stats(), one.Stats(); a != b {
				t.Fatalf("stats: all at once %+v, one by one %+v", a, b)
			}
			a, b := seriesStates(all, now), seriesStates(one, now)
			if len(a) != len(b) || len(a) < 10 {
				t.Fatalf("all at once made %d series, one by one %d (want the same, at least 10)", len(a), len(b))
			}
			for k, st := range b {
				if a[k] != st {
					t.Fatalf("series %q: the slots of all at once differ from one by one's", k)
				}
			}
		})
	}
}
