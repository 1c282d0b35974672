package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/window"
)

// byteUnits are the units parseByteSize accepts (lower case), by their multiplier.
var byteUnits = map[string]float64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseByteSize reads a memory size: a number, optionally fractional, then an optional unit,
// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), in any case,
// e.g. "2GiB", "1.5GB", "536870912".
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, errors.New("want a size such as 2GiB, 512MiB or 1.5GB")
	}
	mul, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unit %q: want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", strings.TrimSpace(t[i:]))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, errors.New("want a size such as 2GiB, 512MiB or 1.5GB")
	}
	b := v * mul
	if !(b >= 1) || b > math.MaxInt64/2 {
		return 0, errors.New("want a size of at least 1 byte and at most 4 EiB")
	}
	return int64(b), nil
}

// seriesCap is the store's caps: with --max-memory, its bytes (window.StoreConfig.MaxBytes:
// each series weighs what its ring may take busy, DenseSeriesBytes(--slots) for the default
// ring, TieredSeriesBytes for a --rings ring) and a series count that never binds before
// them (the bytes ÷ the cheapest ring's series); else --max-series. When both are given
// (--max-series on the command line or in SLIDE_MAX_SERIES), the smaller series count.
// Weighing by ring, not by the costliest: the default cost ring's busy series takes 26,888 B,
// and a cap of --max-memory ÷ that for every series would keep a store of latency series
// (6,300 B) at a quarter of what fits.
func (c *serveConfig) seriesCap(rings map[string]window.RingConfig) (maxSeries int, maxBytes int64, err error) {
	if c.maxMemory == "" {
		return c.maxSeries, 0, nil
	}
	b, err := parseByteSize(c.maxMemory)
	if err != nil {
		return 0, 0, &flagError{"max-memory", err}
	}
	per := int64(window.DenseSeriesBytes(c.slots))
	if b < per {
		return 0, 0, &flagError{"max-memory", fmt.Errorf("too small for one series (%d bytes each with %d slots)", per, c.slots)}
	}
	least := per
	for _, rc := range rings {
		least = min(least, int64(window.TieredSeriesBytes(rc)))
	}
	n := min(b/least, math.MaxInt32)
	if c.maxSeriesSet {
		n = min(n, int64(c.maxSeries))
	}
	return int(n), b, nil
}

// busySeriesBytes says what a busy series of each ring weighs against --max-memory, for
// serve's start line: "default=6300 cost=26888".
func (c *serveConfig) busySeriesBytes(rings map[string]window.RingConfig) string {
	ex := func(rc window.RingConfig) int { // --exemplars weighs a series more (window.StoreConfig.Exemplars)
		if !c.exemplars {
			return 0
		}
		return window.ExemplarBytes(rc)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "default=%d", window.DenseSeriesBytes(c.slots)+ex(window.RingConfig{Slot: c.slot, Slots: c.slots}))
	for _, m := range slices.Sorted(maps.Keys(rings)) {
		fmt.Fprintf(&sb, " %s=%d", m, window.TieredSeriesBytes(rings[m])+ex(rings[m]))
	}
	return sb.String()
}

// snapshotMaxBytes is the most decoded bytes a snapshot may declare
// (ingest.SnapshotConfig.MaxBytes) for a store of sc: twice the series memory, --max-memory
// or else the series cap × window.TieredSeriesBytes of its largest ring. Twice, because a
// snapshot's bins (open, one byte a count) are wider than the store's packed ones: an hour
// of 1,000 cost series encodes to 15 MB and is 11.4 MB by DenseSeriesBytes(60).
func (c *serveConfig) snapshotMaxBytes(sc window.StoreConfig) int64 {
	if b, err := parseByteSize(c.maxMemory); c.maxMemory != "" && err == nil {
		return 2 * b
	}
	per := window.DenseSeriesBytes(max(sc.Ring.Slots, window.DefaultSlots))
	for _, rc := range sc.Metrics {
		per = max(per, window.TieredSeriesBytes(rc)) // a ring's tiers too (issue #29)
	}
	return 2 * int64(sc.MaxSeries) * int64(per)
}

// flagGiven reports whether the flag name was set, on the command line or from SLIDE_<FLAG>.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
