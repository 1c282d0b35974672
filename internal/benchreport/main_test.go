package main

import (
	"io"
	"strings"
	"testing"
)

// TestFixedGoal: a goal with a fixed anchor holds ours against the number, not against a
// benchmark, and says so in its row; a missing benchmark stays "not measured".
func TestFixedGoal(t *testing.T) {
	out := `BenchmarkDecode/ours-2   	 1000	 70.1 ns/op	 1070 MB/s	 1100 cpu_MB/s	 0 B/op	 0 allocs/op
BenchmarkDecode/ours-2   	 1000	 90.3 ns/op	 830 MB/s	 900 cpu_MB/s	 0 B/op	 0 allocs/op
BenchmarkDecode/ours-2   	 1000	 72.0 ns/op	 1040 MB/s	 1050 cpu_MB/s	 0 B/op	 0 allocs/op
`
	res, _, err := parse(strings.NewReader(out), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g := goal{issue: "#19", what: "decoding", ours: "BenchmarkDecode/ours", unit: "cpu_MB/s", higherIsBetter: true, fixed: 1000, bound: 1, want: "≥ 1 GB/s"}
	line, failed := g.row(res)
	if failed || line != "| #19 | decoding | 1050 cpu_MB/s | 1000 cpu_MB/s (fixed) | 1.05× | ≥ 1 GB/s | yes |" {
		t.Errorf("median 1050 against 1000: %q failed=%v", line, failed)
	}
	g.fixed = 1100
	if line, failed := g.row(res); !failed || !strings.HasSuffix(line, "| 0.955× | ≥ 1 GB/s | **no** |") {
		t.Errorf("median 1050 against 1100: %q failed=%v", line, failed)
	}
	g.ours = "BenchmarkMissing/ours"
	if line, failed := g.row(res); failed || !strings.HasSuffix(line, "| not measured |") {
		t.Errorf("missing benchmark: %q failed=%v", line, failed)
	}
	// A ratio goal is unchanged: ours ÷ the anchor benchmark.
	r := goal{issue: "#4", what: "decoding", ours: "BenchmarkDecode/ours", anchor: "BenchmarkDecode/ours", bound: 0.2, want: "≥ 5×"}
	if line, failed := r.row(res); !failed || !strings.Contains(line, "| 72.00 ns/op | 72.00 ns/op | 1.00× |") {
		t.Errorf("ratio goal: %q failed=%v", line, failed)
	}
}

// TestPlusGoal: a cost goal with an allowance holds while ours ≤ bound × anchor + plus.
func TestPlusGoal(t *testing.T) {
	out := `BenchmarkHop/ours-2   	 1000	 90 ns/op	 1300 p99_us
BenchmarkHop/anchor-2   	 1000	 40 ns/op	 200 p99_us
`
	res, _, err := parse(strings.NewReader(out), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g := goal{issue: "#30", what: "hop", ours: "BenchmarkHop/ours", anchor: "BenchmarkHop/anchor", unit: "p99_us", bound: 2, plus: 1000, want: "≤ 2× + 1 ms"}
	if line, failed := g.row(res); failed || !strings.HasSuffix(line, "| 6.50× | ≤ 2× + 1 ms | yes |") {
		t.Errorf("1300 against 2 × 200 + 1000: %q failed=%v", line, failed)
	}
	g.plus = 800
	if line, failed := g.row(res); !failed || !strings.HasSuffix(line, "| **no** |") {
		t.Errorf("1300 against 2 × 200 + 800: %q failed=%v", line, failed)
	}
}

// TestGoalsWellFormed: every goal names its benchmarks and either an anchor or a fixed figure.
func TestGoalsWellFormed(t *testing.T) {
	for _, g := range goals {
		if g.ours == "" || (g.anchor == "") == (g.fixed == 0) {
			t.Errorf("goal %s %q: ours %q, anchor %q, fixed %v: want ours and exactly one of anchor and fixed", g.issue, g.what, g.ours, g.anchor, g.fixed)
		}
	}
}
