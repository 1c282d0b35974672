package event

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// BenchmarkEventMap: decoding Envoy Gateway's default JSON access log through the envoy
// preset (ours) vs the same events as slide's own JSON through Decoder (anchor, event.Append's
// layout with the labels last). One op is one access-log line, two events (latency_ms and
// bytes_sent of one series), for both: ours reads the line (every field of the default format,
// about 850 bytes), the anchor reads the two events' lines (about 150 bytes each). 1,024 lines
// of 3 clusters × 2 methods × 4 codes, once interned. Issue #27's goal: ≥ 0.5× the events/s.
func BenchmarkEventMap(b *testing.B) {
	rng := rand.New(rand.NewPCG(27, 1))
	clusters := []string{"httproute/default/pay/rule/0", "httproute/default/cart/rule/0", "httproute/shop/login/rule/1"}
	methods := []string{"GET", "POST"}
	codes := []string{"200", "201", "404", "503"}
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	md, err := NewMapDecoder(presets["envoy"], Config{})
	if err != nil {
		b.Fatal(err)
	}
	var ours, anchor [][]byte
	var size int
	for i := range 1024 {
		at := t0.Add(time.Duration(i) * 37 * time.Millisecond)
		code := codes[rng.IntN(len(codes))]
		flags := "-"
		if code == "503" {
			flags = "UF"
		}
		line := []byte(envoyLine(at.Format("2006-01-02T15:04:05.000Z"), methods[rng.IntN(2)], "/pay?id="+strconv.Itoa(rng.IntN(1e6)),
			code, flags, rng.IntN(20000), 1+rng.IntN(900), clusters[rng.IntN(len(clusters))]))
		ours = append(ours, line)
		size += len(line)
		var pair []byte
		md.DecodeLines(line, 0, func(_ []byte, ev window.Event, r Reason) {
			if r != ReasonNone {
				b.Fatalf("%s: %s", line, md.Explain(line))
			}
			if len(pair) > 0 {
				pair = append(pair, '\n')
			}
			pair = Append(pair, ev)
		})
		anchor = append(anchor, pair)
	}
	b.Logf("an access-log line: %d bytes on average; its two events as slide JSON: %d", size/len(ours), len(anchor[0]))
	run := func(b *testing.B, bodies [][]byte, f Format) {
		n := 0
		fn := func(_ []byte, ev window.Event, r Reason) {
			if r == ReasonNone {
				n++
			}
		}
		for _, body := range bodies { // intern every name and series first
			f.DecodeLines(body, 0, fn)
		}
		n = 0
		b.ReportAllocs()
		cpu0 := cpuTime()
		for i := 0; b.Loop(); i++ {
			f.DecodeLines(bodies[i&1023], 0, fn)
		}
		if n != 2*b.N {
			b.Fatalf("%d events accepted of %d", n, 2*b.N)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu_ns/op")
	}
	b.Run("ours", func(b *testing.B) { run(b, ours, md) })
	b.Run("anchor", func(b *testing.B) {
		d, err := NewDecoder(Config{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, anchor, d)
	})
}
