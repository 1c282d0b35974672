package query

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

func TestParseQuantilesDedupes(t *testing.T) {
	qs, err := parseQuantiles("q", []string{"0.5, p95", "0.95,0.99"})
	if err != nil || len(qs) != 3 || qs[0] != 0.5 || qs[1] != 0.95 || qs[2] != 0.99 {
		t.Fatalf("parseQuantiles = %v, %v; want [0.5 0.95 0.99]", qs, err)
	}
	_, err = parseQuantiles("q", []string{"0.5,,0.9"})
	var pe *paramError
	if !errors.As(err, &pe) || pe.name != "q" || !strings.Contains(err.Error(), `""`) {
		t.Fatalf("empty item: err = %v, want a q parameter error", err)
	}
}

func TestParseWindow(t *testing.T) {
	rc := window.RingConfig{Slot: 10 * time.Second, Slots: 30}
	for _, c := range []struct {
		in   string
		want time.Duration
		msg  string // substring of the error; "" = ok
	}{
		{"", 5 * time.Minute, ""},
		{"5m", 5 * time.Minute, ""},
		{"30s", 30 * time.Second, ""},
		{"7s", 0, "not a multiple of the slot width 10s"},
		{"6m", 0, "longer than the retention 5m"},
		{"0s", 0, "must be positive"},
		{"-10s", 0, "must be positive"},
		{"five", 0, `"five" is not a duration such as 90s, 5m, 1h or 7d`},
		{"1d", 0, "1d is longer than the retention 5m"},
	} {
		got, err := parseWindow(c.in, rc, "latency_ms")
		if c.msg == "" {
			if err != nil || got != c.want {
				t.Errorf("parseWindow(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			continue
		}
		var pe *paramError
		if !errors.As(err, &pe) || pe.name != "window" || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("parseWindow(%q) error = %v, want a window error containing %q", c.in, err, c.msg)
		}
	}
}

func TestParseParamsRefusesUnknownAndRepeated(t *testing.T) {
	if _, err := parseParams("metric=a&windw=5m", "metric", "window"); err == nil || !strings.Contains(err.Error(), `"windw"`) {
		t.Errorf("unknown parameter: err = %v", err)
	}
	if _, err := parseParams("metric=a&metric=b", "metric"); err == nil || !strings.Contains(err.Error(), `"metric": given 2 times`) {
		t.Errorf("repeated parameter: err = %v", err)
	}
	if _, err := parseParams("q=0.5&q=0.9", "q"); err != nil {
		t.Errorf("repeated q: %v", err)
	}
	if _, err := parseParams("a=%zz", "a"); err == nil {
		t.Error("malformed escape accepted")
	}
}

func TestParseExportSpecs(t *testing.T) {
	specs, err := ParseExportSpecs(" latency_ms:5m:0.95,p99 ; cost:1h:sum,count,max ;; job:rate:1m ")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, s.String())
	}
	want := []string{"latency_ms:5m:0.95,0.99", "cost:1h:sum,count,max", "job:rate:1m:count,0.5,0.95,0.99"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("specs = %q, want %q", got, want)
	}
	for _, bad := range []string{"latency_ms", ":5m", "latency_ms:five:0.9", "latency_ms:5m:p95,median", "latency_ms:-5m", "latency_ms:5m:"} {
		if _, err := ParseExportSpecs(bad); !errors.Is(err, ErrExportSpec) || !strings.Contains(err.Error(), "e.g. latency_ms:5m:0.95,0.99") {
			t.Errorf("ParseExportSpecs(%q) error = %v, want ErrExportSpec with an example", bad, err)
		}
	}
	// Window lengths are window.ParseWindow's, in its words.
	if _, err := ParseExportSpecs("latency_ms:five:0.9"); err == nil || !strings.Contains(err.Error(), `window "five" is not a duration such as 90s, 5m, 1h or 7d`) {
		t.Errorf("bad window: %v", err)
	}
	if specs, err := ParseExportSpecs("cost:1d:sum"); err != nil || specs[0].Window != 24*time.Hour {
		t.Errorf("cost:1d:sum = %v, %v, want a window of 24h", specs, err)
	}
}

// FuzzParseExportSpecs: no panic, and every spec it accepts formats to a string that parses
// back to the same spec.
func FuzzParseExportSpecs(f *testing.F) {
	for _, s := range []string{"latency_ms:5m:0.95,0.99", "cost:1h:sum;latency_ms:5m", "a:b:1m:p999,rate", ":", ";;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := ParseExportSpecs(s)
		if err != nil {
			return
		}
		for _, e := range specs {
			back, err := ParseExportSpecs(e.String())
			if err != nil || len(back) != 1 || back[0].String() != e.String() {
				t.Fatalf("%q: spec %q reparsed as %v, %v", s, e.String(), back, err)
			}
		}
	})
}

func TestParseHistogramSpecs(t *testing.T) {
	specs, err := ParseHistogramSpecs(" latency_ms:5m ; cost:1h,ns:db:p:90s")
	if err != nil || len(specs) != 3 || specs[0].String() != "latency_ms:5m" || specs[1].String() != "cost:1h" || specs[2].String() != "ns:db:p:90s" {
		t.Fatalf("%v %v", specs, err)
	}
	for _, bad := range []string{"latency_ms", "latency_ms:", ":5m", "latency_ms:0s", "latency_ms:-1m", "latency_ms:5"} {
		if _, err := ParseHistogramSpecs(bad); !errors.Is(err, ErrExportSpec) || !strings.Contains(err.Error(), "e.g.") && !strings.Contains(err.Error(), "such as") {
			t.Errorf("%q: %v, want ErrExportSpec with an example", bad, err)
		}
	}
	if _, err := ParseHistogramSpecs("latency_ms:0s"); err == nil || !strings.Contains(err.Error(), "window 0s must be positive") {
		t.Errorf("zero window: %v", err)
	}
}

// FuzzParseHistogramSpecs: no panic, and every spec it accepts formats to a string that
// parses back to the same spec.
func FuzzParseHistogramSpecs(f *testing.F) {
	for _, s := range []string{"latency_ms:5m", "cost:1h;latency_ms:5m", "a:b:1m,c:90s", ":", ";;", "x:1.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := ParseHistogramSpecs(s)
		if err != nil {
			return
		}
		for _, h := range specs {
			back, err := ParseHistogramSpecs(h.String())
			if err != nil || len(back) != 1 || back[0] != h {
				t.Fatalf("%q: spec %q reparsed as %v, %v", s, h.String(), back, err)
			}
		}
	})
}
