package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestMaxMemoryDerivesSeriesCap: --max-memory is the store's byte cap (each series weighs
// its own ring's busy bytes: window.StoreConfig.MaxBytes) and a series count that never binds
// before it (the bytes ÷ the cheapest ring's series); with --max-series too the smaller count
// wins, and --max-series given in the environment counts as given. A count of --max-memory ÷
// the costliest ring (26,888 B, the default cost ring) kept a store of 6,300-byte latency
// series at a quarter of what fits; one of ÷ 6,300 B alone let 5,326 busy cost series hold
// 50 MB under --max-memory 32MiB.
func TestMaxMemoryDerivesSeriesCap(t *testing.T) {
	gib := int64(1 << 30)
	dense := func(slots int) int64 { return int64(window.DenseSeriesBytes(slots)) }
	hits := int64(window.TieredSeriesBytes(window.RingConfig{Slot: time.Minute, Slots: 5, NoSketch: true}))
	for _, c := range []struct {
		args      []string
		env       map[string]string
		want      int
		wantBytes int64
	}{
		{nil, nil, 1 << 20, 0},
		{[]string{"--max-memory", "2GiB"}, nil, int(2 * gib / dense(30)), 2 * gib},
		{[]string{"--max-memory", "2GiB", "--rings", ""}, nil, int(2 * gib / dense(30)), 2 * gib},
		{[]string{"--max-memory", "2GiB", "--rings", "", "--slots", "60"}, nil, int(2 * gib / dense(60)), 2 * gib},
		{[]string{"--max-memory", "2GiB", "--rings", "tokens=10s:90"}, nil, int(2 * gib / dense(30)), 2 * gib},
		{[]string{"--max-memory", "2GiB", "--rings", "hits=1m:5:none"}, nil, int(2 * gib / hits), 2 * gib},
		{[]string{"--max-memory", "2GiB", "--max-series", "1000"}, nil, 1000, 2 * gib},
		{[]string{"--max-memory", "64MiB", "--max-series", "1000000"}, nil, int(64 << 20 / dense(30)), 64 << 20},
		{[]string{"--max-memory", "2GiB"}, map[string]string{"SLIDE_MAX_SERIES": "5000"}, 5000, 2 * gib},
		{nil, map[string]string{"SLIDE_MAX_MEMORY": "100GB"}, int(100e9 / float64(dense(30))), 100e9},
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
		if cfg.MaxSeries != c.want || cfg.MaxBytes != c.wantBytes {
			t.Errorf("%v %v: series cap %d and byte cap %d, want %d and %d", c.args, c.env, cfg.MaxSeries, cfg.MaxBytes, c.want, c.wantBytes)
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
