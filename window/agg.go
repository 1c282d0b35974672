package window

import (
	"math"

	"github.com/slide-metrics/slide/sketch"
)

// Agg is the result of a window read over the span [From, To) (unix ms): the current slot
// and the window/slot − 1 before it. Count and Sum are exact; Min and Max are exact (0 when
// Count is 0); Quantiles are within the sketch's accuracy, clamped to [Min, Max], NaN when empty.
type Agg struct {
	From, To  int64
	Count     uint64
	Sum       float64
	Min, Max  float64
	Quantiles []float64 // one per requested quantile, in request order
	Series    int       // series merged into this answer
}

// Avg is Sum / Count, NaN when Count is 0.
func (a Agg) Avg() float64 {
	if a.Count == 0 {
		return math.NaN()
	}
	return a.Sum / float64(a.Count)
}

// RatePerSec is Count per second of the span that has elapsed at now: the current slot is
// only partly over, so the divisor is min(now, To) − From, as Prometheus' rate divides by
// the time actually covered.
//
// The span counts from its start even when the process (or the log it restored from) is
// younger: right after a fresh start a 5-minute window's rate is divided by up to 5
// minutes of which only seconds had traffic. ElapsedSec is that denominator.
func (a Agg) RatePerSec(now int64) float64 {
	end := min(now, a.To)
	if end <= a.From {
		return 0
	}
	return float64(a.Count) / (float64(end-a.From) / 1000)
}

// ElapsedSec is the part of the span [From, To) elapsed at now, in seconds: the
// denominator of RatePerSec (0 when the span has not begun).
func (a Agg) ElapsedSec(now int64) float64 {
	end := min(now, a.To)
	if end <= a.From {
		return 0
	}
	return float64(end-a.From) / 1000
}

// addPart folds a part of a window (count events summing to sum, between mn and mx) into
// the count, sum, min and max at c, s, lo and hi: an Agg, a Partial and a range read's slot
// fold alike. The caller skips parts without events.
func addPart(c *uint64, s, lo, hi *float64, count uint64, sum, mn, mx float64) {
	if *c == 0 || mn < *lo {
		*lo = mn
	}
	if *c == 0 || mx > *hi {
		*hi = mx
	}
	*c += count
	*s += sum
}

// add folds a part of a's window into a (addPart).
func (a *Agg) add(count uint64, sum, mn, mx float64) {
	addPart(&a.Count, &a.Sum, &a.Min, &a.Max, count, sum, mn, mx)
}

// readQuantiles fills a.Quantiles (allocated, len(qs)) from the window's bins b: NaN for an
// empty window, else b's quantiles clamped to [Min, Max].
func (a *Agg) readQuantiles(b *sketch.Bins, ix sketch.Indexer, qs []float64) {
	if a.Count == 0 {
		a.nanQuantiles()
		return
	}
	b.Quantiles(ix, qs, a.Quantiles[:0])
	a.clampQuantiles()
}

// nanQuantiles sets every quantile to NaN: the answer of an empty window.
func (a *Agg) nanQuantiles() {
	for i := range a.Quantiles {
		a.Quantiles[i] = math.NaN()
	}
}

func (a *Agg) clampQuantiles() {
	for i, q := range a.Quantiles {
		a.Quantiles[i] = min(max(q, a.Min), a.Max)
	}
}
