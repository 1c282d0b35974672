package sketch

import (
	"encoding/binary"
	"math"
	"sort"
)

// Reading ranks and quantiles out of Bins, one or a union of several.

// nonZeroRange returns the first and last positions holding a non-zero
// count; c.sum must be > 0. It skips zero bytes a word at a time: a count's
// bytes are all zero exactly when the count is.
func (c *counts) nonZeroRange() (first, last int) {
	d := c.data
	i := 0
	for i+8 <= len(d) && binary.LittleEndian.Uint64(d[i:]) == 0 {
		i += 8
	}
	for i < len(d) && d[i] == 0 {
		i++
	}
	k := len(d) - 1
	for k-7 > i && binary.LittleEndian.Uint64(d[k-7:]) == 0 {
		k -= 8
	}
	for k > i && d[k] == 0 {
		k--
	}
	return i >> c.shift, k >> c.shift
}

// keyAtRank returns the bin index of the first bin whose cumulative count
// exceeds rank, as sketches-go's stores do (DenseStore.KeyAtRank). c.sum must
// be > 0.
func (c *counts) keyAtRank(rank float64) int {
	j, _ := c.scan(0, 0, RankTarget(rank))
	if j >= c.n() {
		_, j = c.nonZeroRange() // rounding: the last bin holding anything
	}
	return c.off + j
}

// RankTarget converts a rank to the integer a cumulative count must exceed:
// cum > rank <=> cum > floor(rank) for an integer cum. Negative ranks count
// as 0 (as in sketches-go) and ranks beyond uint64 saturate, since the
// float-to-integer conversion is undefined there. Readers of bins kept elsewhere (batch's
// sliding rank bins) use it to answer the ranks Quantile answers.
func RankTarget(rank float64) uint64 {
	switch {
	case !(rank > 0):
		return 0
	case rank >= 1<<64:
		return math.MaxUint64
	}
	return uint64(rank)
}

// scan moves from position j, where cum is the total of the counts before j,
// to the first position whose inclusive cumulative count exceeds target. It
// returns that position (c.n() if none) and the total before it.
func (c *counts) scan(j int, cum, target uint64) (int, uint64) {
	d := c.data
	switch c.shift {
	case 0:
		// The 5-minute read is this loop: skip 8 one-byte counts at a time,
		// summed as 4 lanes of 16 bits (SWAR), while the target lies beyond.
		for ; j+8 <= len(d); j += 8 {
			x := binary.LittleEndian.Uint64(d[j:])
			y := x&0x00ff00ff00ff00ff + x>>8&0x00ff00ff00ff00ff
			s := y * 0x0001000100010001 >> 48
			if cum+s > target {
				break
			}
			cum += s
		}
		for ; j < len(d); j++ {
			if cum+uint64(d[j]) > target {
				return j, cum
			}
			cum += uint64(d[j])
		}
	case 1:
		// 4 two-byte counts at a time, as 2 lanes of 32 bits.
		for ; 2*j+8 <= len(d); j += 4 {
			x := binary.LittleEndian.Uint64(d[2*j:])
			y := x&0x0000ffff0000ffff + x>>16&0x0000ffff0000ffff
			s := y&0xffffffff + y>>32
			if cum+s > target {
				break
			}
			cum += s
		}
		for ; 2*j+2 <= len(d); j++ {
			x := uint64(binary.LittleEndian.Uint16(d[2*j:]))
			if cum+x > target {
				return j, cum
			}
			cum += x
		}
	default:
		for n := c.n(); j < n; j++ {
			x := c.get(j)
			if cum+x > target {
				return j, cum
			}
			cum += x
		}
	}
	return c.n(), cum
}

// Quantile returns the value at quantile q in [0, 1] with DDSketch rank
// semantics: rank = q*(count-1), the answer is the representative value
// ix.Value of the first bin whose cumulative count exceeds rank (identical to
// sketches-go's GetValueAtQuantile for the same mapping). It returns NaN when
// b is empty or q is outside [0, 1]. The result is within
// ix.RelativeAccuracy of an exact quantile of the recorded values; callers
// that track the exact min and max clamp the result into [min, max]
// (a sketch's p100 is a bin's value, not the exact max). O(bins in use), no
// allocation.
func (b *Bins) Quantile(ix Indexer, q float64) float64 {
	count := b.Count()
	if count == 0 || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	rank := float64(q * float64(count-1)) // explicit conversion: no FMA, as sketches-go
	var negCount float64
	if b.neg != nil {
		negCount = float64(b.neg.sum)
	}
	switch {
	case rank < negCount:
		return -ix.Value(b.neg.keyAtRank(negCount - 1 - rank))
	case rank < float64(b.zero)+negCount:
		return 0
	}
	return ix.Value(b.pos.keyAtRank(rank - float64(b.zero) - negCount))
}

// Quantiles appends to dst the value at each quantile of qs (NaN for an
// invalid q or an empty b) and returns the extended slice. When qs is sorted
// ascending, positive-range quantiles are answered in a single scan. It
// allocates only if dst lacks capacity.
func (b *Bins) Quantiles(ix Indexer, qs []float64, dst []float64) []float64 {
	count := b.Count()
	if count == 0 || len(qs) < 2 || !sort.Float64sAreSorted(qs) {
		for _, q := range qs {
			dst = append(dst, b.Quantile(ix, q))
		}
		return dst
	}
	var negCount float64
	if b.neg != nil {
		negCount = float64(b.neg.sum)
	}
	below := negCount + float64(b.zero)
	c := &b.pos
	j, n := 0, c.n()
	var cum uint64
	for _, q := range qs {
		if !(q >= 0 && q <= 1) {
			dst = append(dst, math.NaN())
			continue
		}
		rank := float64(q * float64(count-1))
		if rank < below {
			dst = append(dst, b.Quantile(ix, q))
			continue
		}
		// Ranks are non-decreasing: continue the scan where the previous
		// quantile stopped.
		// Same float operations as Quantile, so both agree at any magnitude.
		j, cum = c.scan(j, cum, RankTarget(rank-float64(b.zero)-negCount))
		if j >= n {
			_, last := c.nonZeroRange()
			dst = append(dst, ix.Value(c.off+last))
			j, cum = 0, 0
			continue
		}
		dst = append(dst, ix.Value(c.off+j))
	}
	return dst
}

// Quantile returns the value at quantile q of the union of bins (nil entries
// are skipped), with the semantics of Bins.Quantile, without allocating or
// modifying them. It sums the bins chunk by chunk into a buffer on the stack
// and scans the sums: O(total bins of the arguments). Use it for windows
// shorter than the retention, where no aggregate is kept; for several
// quantiles use QuantilesOf, which makes one pass.
func Quantile(ix Indexer, q float64, bins ...*Bins) float64 {
	var one [1]float64
	return QuantilesOf(ix, []float64{q}, one[:0], bins...)[0]
}

// QuantilesOf appends to dst the value at each quantile of qs for the union
// of bins (nil entries skipped), as Quantile does, and returns the extended
// slice. When qs is sorted ascending, the positive range is summed and
// scanned once for all of them. It allocates only if dst lacks capacity.
func QuantilesOf(ix Indexer, qs []float64, dst []float64, bins ...*Bins) []float64 {
	var count, zero, negCount uint64
	for _, b := range bins {
		if b == nil {
			continue
		}
		count += b.Count()
		zero += b.zero
		if b.neg != nil {
			negCount += b.neg.sum
		}
	}
	sorted := sort.Float64sAreSorted(qs)
	u := unionScan{bins: bins}
	for _, q := range qs {
		if count == 0 || !(q >= 0 && q <= 1) {
			dst = append(dst, math.NaN())
			continue
		}
		rank := float64(q * float64(count-1))
		switch {
		case rank < float64(negCount):
			n := unionScan{bins: bins, negative: true}
			dst = append(dst, -ix.Value(n.keyAtRank(float64(negCount)-1-rank)))
			continue
		case rank < float64(zero+negCount):
			dst = append(dst, 0)
			continue
		}
		if !sorted {
			u = unionScan{bins: bins} // restart: ranks may go backwards
		}
		dst = append(dst, ix.Value(u.keyAtRank(rank-float64(zero)-float64(negCount))))
	}
	return dst
}

// unionChunk is how many bin indices unionScan sums at a time (8 KiB of
// stack).
const unionChunk = 1024

// unionScan finds ranks in the union of one side of several Bins. Successive
// keyAtRank calls with non-decreasing ranks continue where the last stopped.
type unionScan struct {
	bins     []*Bins
	negative bool
	started  bool
	lo, hi   int    // union index range
	start    int    // first index of the current chunk
	j        int    // position in the current chunk
	cum      uint64 // total of the counts before start+j
	last     int    // last index seen holding a count
	acc      [unionChunk]uint64
}

func (u *unionScan) side(b *Bins) *counts {
	if b == nil {
		return nil
	}
	if u.negative {
		return b.neg
	}
	return &b.pos
}

// keyAtRank is counts.keyAtRank over the union.
func (u *unionScan) keyAtRank(rank float64) int {
	if !u.started {
		u.started = true
		u.lo, u.hi = math.MaxInt, math.MinInt
		for _, b := range u.bins {
			if c := u.side(b); c != nil && c.sum > 0 {
				first, last := c.nonZeroRange()
				u.lo = min(u.lo, c.off+first)
				u.hi = max(u.hi, c.off+last)
			}
		}
		if u.lo > u.hi {
			return 0
		}
		u.last = u.lo
		u.fill(u.lo)
	}
	target := RankTarget(rank)
	for {
		n := min(unionChunk, u.hi-u.start+1)
		for ; u.j < n; u.j++ {
			x := u.acc[u.j]
			if x == 0 {
				continue
			}
			u.last = u.start + u.j
			if u.cum+x > target {
				return u.start + u.j
			}
			u.cum += x
		}
		if u.start+n > u.hi {
			return u.last // rounding: the last bin holding anything
		}
		u.fill(u.start + n)
	}
}

// fill sums the counts of every Bins for indices [start, start+unionChunk).
func (u *unionScan) fill(start int) {
	u.start, u.j = start, 0
	end := min(start+unionChunk-1, u.hi)
	acc := u.acc[:end-start+1]
	clear(acc)
	for _, b := range u.bins {
		c := u.side(b)
		if c == nil || c.sum == 0 {
			continue
		}
		from, to := max(start, c.off), min(end, c.off+c.n()-1)
		if from > to {
			continue
		}
		c.addTo(acc[from-start:to-start+1], from-c.off)
	}
}

// addTo adds the counts at positions j, j+1, ... into dst, one per element.
func (c *counts) addTo(dst []uint64, j int) {
	switch c.shift {
	case 0:
		src := c.data[j : j+len(dst)]
		for i, x := range src {
			dst[i] += uint64(x)
		}
	case 1:
		src := c.data[2*j : 2*(j+len(dst))]
		for i := range dst {
			dst[i] += uint64(binary.LittleEndian.Uint16(src[2*i:]))
		}
	default:
		for i := range dst {
			dst[i] += c.get(j + i)
		}
	}
}
