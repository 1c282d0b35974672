package window

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// aggEqual compares two answers field by field; quantiles must be bit-identical (both are
// the same union of the same bins), NaN equal to NaN.
// sumTol is the relative tolerance on sums: a merged range adds per-slot sums across series,
// ReadMerged per-series sums across slots, and float addition is not associative.
func aggEqual(a, b Agg, sumTol float64) bool {
	if a.From != b.From || a.To != b.To || a.Count != b.Count || math.Abs(a.Sum-b.Sum) > sumTol*math.Abs(b.Sum) || a.Series != b.Series {
		return false
	}
	if a.Count > 0 && (a.Min != b.Min || a.Max != b.Max) {
		return false
	}
	if len(a.Quantiles) != len(b.Quantiles) {
		return false
	}
	for i := range a.Quantiles {
		x, y := a.Quantiles[i], b.Quantiles[i]
		if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
			return false
		}
	}
	return true
}

// TestReadRangeEqualsReadAtEachSlot drives three series through 50 slots of a 30-slot
// ring (with empty slots), remembers Read(w) and ReadMerged(w) at the end of every slot,
// and checks that one ReadRange at the end returns exactly those answers for every window
// and step shape, and the exact oracle's count, sum, min, max and quantiles (within 1%).
func TestReadRangeEqualsReadAtEachSlot(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	rng := rand.New(rand.NewPCG(15, 1))
	const slots = 50
	qs := []float64{0.5, 0.95, 0.99}
	shapes := []struct{ w, step time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{time.Minute, 10 * time.Second},
		{time.Minute, 30 * time.Second},
		{20 * time.Second, time.Minute},
		{5 * time.Minute, 10 * time.Second},
	}
	type seen struct{ one, merged Agg }
	at := map[int]map[int64]seen{} // shape → slot index → answers when that slot was current
	var evs []Event
	keys := []string{"a", "b", "c"}
	for j := int64(0); j < slots; j++ {
		lo := t0 + j*10_000
		if j%7 != 3 { // some slots stay empty
			for i := 0; i < 200; i++ {
				ts := lo + rng.Int64N(10_000)
				ev := Event{TS: ts, Metric: "latency_ms", Key: keys[rng.IntN(3)], Value: math.Exp(rng.NormFloat64()) * 50}
				if err := s.ObserveAt(ts, ev); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
		}
		end := lo + 9_999
		for si, sh := range shapes {
			one, err := s.ReadAt(end, "latency_ms", "a", sh.w, qs)
			if err != nil {
				t.Fatal(err)
			}
			merged, err := s.ReadMerged(end, "latency_ms", func(string) bool { return true }, sh.w, qs)
			if err != nil {
				t.Fatal(err)
			}
			if at[si] == nil {
				at[si] = map[int64]seen{}
			}
			at[si][j] = seen{one, merged}
		}
	}
	now := t0 + slots*10_000 - 1 // last ms of the last slot
	var o oracle
	for si, sh := range shapes {
		one, err := s.ReadRangeAt(now, "latency_ms", "a", sh.w, sh.step, qs)
		if err != nil {
			t.Fatal(err)
		}
		merged, err := s.ReadRangeMerged(now, "latency_ms", func(string) bool { return true }, sh.w, sh.step, qs)
		if err != nil {
			t.Fatal(err)
		}
		k, st := int64(sh.w/(10*time.Second)), int64(sh.step/(10*time.Second))
		wantPoints := int((30-k)/st + 1)
		if len(one) != wantPoints || len(merged) != wantPoints {
			t.Fatalf("w=%v step=%v: %d and %d points, want %d", sh.w, sh.step, len(one), len(merged), wantPoints)
		}
		for i := range one {
			j := int64(slots-1) - int64(len(one)-1-i)*st
			want := at[si][j]
			if !aggEqual(one[i], want.one, 0) {
				t.Errorf("w=%v step=%v point %d (slot %d): range %+v, read %+v", sh.w, sh.step, i, j, one[i], want.one)
			}
			if !aggEqual(merged[i], want.merged, 1e-12) {
				t.Errorf("w=%v step=%v point %d (slot %d): merged range %+v, read %+v", sh.w, sh.step, i, j, merged[i], want.merged)
			}
			count, sum, lo, hi, sorted := o.exact(merged[i].From, merged[i].To, evs)
			if merged[i].Count != count || math.Abs(merged[i].Sum-sum) > 1e-9*sum || (count > 0 && (merged[i].Min != lo || merged[i].Max != hi)) {
				t.Errorf("point %d: count %d sum %v min %v max %v, oracle %d %v %v %v", i, merged[i].Count, merged[i].Sum, merged[i].Min, merged[i].Max, count, sum, lo, hi)
			}
			for qi, q := range qs {
				if count == 0 {
					if !math.IsNaN(merged[i].Quantiles[qi]) {
						t.Errorf("point %d: empty window quantile %v", i, merged[i].Quantiles[qi])
					}
					continue
				}
				ex := exactQuantile(sorted, q)
				if got := merged[i].Quantiles[qi]; math.Abs(got-ex) > 0.0101*ex {
					t.Errorf("point %d q%v: %v, exact %v", i, q, got, ex)
				}
			}
		}
	}
}

func TestReadRangeErrors(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	now := t0
	if err := s.ObserveAt(now, Event{TS: now, Metric: "m", Key: "k", Value: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w, step time.Duration
		want    error
	}{
		{7 * time.Second, 10 * time.Second, ErrBadWindow},
		{10 * time.Second, 15 * time.Second, ErrBadStep},
		{10 * time.Second, 0, ErrBadStep},
		{time.Hour, 10 * time.Second, ErrBadWindow},
	} {
		if _, err := s.ReadRangeAt(now, "m", "k", c.w, c.step, nil); !errors.Is(err, c.want) {
			t.Errorf("w=%v step=%v: %v, want %v", c.w, c.step, err, c.want)
		}
	}
	if _, err := s.ReadRangeAt(now, "m", "k", 10*time.Second, 10*time.Second, []float64{2}); !errors.Is(err, ErrBadQuantile) {
		t.Errorf("q=2: %v", err)
	}
	if _, err := s.ReadRangeAt(now, "m", "nobody", 10*time.Second, 10*time.Second, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown series: %v", err)
	}
	if _, err := s.ReadRangeMerged(now, "m", func(string) bool { return false }, 10*time.Second, 10*time.Second, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("no match: %v", err)
	}
}
