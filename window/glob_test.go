package window

import (
	"strings"
	"testing"
)

func TestMatchKey(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"tenant-42", "tenant-42", true},
		{"tenant-42", "tenant-421", false},
		{"*", "", true},
		{"*", "anything/at all", true},
		{"tenant-*", "tenant-", true},
		{"tenant-*", "tenant-7", true},
		{"tenant-*", "tenan-7", false},
		{"*-eu", "tenant-eu", true},
		{"*-eu", "tenant-eu-2", false},
		{"t*n*t", "tenant", true},
		{"a*a*a", "aa", false},
		{"a*a*a", "aaa", true},
		{"a*b*c", "abcbc", true},
		{"a*b*c", "acb", false},
		{"**", "x", true},
		{"eu/*/api", "eu/tenant-1/api", true},
		{"eu/*/api", "eu/tenant-1/web", false},
	} {
		if got := MatchKey(c.pattern, c.s); got != c.want {
			t.Errorf("MatchKey(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// globDP is the reference semantics over bytes, by dynamic programming: m[i][j] says
// whether pattern[:i] matches s[:j].
func globDP(pattern, s string) bool {
	m := make([][]bool, len(pattern)+1)
	for i := range m {
		m[i] = make([]bool, len(s)+1)
	}
	m[0][0] = true
	for i := 1; i <= len(pattern); i++ {
		for j := 0; j <= len(s); j++ {
			if pattern[i-1] == '*' {
				m[i][j] = m[i-1][j] || (j > 0 && m[i][j-1])
			} else {
				m[i][j] = j > 0 && m[i-1][j-1] && pattern[i-1] == s[j-1]
			}
		}
	}
	return m[len(pattern)][len(s)]
}

func FuzzMatchKey(f *testing.F) {
	for _, s := range [][2]string{{"tenant-*", "tenant-42"}, {"*-eu", "x-eu"}, {"a*b*c", "abcbc"}, {"*", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		got := MatchKey(pattern, s)
		if want := globDP(pattern, s); got != want {
			t.Fatalf("MatchKey(%q, %q) = %v, reference says %v", pattern, s, got, want)
		}
		if got && !strings.HasPrefix(s, KeyPatternPrefix(pattern)) {
			t.Fatalf("%q matches %q but lacks its prefix %q", s, pattern, KeyPatternPrefix(pattern))
		}
	})
}
