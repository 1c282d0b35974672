package window

import (
	"strings"
	"time"
)

// Key patterns select series for merged reads (Store.ReadMerged): the query API's
// key=tenant-* and the usage rules' key: "*" use them.

// MatchKey reports whether s matches pattern, where '*' matches any run of bytes (also
// none and also '/') and every other byte matches itself. There is no escape: a key
// containing '*' is read as a pattern, and the pattern matches that key too.
//
// Greedy leftmost matching of the segments between stars is exact for star-only patterns,
// so a match costs O(len(pattern) × len(s)) at worst and allocates nothing.
func MatchKey(pattern, s string) bool {
	i := strings.IndexByte(pattern, '*')
	if i < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:i]) {
		return false
	}
	s, pattern = s[i:], pattern[i+1:]
	for {
		j := strings.IndexByte(pattern, '*')
		if j < 0 {
			// The last segment is anchored at the end of what the others left.
			return strings.HasSuffix(s, pattern)
		}
		seg := pattern[:j]
		k := strings.Index(s, seg)
		if k < 0 {
			return false
		}
		s, pattern = s[k+len(seg):], pattern[j+1:]
	}
}

// IsKeyPattern reports whether key is a pattern (holds a '*') rather than one series' key.
func IsKeyPattern(key string) bool { return strings.IndexByte(key, '*') >= 0 }

// KeyPatternPrefix is the literal part of pattern before its first star: every matching key
// starts with it, so listing can narrow by prefix first.
func KeyPatternPrefix(pattern string) string {
	if i := strings.IndexByte(pattern, '*'); i >= 0 {
		return pattern[:i]
	}
	return pattern
}

// ReadKey reads key, a series' key or a key pattern, over the last window at now: ReadAt of
// the one series, or ReadMerged of every series of metric the pattern matches (Agg.Series
// says how many). Every reader that takes either (the query API, usage rules) reads through
// it, so the choice is made here once. stop, when not nil, is asked once per series a
// pattern's scan compares, and once it reports true the scan matches nothing more: a reader
// whose client has gone stops the merge (the store's scans take no context). One key makes
// one lookup and never asks stop.
func (s *Store) ReadKey(now int64, metric, key string, window time.Duration, qs []float64, stop func() bool) (Agg, error) {
	if !IsKeyPattern(key) {
		return s.ReadAt(now, metric, key, window, qs)
	}
	return s.ReadMerged(now, metric, func(k string) bool { return matchUnlessStopped(key, k, stop) }, window, qs)
}

// ReadRangeKey is ReadKey for history: ReadRangeAt of one series, or ReadRangeMerged of the
// series a key pattern matches, with stop as ReadKey takes it.
func (s *Store) ReadRangeKey(now int64, metric, key string, w, step time.Duration, qs []float64, stop func() bool) ([]Agg, error) {
	if !IsKeyPattern(key) {
		return s.ReadRangeAt(now, metric, key, w, step, qs)
	}
	return s.ReadRangeMerged(now, metric, func(k string) bool { return matchUnlessStopped(key, k, stop) }, w, step, qs)
}

// matchUnlessStopped is the key filter of ReadKey's and ReadRangeKey's scans: MatchKey, and
// nothing once stop (when set) reports true. (The filters are written in place, not returned
// by a function, so they and stop stay on the caller's stack.)
func matchUnlessStopped(pattern, k string, stop func() bool) bool {
	return (stop == nil || !stop()) && MatchKey(pattern, k)
}
