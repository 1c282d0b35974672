package window

import (
	"slices"
	"strings"
)

// A page of series ids (GET /v1/series, a cluster's opKeys): the first limit after a
// cursor, chosen while the series are scanned rather than by sorting them all.

// CompareSeriesIDs orders series ids by metric, then key (series string), as /v1/series lists
// them.
func CompareSeriesIDs(a, b SeriesID) int {
	if c := strings.Compare(a.Metric, b.Metric); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// SeriesPage selects, from the series ids offered to it in any order and with repeats, the
// first limit distinct ones in (metric, key) order strictly after after (when hasAfter),
// or every distinct one when limit ≤ 0. With a limit it holds at most limit ids: a
// max-heap of them (the greatest at the root, each offer past it rejected by one
// comparison) and the set of those it holds (a series two instances hold is offered
// twice). A scan of n series costs O(n log limit), with no sort of the n.
type SeriesPage struct {
	limit    int
	after    SeriesID
	hasAfter bool
	heap     []SeriesID            // limit > 0: a max-heap by CompareSeriesIDs
	in       map[SeriesID]struct{} // the ids held
}

// NewSeriesPage is an empty page of at most limit ids (every id when limit ≤ 0) strictly
// after after (from the first when nil).
func NewSeriesPage(after *SeriesID, limit int) *SeriesPage {
	k := &SeriesPage{limit: limit, in: map[SeriesID]struct{}{}}
	if after != nil {
		k.after, k.hasAfter = *after, true
	}
	if limit > 0 {
		k.heap = make([]SeriesID, 0, min(limit, 4096))
	}
	return k
}

// Offer considers the series (metric, key).
func (k *SeriesPage) Offer(metric, key string) {
	id := SeriesID{Metric: metric, Key: key}
	if k.hasAfter && CompareSeriesIDs(id, k.after) <= 0 {
		return
	}
	full := k.limit > 0 && len(k.heap) == k.limit
	if full && CompareSeriesIDs(id, k.heap[0]) >= 0 {
		return
	}
	if _, ok := k.in[id]; ok {
		return
	}
	k.in[id] = struct{}{}
	switch {
	case k.limit <= 0:
	case full:
		delete(k.in, k.heap[0])
		k.heap[0] = id
		k.down(0)
	default:
		k.heap = append(k.heap, id)
		k.up(len(k.heap) - 1)
	}
}

func (k *SeriesPage) up(i int) {
	h := k.heap
	for i > 0 {
		parent := (i - 1) / 2
		if CompareSeriesIDs(h[i], h[parent]) <= 0 {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (k *SeriesPage) down(i int) {
	h := k.heap
	for {
		big := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) && CompareSeriesIDs(h[c], h[big]) > 0 {
				big = c
			}
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// IDs returns the selection, sorted by metric then key. It ends the page: the sort undoes
// the heap, so an id offered after it may be wrongly kept or dropped.
func (k *SeriesPage) IDs() []SeriesID {
	var out []SeriesID
	if k.limit > 0 {
		out = k.heap
	} else {
		out = make([]SeriesID, 0, len(k.in))
		for id := range k.in {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, CompareSeriesIDs)
	return out
}
