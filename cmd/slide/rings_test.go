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

// TestExportHistogramsGetNativeRings: a metric exported with --export-histograms gets the
// native:5 sketch (exact export), with the default ring shape when --rings does not name
// it, its --rings shape when it does, and keeps a sketch --rings chose; a bad spec is an
// error naming the flag.
func TestExportHistogramsGetNativeRings(t *testing.T) {
	c := serveConfig{slot: 10 * time.Second, slots: 30, sketchKind: "ddsketch:0.01", rings: "cost=1m:60,size_bytes=10s:30:hdr", exportHistograms: "latency_ms:5m;cost:1h;size_bytes:5m"}
	sc, err := c.storeConfig()
	if err != nil {
		t.Fatal(err)
	}
	if l := sc.Metrics["latency_ms"]; l.Sketch.String() != "native:5" || l.Slot != 10*time.Second || l.Slots != 30 {
		t.Errorf("latency_ms: %+v", l)
	}
	if l := sc.Metrics["cost"]; l.Sketch.String() != "native:5" || l.Slot != time.Minute {
		t.Errorf("cost: %+v", l)
	}
	if l := sc.Metrics["size_bytes"]; l.Sketch.Name != "hdr" {
		t.Errorf("size_bytes keeps its hdr sketch (re-bucketed on export): %+v", l)
	}
	if sc.Ring.Sketch.String() != "ddsketch:0.01" {
		t.Errorf("default ring: %+v", sc.Ring)
	}
	c.exportHistograms = "latency_ms"
	if _, err := c.storeConfig(); err == nil || !strings.Contains(err.Error(), "--export-histograms") {
		t.Errorf("bad spec: %v", err)
	}
}
