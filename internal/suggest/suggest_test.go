package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"addr", "addr", 0}, {"", "abc", 3}, {"abc", "", 3},
		{"polices", "policies", 1},  // a missing letter
		{"polciies", "policies", 1}, // neighbours swapped
		{"slot", "slots", 1},        // a missing plural
		{"kitten", "sitting", 3},    // the classic
		{"max-sereis", "max-series", 1},
		{"ca", "abc", 3}, // OSA, not Damerau: no edit of a swapped pair
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	got, near := Closest("latency", []string{"cost", "tokens", "latency_ms", "bytes_sent"})
	// latency_ms is near (a prefix); the rest follow by distance, nearest first.
	if want := []string{"latency_ms", "tokens", "cost", "bytes_sent"}; !slices.Equal(got, want) || near != 1 {
		t.Errorf("Closest(latency) = %v, %d near; want %v, 1 near", got, near, want)
	}
	if _, near := Closest("bogus", []string{"addr", "brokers", "topic"}); near != 0 {
		t.Errorf("bogus is near %d flags, want none", near)
	}
	if got, near := Closest("Latency_MS", []string{"cost", "latency_ms"}); got[0] != "latency_ms" || near != 1 {
		t.Errorf("case: %v %d", got, near)
	}
}
