package window

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestArticleWindowCounter reproduces the article's line: hits at 0, 10 s, 30 s, 59.999 s,
// 60 s and 90.001 s with a 60 s window.
func TestArticleWindowCounter(t *testing.T) {
	w, err := NewCounter(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, ts := range []int64{0, 10_000, 30_000, 59_999, 60_000, 90_001} {
		parts = append(parts, fmt.Sprintf("%gs:%d", float64(ts)/1000, w.Hit(ts)))
	}
	got := strings.Join(parts, " ")
	const want = "0s:1 10s:2 30s:3 59.999s:4 60s:4 90.001s:3"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestCounterSteps(t *testing.T) {
	c, _ := NewCounter(10 * time.Millisecond)
	if c.Span() != 10*time.Millisecond {
		t.Fatalf("Span = %v", c.Span())
	}
	steps := []struct {
		op   string // "hit", "hitN", "count"
		now  int64
		n    int
		want int
	}{
		{"count", 0, 0, 0},
		{"hit", 100, 1, 1},
		{"hitN", 100, 4, 5},  // same millisecond: one entry
		{"hit", 105, 1, 6},   // (95, 105]
		{"count", 109, 0, 6}, // (99, 109]
		{"count", 110, 0, 1}, // (100, 110]: the five hits at 100 left at exactly 100+10
		{"hit", 90, 1, 2},    // earlier than 110: treated as 110
		{"count", 114, 0, 2}, // (104, 114]: 105 and the hit stored at 110
		{"hitN", 115, 0, 1},  // n ≤ 0 records nothing, still evicts 105
		{"count", 120, 0, 0}, // the hit at 110 left at 120
		{"hitN", 121, -3, 0},
	}
	for i, s := range steps {
		var got int
		switch s.op {
		case "hit":
			got = c.Hit(s.now)
		case "hitN":
			got = c.HitN(s.now, s.n)
		default:
			got = c.Count(s.now)
		}
		if got != s.want {
			t.Fatalf("step %d %s(%d, %d) = %d, want %d", i, s.op, s.now, s.n, got, s.want)
		}
	}
	c.Reset()
	if got := c.Hit(5); got != 1 {
		t.Fatalf("after Reset, Hit(5) = %d (time may go back after Reset)", got)
	}
}

func TestCounterSpanErrors(t *testing.T) {
	for _, span := range []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond} {
		if _, err := NewCounter(span); !errors.Is(err, ErrCounterSpan) {
			t.Errorf("NewCounter(%v) err = %v, want ErrCounterSpan", span, err)
		}
	}
}

// TestCounterMatchesLog compares the coalescing ring with a plain log of timestamps (the
// article's WindowCounter) over a long run that wraps and grows the ring many times.
func TestCounterMatchesLog(t *testing.T) {
	c, _ := NewCounter(1000 * time.Millisecond)
	var log []int64
	now := int64(1_764_489_600_000)
	for i := 0; i < 20_000; i++ {
		now += int64((i * 7919) % 37) // gaps of 0–36 ms, many repeats
		log = append(log, now)
		want := 0
		for _, ts := range log {
			if ts > now-1000 {
				want++
			}
		}
		if got := c.Hit(now); got != want {
			t.Fatalf("hit %d at %d: %d, want %d", i, now, got, want)
		}
		if len(log) > 4096 {
			log = log[len(log)-2048:]
		}
	}
}

func TestCounterHitAllocatesNothing(t *testing.T) {
	c, _ := NewCounter(time.Second)
	now := int64(0)
	for ; now < 5000; now++ {
		c.Hit(now)
	}
	allocs := testing.AllocsPerRun(1000, func() { c.Hit(now); now++ })
	if allocs != 0 {
		t.Fatalf("Hit: %v allocs, want 0", allocs)
	}
}
