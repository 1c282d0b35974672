package batch

import (
	"bufio"
	"fmt"

	"github.com/slide-metrics/slide/window"
)

// fixedReader is a Reader that can hand out values in fixed point (CSVReader): see
// CSVReader.readFixed.
type fixedReader interface {
	readFixed(dst []int64) (n int, more bool)
}

var (
	_ fixedReader = (*CSVReader)(nil)
	_ fixedReader = (*parquetFast)(nil)
)

// fixedSum is the count-window sum (or avg) in fixed point: a ring of the last k values as
// integers and their exact sum. Adding the newcomer and subtracting the leaver is two integer
// operations; the best window is tracked by comparing exact sums, so ties are real ties. The
// ring grows from countRing0 values to k while the window fills (fill), so a group of a few
// rows costs a few; once full (n == k) it is the fixed ring of the hot loops.
type fixedSum struct {
	fx         *fixedSpec
	ring       []int64
	i, n, k    int
	s          int64
	isMax, avg bool
	found      bool
	best       int64 // sum of the best window so far
	end        int64 // its last row
}

func newFixedSum(fx *fixedSpec, k int, isMax, avg bool) *fixedSum {
	return &fixedSum{fx: fx, ring: make([]int64, min(k, countRing0)), k: k, isMax: isMax, avg: avg}
}

// fill pushes v into a window that is not full yet (n < k): nothing leaves, the values sit
// at ring[:n] and i == n.
func (f *fixedSum) fill(v int64) {
	if f.n == len(f.ring) {
		f.ring = growRing(f.ring, f.k)
	}
	f.ring[f.i] = v
	f.s += v
	if f.i++; f.i == f.k {
		f.i = 0
	}
	f.n++
}

// value is the window value of sum s: RN(s / 10^F), divided by k for avg (as countSum does).
func (f *fixedSum) value(s int64) float64 {
	v := f.fx.toFloat(s)
	if f.avg {
		v /= float64(f.k)
	}
	return v
}

// consume pushes vs (rows row0, row0+1, …) and, when series is not nil, writes the value of
// every full window.
func (f *fixedSum) consume(vs []int64, row0 int64, series *bufio.Writer, num *[]byte) error {
	k := f.k
	idx := 0
	for f.n < k && idx < len(vs) { // filling: no window yet, nothing leaves
		f.fill(vs[idx])
		idx++
		if f.n == k {
			if !f.found {
				f.found, f.best, f.end = true, f.s, row0+int64(idx-1)
			}
			if err := f.write(series, num); err != nil {
				return err
			}
		}
	}
	if idx == len(vs) {
		return nil
	}
	if series != nil {
		for t, v := range vs[idx:] {
			f.push(v)
			if (f.isMax && f.s > f.best) || (!f.isMax && f.s < f.best) {
				f.best, f.end = f.s, row0+int64(idx+t)
			}
			if err := f.write(series, num); err != nil {
				return err
			}
		}
		return nil
	}
	// The hot loop: state in registers, one load, one store, two integer operations and a
	// rarely taken branch per row.
	ring, i, s, best, end := f.ring, f.i, f.s, f.best, int64(-1)
	// One copy of the loop per direction, on purpose: no row tests isMax.
	if f.isMax {
		for t, v := range vs[idx:] {
			old := ring[i]
			ring[i] = v
			s += v - old
			if i++; i == len(ring) {
				i = 0
			}
			if s > best {
				best, end = s, int64(t)
			}
		}
	} else {
		for t, v := range vs[idx:] {
			old := ring[i]
			ring[i] = v
			s += v - old
			if i++; i == len(ring) {
				i = 0
			}
			if s < best {
				best, end = s, int64(t)
			}
		}
	}
	f.i, f.s, f.best = i, s, best
	if end >= 0 {
		f.end = row0 + int64(idx) + end
	}
	return nil
}

func (f *fixedSum) push(v int64) {
	old := f.ring[f.i]
	f.ring[f.i] = v
	f.s += v - old
	if f.i++; f.i == len(f.ring) {
		f.i = 0
	}
}

func (f *fixedSum) write(series *bufio.Writer, num *[]byte) error {
	if series == nil {
		return nil
	}
	*num = appendNumber((*num)[:0], f.value(f.s))
	*num = append(*num, '\n')
	if _, err := series.Write(*num); err != nil {
		return fmt.Errorf("writing series: %w", err)
	}
	return nil
}

// sumWindow returns a window.SumWindow holding the same values (oldest first), as the float64
// values they were parsed from, for the float path to go on with.
func (f *fixedSum) sumWindow() (*window.SumWindow, error) {
	w, err := window.NewSumWindow(f.k)
	if err != nil {
		return nil, err
	}
	k := f.k
	start := 0
	if f.n == k {
		start = f.i
	}
	for t := 0; t < f.n; t++ {
		w.Push(f.fx.toFloat(f.ring[(start+t)%k]))
	}
	return w, nil
}
