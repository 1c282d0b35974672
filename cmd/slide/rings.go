package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// parseRing parses "SLOT:SLOTS[:SKETCH][+SLOT:SLOTS...]", e.g. "10s:30",
// "1m:60:hdr:2:1:60000" or "10s:360+1h:24+1d:32": the ring, then its coarser tiers (issue
// #29), joined by '+'. SKETCH "none" keeps no quantile bins (a sum-only metric).
func parseRing(s string) (window.RingConfig, error) {
	first, tiers, tiered := strings.Cut(s, "+")
	rc, err := parseShape(s, first, true)
	if err != nil {
		return rc, err
	}
	for t := range strings.SplitSeq(tiers, "+") {
		if !tiered {
			break
		}
		tc, err := parseShape(s, t, false)
		if err != nil {
			return rc, err
		}
		rc.Tiers = append(rc.Tiers, window.Tier{Slot: tc.Slot, Slots: tc.Slots})
	}
	if err := rc.Validate(); err != nil {
		return rc, fmt.Errorf("%q: %w", s, err)
	}
	return rc, nil
}

// parseShape parses one "SLOT:SLOTS[:SKETCH]" of spec s; a tier (sketch false) has no SKETCH.
func parseShape(s, part string, sketchOK bool) (window.RingConfig, error) {
	var rc window.RingConfig
	parts := strings.SplitN(part, ":", 3)
	if len(parts) < 2 || len(parts) == 3 && !sketchOK {
		return rc, fmt.Errorf("%q: want SLOT:SLOTS[:SKETCH] then +SLOT:SLOTS for each tier, e.g. 10s:30 or 1m:60+1h:48+1d:36", s)
	}
	d, err := window.ParseWindow(parts[0])
	if err != nil {
		return rc, fmt.Errorf("%q: slot width: %w", s, err)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return rc, fmt.Errorf("%q: want a positive slot width and slot count", s)
	}
	rc.Slot, rc.Slots = d, n
	switch {
	case len(parts) < 3:
	case parts[2] == "none":
		rc.NoSketch = true
	default:
		if rc.Sketch, err = sketch.ParseKind(parts[2]); err != nil {
			return rc, fmt.Errorf("%q: sketch: %w", s, sketchProblem(err))
		}
	}
	return rc, nil
}

// DefaultRings is --rings' default: cost keeps an hour by the minute, two days by the hour
// and 36 days by the day (a reach of 37 days), so a usage rule can hold a 35-day quota, a
// calendar month in any zone, or a 24 h sliding window (issue #29).
const DefaultRings = "cost=1m:60+1h:48+1d:36"

// parseMetricRings parses "METRIC=SLOT:SLOTS[:SKETCH][+SLOT:SLOTS...],..." into per-metric ring configs.
func parseMetricRings(s string) (map[string]window.RingConfig, error) {
	out := map[string]window.RingConfig{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		metric, spec, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || metric == "" {
			return nil, fmt.Errorf("%q: want METRIC=SLOT:SLOTS[:SKETCH][+SLOT:SLOTS...]", item)
		}
		if _, dup := out[metric]; dup {
			return nil, fmt.Errorf("metric %q given twice", metric)
		}
		rc, err := parseRing(spec)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", metric, err)
		}
		out[metric] = rc
	}
	return out, nil
}

// windowFlag is a flag holding a window length (--slot, --span): window.ParseDuration's
// spelling, so it takes 1d as --rings and the policy files do. Zero and negative lengths
// parse, and checkNumbers judges them as it judges every duration flag.
type windowFlag struct{ d *time.Duration }

// windowVar defines a windowFlag on fs, as fs.DurationVar defines a duration.
func windowVar(fs interface {
	Var(flag.Value, string, string)
}, d *time.Duration, name string, def time.Duration, usage string) {
	*d = def
	fs.Var(windowFlag{d}, name, usage)
}

func (f windowFlag) String() string {
	if f.d == nil { // the flag package's zero value, for its defaults
		return time.Duration(0).String()
	}
	return f.d.String()
}

func (f windowFlag) Set(s string) error {
	d, err := window.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func (f windowFlag) Get() any { return *f.d }
