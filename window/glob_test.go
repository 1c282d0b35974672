package window

import (
	"fmt"
	"strings"
	"testing"
	"time"
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

// TestReadKey: one key is ReadAt (one lookup, stop never asked), a pattern is ReadMerged of
// the series it matches, and a stop that says so ends the scan; ReadRangeKey alike.
func TestReadKey(t *testing.T) {
	s, err := NewStore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"tenant-1", "tenant-2", "tenant-3", "other"} {
		if err := s.ObserveAt(t0, Event{TS: t0, Metric: "m", Key: key, Value: float64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	qs := []float64{0.5}
	asked := 0
	count := func() bool { asked++; return false }
	one, err := s.ReadKey(t0, "m", "tenant-2", time.Minute, qs, count)
	want, _ := s.ReadAt(t0, "m", "tenant-2", time.Minute, qs)
	if err != nil || !sameText(one, want) || asked != 0 {
		t.Errorf("one key: %+v, %v (stop asked %d times), want ReadAt's %+v", one, err, asked, want)
	}
	all, err := s.ReadKey(t0, "m", "tenant-*", time.Minute, qs, count)
	want, _ = s.ReadMerged(t0, "m", func(k string) bool { return MatchKey("tenant-*", k) }, time.Minute, qs)
	if err != nil || !sameText(all, want) || all.Series != 3 || asked != 4 {
		t.Errorf("pattern: %+v, %v (stop asked %d times), want ReadMerged's %+v over 3 series, stop asked once per series", all, err, asked, want)
	}
	if _, err := s.ReadKey(t0, "m", "tenant-*", time.Minute, qs, func() bool { return true }); err != ErrNotFound {
		t.Errorf("stopped at once: %v, want ErrNotFound (nothing matched)", err)
	}
	if _, err := s.ReadKey(t0, "m", "nobody", time.Minute, qs, nil); err != ErrNotFound {
		t.Errorf("unknown key: %v", err)
	}
	// The choice costs no allocation: the filter and stop stay on the caller's stack (the
	// query API's scan then does too).
	one0 := testing.AllocsPerRun(100, func() { _, _ = s.ReadAt(t0, "m", "tenant-2", time.Minute, qs) })
	one1 := testing.AllocsPerRun(100, func() {
		seen := 0 // a stop with state, as the query API's scan
		_, _ = s.ReadKey(t0, "m", "tenant-2", time.Minute, qs, func() bool { seen++; return false })
	})
	all0 := testing.AllocsPerRun(100, func() {
		_, _ = s.ReadMerged(t0, "m", func(k string) bool { return MatchKey("tenant-*", k) }, time.Minute, qs)
	})
	all1 := testing.AllocsPerRun(100, func() {
		seen := 0
		_, _ = s.ReadKey(t0, "m", "tenant-*", time.Minute, qs, func() bool { seen++; return false })
	})
	if one1 != one0 || all1 != all0 {
		t.Errorf("ReadKey allocates %v (one key) and %v (pattern), ReadAt %v and ReadMerged %v", one1, all1, one0, all0)
	}
	pts, err := s.ReadRangeKey(t0, "m", "tenant-*", time.Minute, 10*time.Second, qs, nil)
	wantPts, _ := s.ReadRangeMerged(t0, "m", func(k string) bool { return MatchKey("tenant-*", k) }, time.Minute, 10*time.Second, qs)
	if err != nil || !sameText(pts, wantPts) {
		t.Errorf("range of a pattern: %v, %v, want %v", pts, err, wantPts)
	}
	pts, err = s.ReadRangeKey(t0, "m", "other", time.Minute, 10*time.Second, qs, nil)
	wantPts, _ = s.ReadRangeAt(t0, "m", "other", time.Minute, 10*time.Second, qs)
	if err != nil || !sameText(pts, wantPts) {
		t.Errorf("range of one key: %v, %v, want %v", pts, err, wantPts)
	}
}

// sameText compares answers as printed: their NaN quantiles are then equal.
func sameText(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
