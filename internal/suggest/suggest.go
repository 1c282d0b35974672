// Package suggest finds the names a mistyped one was probably meant to be: the flag a user
// meant by --polices, the metric by metric=latency. It is the one edit distance of slide, so
// a flag and a metric are judged close by the same rule.
package suggest

import (
	"slices"
	"strings"
)

// Distance is the optimal-string-alignment distance of a and b in bytes: an insertion, a
// deletion, a substitution or a swap of neighbours each cost 1 (a swap is the commonest slip:
// --polciies). O(len(a)·len(b)) time, O(len(b)) memory.
func Distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Near reports whether name is close enough to candidate to suggest it: within 1 edit for a
// short candidate, 2 from 5 bytes, 3 from 10; or a prefix of it, or it of name, from 3 bytes
// (latency for latency_ms, latency_ms_p95 for latency_ms). Case is ignored.
func Near(name, candidate string) bool {
	n, c := strings.ToLower(name), strings.ToLower(candidate)
	if len(n) >= 3 && len(c) >= 3 && (strings.HasPrefix(c, n) || strings.HasPrefix(n, c)) {
		return true
	}
	return Distance(n, c) <= 1+len(c)/5
}

// Closest returns candidates ordered closest to name first (by Distance, then by name), the
// near ones (Near) before the rest, and how many are near.
func Closest(name string, candidates []string) (ordered []string, near int) {
	type cand struct {
		s    string
		near bool
		d    int
	}
	cs := make([]cand, len(candidates))
	lower := strings.ToLower(name)
	for i, c := range candidates {
		cs[i] = cand{c, Near(name, c), Distance(lower, strings.ToLower(c))}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.near != b.near:
			if a.near {
				return -1
			}
			return 1
		case a.d != b.d:
			return a.d - b.d
		}
		return strings.Compare(a.s, b.s)
	})
	ordered = make([]string, len(cs))
	for i, c := range cs {
		ordered[i] = c.s
		if c.near {
			near++
		}
	}
	return ordered, near
}
