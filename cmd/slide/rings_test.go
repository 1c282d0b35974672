package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseMetricRings(t *testing.T) {
	got, err := parseMetricRings("cost=1m:60, latency_ms=10s:30:hdr")
	if err != nil {
		t.Fatal(err)
	}
	if c := got["cost"]; c.Slot != time.Minute || c.Slots != 60 || c.Retention() != time.Hour {
		t.Fatalf("cost: %+v", c)
	}
	if l := got["latency_ms"]; l.Sketch.Name != "hdr" {
		t.Fatalf("latency_ms sketch: %+v", l.Sketch)
	}
	for _, bad := range []string{"cost", "cost=1m", "cost=abc:60", "cost=1m:x", "cost=1m:0", "=1m:60", "cost=1m:60,cost=1m:60", "x=10s:30:tdigest"} {
		_, err := parseMetricRings(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
			continue
		}
		if name, _, _ := strings.Cut(bad, "="); name != "" && !strings.Contains(err.Error(), name) {
			t.Errorf("%q: error %q does not name the metric", bad, err)
		}
	}
}
