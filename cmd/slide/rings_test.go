package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
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
	// Slot widths are window lengths: days read, and the messages are window's.
	if got, err := parseMetricRings("cost=1d:30"); err != nil || got["cost"].Slot != 24*time.Hour {
		t.Errorf("cost=1d:30: %+v, %v", got, err)
	}
	if _, err := parseMetricRings("cost=0s:3"); err == nil || !strings.Contains(err.Error(), "slot width: 0s must be positive") {
		t.Errorf("cost=0s:3: %v", err)
	}
}

// TestWindowFlag: --slot and --span read window.ParseDuration's lengths (1d too), keep
// the duration flags' default text, and leave 0 and negatives to checkNumbers.
func TestWindowFlag(t *testing.T) {
	fs := newFlagSet("t", io.Discard)
	var span, slot time.Duration
	windowVar(fs, &span, "span", 0, "time window")
	windowVar(fs, &slot, "slot", 10*time.Second, "slot width")
	if f := fs.Lookup("slot"); f.DefValue != "10s" || slot != 10*time.Second {
		t.Fatalf("default %q, value %v", f.DefValue, slot)
	}
	if err := parseFlagsEnv(fs, []string{"--span", "1d", "--slot", "1m"}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if span != 24*time.Hour || slot != time.Minute {
		t.Fatalf("span %v slot %v", span, slot)
	}
	fs = newFlagSet("t", io.Discard)
	windowVar(fs, &span, "span", 0, "time window")
	err := parseFlagsEnv(fs, []string{"--span", "soon"}, func(string) (string, bool) { return "", false })
	if err == nil || err.Error() != `--span soon: "soon" is not a duration such as 90s, 5m, 1h or 7d` {
		t.Errorf("--span soon: %v", err)
	}
	if err := parseFlagsEnv(fs, []string{"--span", "-1s"}, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if err := checkNumbers(fs, zeroMeans{"span": "no time window"}); err == nil || !strings.Contains(err.Error(), "must be 0 (no time window) or more") {
		t.Errorf("--span -1s: %v", err)
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

// TestParseTieredRings: tiers after '+', the sketch none, and their refusals naming the
// metric; DefaultRings parses and reaches 35 days.
func TestParseTieredRings(t *testing.T) {
	got, err := parseMetricRings("tokens=10s:360+1h:24+1d:32,cost=1m:60:none+1h:48+1d:36")
	if err != nil {
		t.Fatal(err)
	}
	tok := got["tokens"]
	if tok.Slot != 10*time.Second || tok.Slots != 360 || len(tok.Tiers) != 2 || tok.Tiers[0] != (window.Tier{Slot: time.Hour, Slots: 24}) ||
		tok.Tiers[1] != (window.Tier{Slot: 24 * time.Hour, Slots: 32}) || tok.NoSketch {
		t.Fatalf("tokens: %+v", tok)
	}
	if c := got["cost"]; !c.NoSketch || c.Spec() != "1m:60:none+1h:48+1d:36" {
		t.Fatalf("cost: %+v (%s)", c, c.Spec())
	}
	for _, bad := range []string{"x=10s:30+", "x=10s:30+1h", "x=10s:30+7s:10", "x=1h:30+1m:10", "x=10s:30+1h:0", "x=10s:30+1h:24:hdr", "x=10s:30+1h:24+1h:2"} {
		if _, err := parseMetricRings(bad); err == nil || !strings.Contains(err.Error(), "x") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	def, err := parseMetricRings(DefaultRings)
	if err != nil || def["cost"].Reach() < 35*24*time.Hour {
		t.Fatalf("DefaultRings: %+v, %v", def, err)
	}
}

// TestRefusalHintServes: a usage rule the rings cannot serve is refused with a --rings value;
// that value parses, and with it the rule is accepted (the hint once suggested the default
// ring, which could not serve a 2 h rule).
func TestRefusalHintServes(t *testing.T) {
	for _, rings := range []string{"cost=1m:60", DefaultRings, "cost=10s:30"} {
		for _, win := range []string{"2h", "90s", "24h", "7d", "30d", "40d", "calendar_month", "calendar_week"} {
			rc, err := parseMetricRings(rings)
			if err != nil {
				t.Fatal(err)
			}
			rules, err := usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: "+win+", max: 1}\n"), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			st, _ := window.NewStore(window.StoreConfig{Metrics: rc})
			_, err = usage.NewChecker(st, rules[0])
			if err == nil {
				continue
			}
			_, hint, ok := strings.Cut(err.Error(), "--rings ")
			if !ok {
				t.Fatalf("%s with %s: no hint in %v", win, rings, err)
			}
			served, err2 := parseMetricRings(hint)
			if err2 != nil {
				t.Fatalf("%s with %s: the hint %q does not parse: %v", win, rings, hint, err2)
			}
			st, _ = window.NewStore(window.StoreConfig{Metrics: served})
			if _, err := usage.NewChecker(st, rules[0]); err != nil {
				t.Errorf("%s with %s: refused (%v) and still refused with the hint %q: %v", win, rings, err, hint, err)
			}
		}
	}
}
