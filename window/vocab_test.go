package window

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestParseQuantile and TestFormatDuration were query's; the vocabulary moved here.
func TestParseQuantile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.95", 0.95, true}, {"0", 0, true}, {"1", 1, true}, {".5", 0.5, true},
		{"p95", 0.95, true}, {"P99", 0.99, true}, {"p50", 0.5, true}, {"p5", 0.05, true},
		{"p999", 0.999, true}, {"p9999", 0.9999, true}, {"p99.9", 0.999, true}, {"p99.99", 0.9999, true},
		{"p100", 1, true}, {"p100.0", 1, true}, {"p0", 0, true}, {"p5.5", 0.055, true},
		{"1.5", 0, false}, {"-0.1", 0, false}, {"NaN", 0, false}, {"p", 0, false}, {"p101.5", 0, false},
		{"p-5", 0, false}, {"p9x", 0, false}, {"p99.", 0, false}, {"p.9", 0, false}, {"", 0, false}, {"Inf", 0, false},
	} {
		got, ok := ParseQuantile(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseQuantile(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Minute: "5m", time.Hour: "1h", 90 * time.Second: "90s", 90 * time.Minute: "90m",
		1500 * time.Millisecond: "1500ms", 10 * time.Second: "10s", 0: "0s", 1500 * time.Microsecond: "1.5ms",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseStatRoundTrip(t *testing.T) {
	for in, want := range map[string]Stat{
		"count": {Kind: StatCount}, " SUM ": {Kind: StatSum}, "avg": {Kind: StatAvg}, "min": {Kind: StatMin},
		"max": {Kind: StatMax}, "rate": {Kind: StatRate}, "p95": {Kind: StatQuantile, Q: 0.95},
		"0.999": {Kind: StatQuantile, Q: 0.999}, "P99.9": {Kind: StatQuantile, Q: 0.999},
	} {
		got, ok := ParseStat(in)
		if !ok || got != want || !got.Valid() {
			t.Errorf("ParseStat(%q) = %v, %v; want %v", in, got, ok, want)
		}
		if back, ok := ParseStat(got.String()); !ok || back != got {
			t.Errorf("ParseStat(%q.String() = %q) = %v, %v", in, got.String(), back, ok)
		}
	}
	for _, bad := range []string{"", "median", "p101.5", "1.5", "counts"} {
		if s, ok := ParseStat(bad); ok {
			t.Errorf("ParseStat(%q) = %v, accepted", bad, s)
		}
	}
	if (Stat{}).Valid() || (Stat{Kind: StatQuantile, Q: 2}).Valid() {
		t.Error("zero Stat or quantile 2 reported valid")
	}
}

func TestStatValueExtremesAndEmpty(t *testing.T) {
	a := Agg{Count: 4, Sum: 10, Min: 1, Max: 4, Quantiles: []float64{1.01, 3.9, 3.98}}
	for _, c := range []struct {
		s    Stat
		qi   int
		want float64
	}{
		{Stat{Kind: StatCount}, 0, 4}, {Stat{Kind: StatSum}, 0, 10}, {Stat{Kind: StatAvg}, 0, 2.5},
		{Stat{Kind: StatMin}, 0, 1}, {Stat{Kind: StatMax}, 0, 4},
		{Stat{Kind: StatQuantile, Q: 0}, 0, 1},     // exact min, not the sketch's 1.01
		{Stat{Kind: StatQuantile, Q: 1}, 2, 4},     // exact max, not 3.98
		{Stat{Kind: StatQuantile, Q: 0.9}, 1, 3.9}, // the sketch's estimate
	} {
		if got := c.s.Value(a, 0, c.qi); got != c.want {
			t.Errorf("%v.Value = %v, want %v", c.s, got, c.want)
		}
	}
	empty := Agg{Quantiles: []float64{0}}
	for _, s := range []Stat{{Kind: StatMin}, {Kind: StatMax}, {Kind: StatAvg}, {Kind: StatQuantile, Q: 0.5}} {
		if v := s.Value(empty, 0, 0); !math.IsNaN(v) {
			t.Errorf("%v of an empty window = %v, want NaN", s, v)
		}
	}
}

func TestCheckWindowMessages(t *testing.T) {
	rc := RingConfig{Slot: 10 * time.Second, Slots: 30}
	for w, msg := range map[time.Duration]string{
		7 * time.Second: `7s is not a multiple of the slot width 10s of metric "m"`,
		6 * time.Minute: `6m is longer than the retention 5m of metric "m"`,
		0:               "0s must be positive",
	} {
		err := rc.CheckWindow(w, "", "m")
		if err == nil || err.Error() != msg || !errors.Is(err, ErrBadWindow) {
			t.Errorf("CheckWindow(%v) = %v, want %q matching ErrBadWindow", w, err, msg)
		}
	}
	if err := rc.CheckWindow(90*time.Second, "", "m"); err != nil {
		t.Errorf("CheckWindow(90s) = %v", err)
	}
	if err := rc.CheckWindow(7*time.Second, "0007s", "m"); err == nil || !strings.HasPrefix(err.Error(), "0007s is not") {
		t.Errorf("CheckWindow with the caller's text = %v, want the text echoed", err)
	}
	// The ring's reads agree with CheckWindow.
	for _, w := range []time.Duration{0, 7 * time.Second, 10 * time.Second, 5 * time.Minute, 6 * time.Minute} {
		_, errRing := slotsFor(rc.withDefaults(), w)
		if (errRing == nil) != (rc.CheckWindow(w, "", "m") == nil) {
			t.Errorf("window %v: ring says %v, CheckWindow says %v", w, errRing, rc.CheckWindow(w, "", "m"))
		}
	}
}

func TestSpanMatchesRead(t *testing.T) {
	rc := RingConfig{Slot: 10 * time.Second, Slots: 30}
	for _, now := range []int64{0, 1, 9_999, 10_000, 1_700_000_123_456, -1, -10_000, -10_001} {
		r, err := NewRing(rc)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Read(now, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if from, to := rc.Span(now, time.Minute); from != a.From || to != a.To {
			t.Errorf("Span(%d) = [%d, %d), Read covers [%d, %d)", now, from, to, a.From, a.To)
		}
	}
	if FloorDiv(-1, 10) != -1 || FloorDiv(-10, 10) != -1 || FloorDiv(9, 10) != 0 || FloorDiv(-11, 10) != -2 {
		t.Error("FloorDiv wrong for negative numerators")
	}
}
