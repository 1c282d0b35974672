package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
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

// seriesCap is the store's series cap: --max-memory ÷ busySeriesBytes(rings), the series
// that fit in it when each is as costly as the costliest ring can make it, else --max-series;
// when both are given (--max-series on the command line or in SLIDE_MAX_SERIES), the
// smaller cap.
func (c *serveConfig) seriesCap(rings map[string]window.RingConfig) (int, error) {
	if c.maxMemory == "" {
		return c.maxSeries, nil
	}
	b, err := parseByteSize(c.maxMemory)
	if err != nil {
		return 0, &flagError{"max-memory", err}
	}
	per := int64(c.busySeriesBytes(rings))
	n := b / per
	if n < 1 {
		return 0, &flagError{"max-memory", fmt.Errorf("too small for one series (%d bytes each with --slots %d and --rings %q)", per, c.slots, c.rings)}
	}
	n = min(n, math.MaxInt32)
	if c.maxSeriesSet {
		n = min(n, int64(c.maxSeries))
	}
	return int(n), nil
}

// busySeriesBytes is the most one busy series may take: window.DenseSeriesBytes(--slots)
// for the default ring, window.TieredSeriesBytes of each ring of --rings (their slots and
// tiers). The store's cap counts series, not bytes, so --max-memory holds only if every
// series may be the costliest: the default cost ring (60 slots and 84 tier slots, 26,888 B)
// filled past a cap of --max-memory ÷ 6,300 B 4.3 times over.
func (c *serveConfig) busySeriesBytes(rings map[string]window.RingConfig) int {
	per := window.DenseSeriesBytes(c.slots)
	for _, rc := range rings {
		per = max(per, window.TieredSeriesBytes(rc))
	}
	return per
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
