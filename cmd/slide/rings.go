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

// parseRing parses "SLOT:SLOTS[:SKETCH]", e.g. "10s:30" or "1m:60:hdr:2:1:60000".
func parseRing(s string) (window.RingConfig, error) {
	var rc window.RingConfig
	parts := strings.SplitN(s, ":", 3)
	if len(parts) < 2 {
		return rc, fmt.Errorf("%q: want SLOT:SLOTS[:SKETCH], e.g. 10s:30", s)
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
	if len(parts) == 3 {
		if rc.Sketch, err = sketch.ParseKind(parts[2]); err != nil {
			return rc, fmt.Errorf("%q: sketch: %w", s, sketchProblem(err))
		}
	}
	if err := rc.Validate(); err != nil {
		return rc, fmt.Errorf("%q: %w", s, err)
	}
	return rc, nil
}

// parseMetricRings parses "METRIC=SLOT:SLOTS[:SKETCH],..." into per-metric ring configs.
func parseMetricRings(s string) (map[string]window.RingConfig, error) {
	out := map[string]window.RingConfig{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, item := range strings.Split(s, ",") {
		metric, spec, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || metric == "" {
			return nil, fmt.Errorf("%q: want METRIC=SLOT:SLOTS[:SKETCH]", item)
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
