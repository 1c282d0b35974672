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

func TestParseWindow(t *testing.T) {
	for _, c := range []struct {
		s    string
		want time.Duration
		msg  string // the error, "" for none
	}{
		{"5m", 5 * time.Minute, ""},
		{"90s", 90 * time.Second, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"1500ms", 1500 * time.Millisecond, ""},
		{"+10s", 10 * time.Second, ""},
		{"1d", 24 * time.Hour, ""},
		{"7d", 7 * 24 * time.Hour, ""},
		{"30d", 30 * 24 * time.Hour, ""},
		{"1d12h", 36 * time.Hour, ""},
		{"1d0s", 24 * time.Hour, ""},
		{"0s", 0, "0s must be positive"},
		{"0d", 0, "0d must be positive"},
		{"-5m", 0, "-5m must be positive"},
		{"-1d", 0, "-1d must be positive"},
		{"", 0, `"" is not a duration such as 90s, 5m, 1h or 7d`},
		{"an hour", 0, `"an hour" is not a duration such as 90s, 5m, 1h or 7d`},
		{"10", 0, `"10" is not a duration such as 90s, 5m, 1h or 7d`},
		{"d", 0, `"d" is not a duration such as 90s, 5m, 1h or 7d`},
		{"1.5d", 0, `"1.5d" is not a duration such as 90s, 5m, 1h or 7d`},
		{"1h1d", 0, `"1h1d" is not a duration such as 90s, 5m, 1h or 7d`},
		{"1dd", 0, `"1dd" is not a duration such as 90s, 5m, 1h or 7d`},
		{"1d-5m", 0, `"1d-5m" is not a duration such as 90s, 5m, 1h or 7d`},
		{"106752d", 0, `"106752d" is not a duration such as 90s, 5m, 1h or 7d`}, // past time.Duration
		{"106751d24h", 0, `"106751d24h" is not a duration such as 90s, 5m, 1h or 7d`},
		{"99999999999999999999d", 0, `"99999999999999999999d" is not a duration such as 90s, 5m, 1h or 7d`},
	} {
		got, err := ParseWindow(c.s)
		switch {
		case c.msg == "" && (err != nil || got != c.want):
			t.Errorf("ParseWindow(%q) = %v, %v, want %v", c.s, got, err, c.want)
		case c.msg != "" && (err == nil || err.Error() != c.msg || !errors.Is(err, ErrBadWindow)):
			t.Errorf("ParseWindow(%q) = %v, %v, want the error %q matching ErrBadWindow", c.s, got, err, c.msg)
		}
	}
	// ParseDuration takes the lengths that are not positive; ParseWindow refuses them.
	for s, want := range map[string]time.Duration{"0s": 0, "0": 0, "-5m": -5 * time.Minute, "-2d": -48 * time.Hour} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	// What Go's ParseDuration reads, ParseDuration reads alike.
	for _, s := range []string{"1h2m3.5s", "250us", "250µs", "3ns", "-0", ".5s", "1e3s", "5m5", "9223372036854775807ns", "9223372036854775808ns"} {
		want, werr := time.ParseDuration(s)
		got, err := ParseDuration(s)
		if got != want || (err == nil) != (werr == nil) {
			t.Errorf("ParseDuration(%q) = %v, %v; time.ParseDuration says %v, %v", s, got, err, want, werr)
		}
	}
	long := strings.Repeat("9", 1<<20)
	if _, err := ParseWindow(long); err == nil || len(err.Error()) > 200 {
		t.Errorf("ParseWindow of 1 MiB: error of %d bytes, want it clipped", len(err.Error()))
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"5m", "1d12h", "-1d", "1.5h", "7d", "0d", "1h1d", "106751d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !errors.Is(err, ErrBadWindow) {
				t.Fatalf("ParseDuration(%q): %v does not match ErrBadWindow", s, err)
			}
			return
		}
		// Without days it is Go's; with days, the days and the rest add up.
		if want, werr := time.ParseDuration(s); werr == nil && want != d {
			t.Fatalf("ParseDuration(%q) = %v, time.ParseDuration %v", s, d, want)
		}
		if w, err := ParseWindow(s); (d > 0) != (err == nil) || (err == nil && w != d) {
			t.Fatalf("ParseWindow(%q) = %v, %v after ParseDuration %v", s, w, err, d)
		}
	})
}

// TestStatNames: the list messages and help print is every name ParseStat reads, and each
// kind before statEnd is valid.
func TestStatNames(t *testing.T) {
	if StatNames != "count, sum, avg, min, max, rate" {
		t.Errorf("StatNames = %q", StatNames)
	}
	for _, n := range strings.Split(StatNames, ", ") {
		if st, ok := ParseStat(n); !ok || st.String() != n || !st.Valid() {
			t.Errorf("%q: ParseStat %v %v", n, st, ok)
		}
	}
	for k := StatCount; k < statEnd; k++ {
		if !(Stat{Kind: k, Q: 0.5}).Valid() {
			t.Errorf("kind %d is not valid", k)
		}
	}
	if (Stat{Kind: statEnd}).Valid() || (Stat{}).Valid() {
		t.Error("statEnd or the zero kind is valid")
	}
}
