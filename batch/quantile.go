package batch

import (
	"math"

	"github.com/slide-metrics/slide/sketch"
)

// rankBins counts a sliding window's values by sketch bin, exactly as sketch.Bins does (the
// same Indexer, the same bins, the same answer as Bins.Quantile), for the one access pattern
// of a batch job: add the newcomer, remove the leavers, read one quantile, every row.
// Bins.Quantile scans the bins from the lowest, O(bins in use) per read (about 580 for cents
// at 1%); rankBins keeps, on each side (negative and positive values, zeros apart), a cursor on
// the bin of the last answer and the count below it, so a read moves the cursor by the few
// bins the quantile moved.
//
// A value's key (what a ring keeps to remove it later) is its Indexer index shifted left by 2,
// or'ed with its side: 1 negative, 2 positive, 3 zero; 0 (noKey) is a value Bins ignores.
type rankBins struct {
	ix       sketch.Indexer
	minIdx   float64
	neg, pos rankSide // neg holds the bins of −v
	zero     int64
	// The last answer's key and value (Indexer.Value inverts the mapping: a cube root and an
	// exponential): the answer's bin changes far less often than every row.
	lastKey int
	lastVal float64
}

// noKey marks a value that is not counted (±Inf, NaN: Bins ignores them).
const noKey = 0

const (
	sideNeg  = 1
	sidePos  = 2
	sideZero = 3
)

func newRankBins(ix sketch.Indexer) *rankBins {
	return &rankBins{ix: ix, minIdx: ix.MinIndexableValue(), lastKey: noKey}
}

// key returns v's key.
func (r *rankBins) key(v float64) int {
	switch {
	case v > r.minIdx:
		if v > math.MaxFloat64 {
			return noKey
		}
		return clampIndex(r.ix.Index(v))<<2 | sidePos
	case v < -r.minIdx:
		if v < -math.MaxFloat64 {
			return noKey
		}
		return clampIndex(r.ix.Index(-v))<<2 | sideNeg
	case v == v:
		return sideZero
	}
	return noKey
}

// clampIndex keeps an index where a key fits an int32 (no Indexer comes near: DDSketch at
// 1% spans ±36k).
func clampIndex(i int) int { return min(max(i, -1<<28), 1<<28) }

// add counts a value of key k d more times: +1 as it enters a window, −1 as it leaves.
func (r *rankBins) add(k int, d int64) {
	switch k & 3 {
	case sidePos:
		r.pos.add(k>>2, d)
	case sideNeg:
		r.neg.add(k>>2, d)
	case sideZero:
		r.zero += d
	}
}

// quantile returns what sketch.Bins.Quantile returns for the same values.
func (r *rankBins) quantile(q float64) float64 {
	count := r.neg.total + r.zero + r.pos.total
	if count == 0 || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	rank := float64(q * float64(count-1)) // as Bins.Quantile, operation for operation
	negCount := float64(r.neg.total)
	var k int
	switch {
	case rank < negCount:
		k = r.neg.find(sketch.RankTarget(negCount-1-rank))<<2 | sideNeg
	case rank < float64(r.zero)+negCount:
		return 0
	default:
		k = r.pos.find(sketch.RankTarget(rank-float64(r.zero)-negCount))<<2 | sidePos
	}
	if k != r.lastKey {
		r.lastKey, r.lastVal = k, r.ix.Value(k>>2)
		if k&3 == sideNeg {
			r.lastVal = -r.lastVal
		}
	}
	return r.lastVal
}

// rankSide is one side's bins: a dense run of counts for indexes off… and a cursor.
type rankSide struct {
	counts []int64
	off    int // index of counts[0]
	cur    int // cursor, into counts
	below  int64
	total  int64
}

// add counts index i d more times (a removal, d < 0, is of an index added before, so only
// an addition grows counts).
func (s *rankSide) add(i int, d int64) {
	j := i - s.off
	if j < 0 || j >= len(s.counts) {
		j = s.cover(i)
	}
	s.counts[j] += d
	s.total += d
	if j < s.cur {
		s.below += d
	}
}

// cover grows counts to hold index i and returns its position.
func (s *rankSide) cover(i int) int {
	if s.counts == nil {
		s.counts, s.off, s.cur = make([]int64, 64), i-32, 32
		return 32
	}
	lo, hi := min(i, s.off), max(i, s.off+len(s.counts)-1)
	n := max(2*len(s.counts), hi-lo+1+32)
	newOff := lo // room on the side that grew
	if i < s.off {
		newOff = hi - n + 1
	}
	counts := make([]int64, n)
	copy(counts[s.off-newOff:], s.counts)
	s.cur += s.off - newOff
	s.counts, s.off = counts, newOff
	return i - s.off
}

// find returns the index of the first bin whose cumulative count exceeds t (the last bin
// holding anything when t is past the total, as Bins' keyAtRank), moving the cursor there.
func (s *rankSide) find(t uint64) int {
	if s.total <= 0 {
		return s.off + s.cur // not reached: quantile asks a side only for a rank it holds
	}
	if t >= uint64(s.total) {
		t = uint64(s.total) - 1
	}
	p := int64(t)
	for s.below > p {
		s.cur--
		s.below -= s.counts[s.cur]
	}
	for s.below+s.counts[s.cur] <= p {
		s.below += s.counts[s.cur]
		s.cur++
	}
	return s.off + s.cur
}
