package promapi

import "slices"

// firstN gathers a listing's items over its match[] sets and keeps only the n smallest
// distinct ones, which is all the answer shows: each match[] set can select the whole store,
// and gathering every set's items before the cut held sets × series of them at once (10
// copies of one broad match[] over 200,000 series took 0.75 GB). Items are sorted, compacted
// and cut whenever 2n are held, so at most 2n are, for O(log n) a item.
type firstN[T any] struct {
	n     int // at least 1
	cmp   func(a, b T) int
	items []T
	cut   bool // distinct items past the n smallest were dropped
}

func (f *firstN[T]) add(x T) {
	f.items = append(f.items, x)
	if len(f.items) >= 2*f.n {
		f.shrink()
	}
}

func (f *firstN[T]) shrink() {
	slices.SortFunc(f.items, f.cmp)
	f.items = slices.CompactFunc(f.items, func(a, b T) bool { return f.cmp(a, b) == 0 })
	if len(f.items) > f.n {
		clear(f.items[f.n:]) // let the dropped items go
		f.items, f.cut = f.items[:f.n], true
	}
}

// result is the n smallest distinct items, sorted, and the warning Prometheus gives when
// there were more.
func (f *firstN[T]) result() ([]T, []string) {
	f.shrink()
	if f.cut {
		return f.items, []string{"results truncated due to limit"}
	}
	return f.items, nil
}
