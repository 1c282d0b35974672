package window

// Listing the store: the keys of a metric, the metrics, and the series of each.

import (
	"cmp"
	"slices"
	"strings"
)

// Keys lists the keys of metric's series that start with prefix, sorted.
func (s *Store) Keys(metric, prefix string) []string {
	var out []string
	s.each(func(se *series) {
		if se.metric == metric && strings.HasPrefix(se.key, prefix) {
			out = append(out, se.key)
		}
	})
	sortKeys(out)
	return out
}

// sortKeys sorts keys as slices.Sort does. Large sets are sorted by the 8 bytes after the
// prefix they all share (tenant-…), held beside each key, and by the whole key only on a
// tie: at a million series every key's bytes are a cache miss, and most comparisons then
// touch none.
func sortKeys(keys []string) {
	if len(keys) < 1024 {
		slices.Sort(keys)
		return
	}
	lcp := len(keys[0])
	for _, k := range keys[1:] {
		n := min(lcp, len(k))
		i := 0
		for i < n && k[i] == keys[0][i] {
			i++
		}
		lcp = i
	}
	type keyed struct {
		p uint64 // the 8 bytes after the shared prefix, big-endian, zero-padded: ordered as the keys
		k string
	}
	a := make([]keyed, len(keys))
	for i, k := range keys {
		var p uint64
		for j := range 8 {
			p <<= 8
			if lcp+j < len(k) {
				p |= uint64(k[lcp+j])
			}
		}
		a[i] = keyed{p, k}
	}
	slices.SortFunc(a, func(x, y keyed) int {
		if x.p != y.p {
			return cmp.Compare(x.p, y.p)
		}
		return strings.Compare(x.k, y.k)
	})
	for i := range a {
		keys[i] = a[i].k
	}
}
