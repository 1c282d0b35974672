package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"2GiB", 2 << 30, ""},
		{"2gib", 2 << 30, ""},
		{"1.5GB", 1_500_000_000, ""},
		{"512 MiB", 512 << 20, ""},
		{"536870912", 536870912, ""},
		{"64KB", 64_000, ""},
		{"1TiB", 1 << 40, ""},
		{"10B", 10, ""},
		{"", 0, "want a size"},
		{"GiB", 0, "want a size"},
		{"1.2.3GB", 0, "want a size"},
		{"2 parsecs", 0, `unit "parsecs"`},
		{"-1GB", 0, "want a size such as 2GiB"}, // no number first: the shape is what is wrong, not a unit "-1GB"
		{"0", 0, "at least 1 byte"},
		{"0.5", 0, "at least 1 byte"},
		{"9999999TiB", 0, "at most 4 EiB"},
	} {
		got, err := parseByteSize(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("parseByteSize(%q) = %d, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
}

// TestMaxMemoryDerivesSeriesCap: --max-memory alone sets the cap to the busy series that fit
// (DenseSeriesBytes of --slots each); with --max-series too the smaller wins, whichever it
// is, and --max-series given in the environment counts as given.
// TestMaxMemoryDerivesSeriesCap: --max-memory ÷ the bytes of the costliest busy series any
// ring may hold. A cap at --max-memory ÷ DenseSeriesBytes(--slots) alone let 5,326 busy
// cost series (default --rings, 60 one-minute slots of 50 values) hold 50 MB of live heap
// under --max-memory 32MiB, and once their tiers fill each takes up to 26,888 B.
func TestMaxMemoryDerivesSeriesCap(t *testing.T) {
	gib := int64(1 << 30)
	rings, err := parseMetricRings(DefaultRings)
	if err != nil {
		t.Fatal(err)
	}
	cost := int64(window.TieredSeriesBytes(rings["cost"])) // 26,888 B
	for _, c := range []struct {
		args []string
		env  map[string]string
		want int
	}{
		{nil, nil, 1 << 20},
		{[]string{"--max-memory", "2GiB"}, nil, int(2 * gib / cost)},
		{[]string{"--max-memory", "2GiB", "--rings", ""}, nil, int(2 * gib / int64(window.DenseSeriesBytes(30)))},
		{[]string{"--max-memory", "2GiB", "--rings", "", "--slots", "60"}, nil, int(2 * gib / int64(window.DenseSeriesBytes(60)))},
		{[]string{"--max-memory", "2GiB", "--rings", "tokens=10s:90"}, nil, int(2 * gib / int64(window.DenseSeriesBytes(90)))},
		{[]string{"--max-memory", "2GiB", "--rings", "hits=1m:5:none"}, nil, int(2 * gib / int64(window.DenseSeriesBytes(30)))},
		{[]string{"--max-memory", "2GiB", "--max-series", "1000"}, nil, 1000},
		{[]string{"--max-memory", "64MiB", "--max-series", "1000000"}, nil, int(64 << 20 / cost)},
		{[]string{"--max-memory", "2GiB"}, map[string]string{"SLIDE_MAX_SERIES": "5000"}, 5000},
		{nil, map[string]string{"SLIDE_MAX_MEMORY": "100GB"}, int(100e9 / float64(cost))},
	} {
		fs := newFlagSet("serve", discard{})
		var sc serveConfig
		sc.register(fs)
		lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		if err := parseFlagsEnv(fs, c.args, lookup); err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		sc.maxSeriesSet = flagGiven(fs, "max-series")
		if err := sc.validate(fs); err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		cfg, err := sc.storeConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxSeries != c.want {
			t.Errorf("%v %v: series cap %d, want %d", c.args, c.env, cfg.MaxSeries, c.want)
		}
	}
}

// FuzzParseByteSize: no panic, and an accepted size is positive and, written back in bytes,
// reads as itself.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"2GiB", "1.5GB", "512 MiB", "0", "-1", "1e9", "9999999999TiB", ".5KiB", "GiB", "1\nGB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err != nil {
			return
		}
		if n < 1 {
			t.Fatalf("%q: %d bytes accepted", s, n)
		}
		if back, err := parseByteSize(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("%q: %d bytes, read back as %d, %v", s, n, back, err)
		}
	})
}

// TestSnapshotMaxBytes: a snapshot may declare twice the series memory: --max-memory when
// given, else the series cap at the longest ring's busy-series cost.
func TestSnapshotMaxBytes(t *testing.T) {
	sc := window.StoreConfig{Ring: window.RingConfig{Slots: 30}, Metrics: map[string]window.RingConfig{"cost": {Slots: 60}}, MaxSeries: 1000}
	if got, want := (&serveConfig{}).snapshotMaxBytes(sc), int64(2*1000*window.DenseSeriesBytes(60)); got != want {
		t.Errorf("from the cap: %d, want %d", got, want)
	}
	if got := (&serveConfig{maxMemory: "1GiB"}).snapshotMaxBytes(sc); got != 2<<30 {
		t.Errorf("from --max-memory 1GiB: %d, want %d", got, 2<<30)
	}
	// Tiers count (issue #29): the default cost rings' 84 tier slots on top of its 60.
	rings, err := parseMetricRings(DefaultRings)
	if err != nil {
		t.Fatal(err)
	}
	sc.Metrics = rings
	want := int64(2 * 1000 * window.TieredSeriesBytes(rings["cost"]))
	if got := (&serveConfig{}).snapshotMaxBytes(sc); got != want || want <= int64(2*1000*window.DenseSeriesBytes(60)) {
		t.Errorf("tiered cost: %d, want %d, more than its ring alone", got, want)
	}
}
