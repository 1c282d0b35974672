package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

const t0 = int64(1_764_489_600_000) // 2025-11-30T08:00:00Z, a slot boundary for every width used here

func newTestStore(t testing.TB, cfg StoreConfig) *Store {
	t.Helper()
	s, err := NewStore(cfg)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return s
}

// oracle is the exact answer over the events that fall in [from, to).
type oracle struct{ vals []float64 }

func (o *oracle) exact(from, to int64, evs []Event) (count uint64, sum, lo, hi float64, sorted []float64) {
	for _, e := range evs {
		if e.TS < from || e.TS >= to {
			continue
		}
		n := max(e.Count, 1)
		count += n
		sum += e.Value * float64(n)
		for range n {
			sorted = append(sorted, e.Value)
		}
	}
	slices.Sort(sorted)
	if len(sorted) > 0 {
		lo, hi = sorted[0], sorted[len(sorted)-1]
	}
	return
}

// exactQuantile uses the same rank as DDSketch: the value of rank q·(n−1).
func exactQuantile(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1))]
}

func TestRingRefusesLateFutureAndInvalid(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	now := t0 + 5*60_000
	ev := func(ts int64, v float64) Event { return Event{TS: ts, Metric: "latency_ms", Key: "k", Value: v} }
	cases := []struct {
		name string
		ev   Event
		want error
	}{
		{"current slot", ev(now, 1), nil},
		{"oldest slot still kept", ev(now-now%10_000-290_000, 1), nil},
		{"one slot older than retention", ev(now-now%10_000-290_001, 1), ErrLate},
		{"within one slot of skew", ev(now+10_000, 1), nil},
		{"beyond the skew", ev(now+10_001, 1), ErrFuture},
		{"NaN", ev(now, math.NaN()), ErrInvalidValue},
		{"+Inf", ev(now, math.Inf(1)), ErrInvalidValue},
		{"empty key", Event{TS: now, Metric: "m", Value: 1}, ErrEmptyKey},
	}
	for _, c := range cases {
		if err := s.ObserveAt(now, c.ev); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	st := s.Stats()
	if st.Late != 1 || st.Future != 1 || st.Invalid != 2 {
		t.Errorf("stats = %+v, want late 1, future 1, invalid 2", st)
	}
}

func TestReadMatchesOracleAcrossSlides(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(1, 2))
	var evs []Event
	windows := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute}
	qs := []float64{0.5, 0.95, 0.99}
	// 20 minutes of traffic, read every 7 s: every read slides the ring by zero, one or more slots.
	for now := t0; now < t0+20*60_000; now += 7_000 {
		for range 200 {
			// Out of order: up to 40 s late, still well inside retention.
			ts := now - rng.Int64N(40_000)
			e := Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: math.Exp(3 + rng.NormFloat64()), Count: uint64(1 + rng.IntN(2))}
			if err := s.ObserveAt(now, e); err != nil {
				t.Fatalf("ObserveAt(%d, ts %d): %v", now, ts, err)
			}
			evs = append(evs, e)
		}
		for _, w := range windows {
			a, err := s.ReadAt(now, "latency_ms", "tenant-42", w, qs)
			if err != nil {
				t.Fatalf("ReadAt: %v", err)
			}
			if a.To-a.From != w.Milliseconds() || a.To <= now || a.To > now+10_000 {
				t.Fatalf("span [%d, %d) for window %v at now %d", a.From, a.To, w, now)
			}
			var o oracle
			count, sum, lo, hi, sorted := o.exact(a.From, a.To, evs)
			if a.Count != count || math.Abs(a.Sum-sum) > 1e-9*sum || a.Min != lo || a.Max != hi {
				t.Fatalf("window %v at %d: got count %d sum %v min %v max %v, want %d %v %v %v", w, now, a.Count, a.Sum, a.Min, a.Max, count, sum, lo, hi)
			}
			for i, q := range qs {
				if count == 0 {
					if !math.IsNaN(a.Quantiles[i]) {
						t.Fatalf("empty window %v at %d: quantile %v, want NaN", w, now, a.Quantiles[i])
					}
					continue
				}
				want := exactQuantile(sorted, q)
				if rel := math.Abs(a.Quantiles[i]-want) / want; rel > 0.01 {
					t.Fatalf("window %v at %d: p%v = %v, exact %v (rel err %.4f > 1%%)", w, now, q*100, a.Quantiles[i], want, rel)
				}
			}
		}
	}
}

func TestSkewedEventJoinsWindowWhenItsSlotArrives(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	now := t0 + 5_000
	if err := s.ObserveAt(now, Event{TS: t0 + 12_000, Metric: "m", Key: "k", Value: 7}); err != nil {
		t.Fatal(err)
	}
	a, err := s.ReadAt(now, "m", "k", 5*time.Minute, []float64{0.5})
	if err != nil {
		t.Fatal(err)
	}
	if a.Count != 0 {
		t.Fatalf("a future slot is not part of the window yet: count %d", a.Count)
	}
	a, _ = s.ReadAt(t0+12_000, "m", "k", 5*time.Minute, []float64{0.5})
	if a.Count != 1 || a.Quantiles[0] != 7 {
		t.Fatalf("once now reaches its slot the event counts: %+v", a)
	}
	// And it leaves with its slot 5 minutes later.
	a, _ = s.ReadAt(t0+10_000+300_000, "m", "k", 5*time.Minute, []float64{0.5})
	if a.Count != 0 || !math.IsNaN(a.Quantiles[0]) {
		t.Fatalf("after retention the window is empty: %+v", a)
	}
}

func TestReadErrors(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	_ = s.ObserveAt(t0, Event{TS: t0, Metric: "m", Key: "k", Value: 1})
	for _, w := range []time.Duration{0, -time.Minute, 15 * time.Second, 6 * time.Minute, 1500 * time.Microsecond} {
		if _, err := s.ReadAt(t0, "m", "k", w, nil); !errors.Is(err, ErrBadWindow) {
			t.Errorf("window %v: got %v, want ErrBadWindow", w, err)
		}
	}
	for _, q := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := s.ReadAt(t0, "m", "k", time.Minute, []float64{q}); !errors.Is(err, ErrBadQuantile) {
			t.Errorf("quantile %v: got %v, want ErrBadQuantile", q, err)
		}
	}
	if _, err := s.ReadAt(t0, "m", "other", time.Minute, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown series: got %v, want ErrNotFound", err)
	}
}

func TestPerMetricRing(t *testing.T) {
	s := newTestStore(t, StoreConfig{Metrics: map[string]RingConfig{"cost": {Slot: time.Minute, Slots: 60}}})
	now := t0 + 50*60_000
	for i := range 50 {
		if err := s.ObserveAt(now, Event{TS: t0 + int64(i)*60_000, Metric: "cost", Key: "t", Value: 2}); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	a, err := s.ReadAt(now, "cost", "t", time.Hour, nil)
	if err != nil || a.Sum != 100 || a.Count != 50 {
		t.Fatalf("hourly cost: %+v, %v; want sum 100 over 50 events", a, err)
	}
	if got := s.RingConfig("cost").Retention(); got != time.Hour {
		t.Fatalf("cost retention %v, want 1h", got)
	}
	if _, err := s.ReadAt(now, "latency_ms", "t", time.Hour, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

func TestReadMergedEqualsUnion(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(3, 4))
	now := t0 + 300_000
	var evs []Event
	for i := range 3000 {
		key := []string{"tenant-1", "tenant-2", "tenant-3", "other"}[i%4]
		e := Event{TS: now - rng.Int64N(290_000), Metric: "latency_ms", Key: key, Value: rng.ExpFloat64() * 100}
		if err := s.ObserveAt(now, e); err != nil {
			t.Fatal(err)
		}
		if key != "other" {
			evs = append(evs, e)
		}
	}
	for _, w := range []time.Duration{time.Minute, 5 * time.Minute} {
		a, err := s.ReadMerged(now, "latency_ms", func(k string) bool { return k != "other" }, w, []float64{0.5, 0.99})
		if err != nil {
			t.Fatal(err)
		}
		var o oracle
		count, sum, lo, hi, sorted := o.exact(a.From, a.To, evs)
		if a.Series != 3 || a.Count != count || math.Abs(a.Sum-sum) > 1e-9*sum || a.Min != lo || a.Max != hi {
			t.Fatalf("window %v: merged %+v; want 3 series, count %d sum %v min %v max %v", w, a, count, sum, lo, hi)
		}
		for i, q := range []float64{0.5, 0.99} {
			want := exactQuantile(sorted, q)
			if rel := math.Abs(a.Quantiles[i]-want) / want; rel > 0.01 {
				t.Fatalf("window %v: merged p%v %v, exact %v", w, q*100, a.Quantiles[i], want)
			}
		}
	}
	if _, err := s.ReadMerged(now, "latency_ms", func(string) bool { return false }, time.Minute, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no match: %v", err)
	}
}

func TestEvictCapAndPartitions(t *testing.T) {
	s := newTestStore(t, StoreConfig{MaxSeries: 3})
	for i, k := range []string{"a", "b", "c"} {
		if err := s.ObserveAt(t0, Event{TS: t0, Metric: "m", Key: k, Value: 1, Feed: FeedOf(int32(i % 2))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ObserveAt(t0, Event{TS: t0, Metric: "m", Key: "d", Value: 1}); !errors.Is(err, ErrSeriesCap) {
		t.Fatalf("fourth series: %v, want ErrSeriesCap", err)
	}
	if err := s.ObserveAt(t0, Event{TS: t0, Metric: "m", Key: "a", Value: 1}); err != nil {
		t.Fatalf("an existing series still takes events at the cap: %v", err)
	}
	if got := s.Stats().Refused; got != 1 {
		t.Fatalf("refused %d, want 1", got)
	}
	if got := s.Keys("m", ""); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("keys %v", got)
	}
	// c came last from partition 0 and b from 1; a's re-feed carries the zero Feed (no feed),
	// so a revocation of partition 0 no longer takes it.
	if n := s.DropPartition(0); n != 1 {
		t.Fatalf("DropPartition(0) dropped %d, want 1", n)
	}
	if got := s.Keys("m", ""); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after dropping partition 0: %v", got)
	}
	if n := s.Evict(t0 + 299_999); n != 0 {
		t.Fatalf("series with events inside retention evicted: %d", n)
	}
	if n := s.Evict(t0 + 300_000); n != 2 || s.Len() != 0 || s.Stats().Evicted != 2 {
		t.Fatalf("idle series not evicted: %d, len %d", n, s.Len())
	}
}

// TestMaxSeriesPerMetric: a metric at its cap refuses new series (ErrSeriesCap, counted in
// Stats and by metric) through both doors, while its series take events and other metrics
// grow; a series that goes (evicted, dropped, refused when new) frees its place.
func TestMaxSeriesPerMetric(t *testing.T) {
	s := newTestStore(t, StoreConfig{MaxSeriesPerMetric: 2})
	obs := func(metric, key string) error {
		return s.ObserveAt(t0, Event{TS: t0, Metric: metric, Key: key, Value: 1, Feed: FeedOf(0)})
	}
	for _, k := range []string{"a\xffroute=/pay", "a\xffroute=/cart"} {
		if err := obs("noisy", k); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := obs("noisy", "a\xffroute=/x"); !errors.Is(err, ErrSeriesCap) {
			t.Fatalf("third series of noisy: %v, want ErrSeriesCap", err)
		}
	}
	src := Source{RecordTS: t0}
	if err := s.ObserveFrom(t0, src, &Event{TS: t0, Metric: "noisy", Key: "b", Value: 1}); !errors.Is(err, ErrSeriesCap) {
		t.Fatalf("third series of noisy by ObserveFrom: %v, want ErrSeriesCap", err)
	}
	if err := obs("noisy", "a\xffroute=/pay"); err != nil {
		t.Fatalf("an existing series at its metric's cap: %v", err)
	}
	for _, k := range []string{"a", "b"} {
		if err := obs("quiet", k); err != nil {
			t.Fatalf("another metric: %v", err)
		}
	}
	// A refused event of a new series leaves no place taken: the cap still admits one more.
	if err := s.ObserveAt(t0, Event{TS: t0 - 3_600_000, Metric: "other", Key: "late", Value: 1}); !errors.Is(err, ErrLate) {
		t.Fatalf("a late event: %v", err)
	}
	for _, k := range []string{"x", "y"} {
		if err := obs("other", k); err != nil {
			t.Fatalf("other after a refused event: %v", err)
		}
	}
	got := map[string]uint64{}
	s.EachMetricRefused(func(m string, n uint64) { got[m] = n })
	if len(got) != 1 || got["noisy"] != 4 || s.Stats().Refused != 4 || s.Len() != 6 {
		t.Fatalf("refused by metric %v, in all %d, %d series; want noisy 4, 6 series", got, s.Stats().Refused, s.Len())
	}
	if n := s.DropPartition(0); n != 6 {
		t.Fatalf("DropPartition dropped %d", n)
	}
	if err := obs("noisy", "c"); err != nil {
		t.Fatalf("after its series went, noisy takes a new one: %v", err)
	}
	if _, err := NewStore(StoreConfig{MaxSeriesPerMetric: -1}); err == nil {
		t.Error("a negative MaxSeriesPerMetric accepted")
	}
}

func TestObserveAllocatesNothingForExistingSeries(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	ev := Event{TS: t0, Metric: "latency_ms", Key: "tenant-42", Value: 12.5}
	_ = s.ObserveAt(t0, ev)
	vals := []float64{3, 12.5, 80, 250, 1200}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		ev.Value = vals[i%len(vals)]
		i++
		_ = s.ObserveAt(t0+int64(i%9000), ev)
	})
	if allocs != 0 {
		t.Fatalf("Observe on an existing series allocates %v per event", allocs)
	}
}

func TestConcurrentObserveAndRead(t *testing.T) {
	s := newTestStore(t, StoreConfig{Shards: 4})
	var wg sync.WaitGroup
	const writers, per = 4, 2000
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				key := []string{"a", "b", "c"}[i%3]
				_ = s.ObserveAt(t0+int64(i), Event{TS: t0 + int64(i), Metric: "m", Key: key, Value: float64(w*per + i)})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 500 {
			_, _ = s.ReadAt(t0+int64(i*4), "m", "a", time.Minute, []float64{0.5})
			_, _ = s.ReadMerged(t0+int64(i*4), "m", func(string) bool { return true }, time.Minute, []float64{0.9})
			_ = s.Keys("m", "")
		}
	}()
	wg.Wait()
	a, err := s.ReadMerged(t0+per, "m", func(string) bool { return true }, time.Minute, nil)
	if err != nil || a.Count != writers*per {
		t.Fatalf("after concurrent writes: count %d, %v; want %d", a.Count, err, writers*per)
	}
}

// A refused event leaves no trace in the store but its counter: it neither creates a series
// (an empty one would take a place under MaxSeries until the next Evict) nor changes the
// partition an existing series is dropped with.
func TestRefusedEventCreatesAndRelabelsNothing(t *testing.T) {
	s := newTestStore(t, StoreConfig{MaxSeries: 2})
	now := t0 + 10*60_000
	for i, ev := range []Event{
		{TS: t0, Metric: "m", Key: "late-1", Value: 1},                      // older than retention
		{TS: now + 60_000, Metric: "m", Key: "future-1", Value: 1},          // beyond the skew
		{TS: now, Metric: "m", Key: "nan-1", Value: math.NaN()},             // invalid value
		{TS: t0 - 1, Metric: "m", Key: "late-2", Value: 1, Count: 3},        // late again
		{TS: now + 3_600_000, Metric: "m", Key: "future-2", Value: 1},       // future again
		{TS: now, Metric: "m", Key: "inf-1", Value: math.Inf(1)},            // invalid again
		{TS: t0 - 60_000, Metric: "m", Key: "late-3", Value: 2},             // and again
		{TS: now + 20_000, Metric: "m", Key: "future-3", Value: 1},          // and again
		{TS: now, Metric: "m", Key: "nan-2", Value: math.NaN()},             // and again
		{TS: now - 300_000, Metric: "m", Key: "edge-late", Value: 1},        // first slot out of the window
		{TS: now + 20_000, Metric: "m", Key: "edge-future", Value: 1},       // first instant past the skew
		{TS: now + 10_000, Metric: "other", Key: "ok-but-at-cap", Value: 1}, // accepted: cap not yet reached
	} {
		err := s.ObserveAt(now, ev)
		if i == 11 {
			if err != nil {
				t.Fatalf("event %d: %v, want it accepted", i, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("event %d (%s) accepted, want refused", i, ev.Key)
		}
	}
	if got := s.Len(); got != 1 {
		t.Fatalf("%d series after refused events, want 1 (only the accepted one): %v", got, s.Keys("m", ""))
	}
	if err := s.ObserveAt(now, Event{TS: now, Metric: "m", Key: "kafka", Value: 1, Feed: FeedOf(3)}); err != nil {
		t.Fatalf("a new series below the cap: %v", err)
	}
	// A late event for the same series from elsewhere (POST /v1/events, partition -1) is refused
	// and must not move the series off partition 3.
	if err := s.ObserveAt(now, Event{TS: t0, Metric: "m", Key: "kafka", Value: 1}); !errors.Is(err, ErrLate) {
		t.Fatalf("late event: %v, want ErrLate", err)
	}
	if n := s.DropPartition(3); n != 1 {
		t.Fatalf("DropPartition(3) dropped %d series, want 1: a refused event relabelled it", n)
	}
	st := s.Stats()
	if st.Late != 5 || st.Future != 4 || st.Invalid != 3 {
		t.Fatalf("stats %+v, want 5 late, 4 future, 3 invalid", st)
	}
}
