package main

import (
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
	d, err := time.ParseDuration(parts[0])
	if err != nil {
		return rc, fmt.Errorf("%q: slot width: %w", s, err)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 || d <= 0 {
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
