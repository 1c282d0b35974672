package window

import "strings"

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
