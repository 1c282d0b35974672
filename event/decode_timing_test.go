package event

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// benchLines are realistic events: 100 tenants, lognormal latencies, unix-ms timestamps.
func benchLines(n int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"ts":%d,"key":"tenant-%d","metric":"latency_ms","value":%.3f}`,
			defTS+int64(i), rng.IntN(100), 40*rng.ExpFloat64())
	}
	return lines
}

// BenchmarkDecode compares the hand-written decoder with encoding/json decoding the same
// events into a struct. One op is one event. cpu_MB/s is the speed by the process's CPU
// time: on a shared machine wall time mostly measures the others.
func BenchmarkDecode(b *testing.B) {
	lines := benchLines(1024)
	var size int64
	for _, l := range lines {
		size += int64(len(l))
	}
	avg := size / int64(len(lines))
	b.Run("ours", func(b *testing.B) {
		d, err := NewDecoder(Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(avg)
		b.ReportAllocs()
		cpu0 := cpuTime()
		var sink window.Event
		for i := 0; b.Loop(); i++ {
			ev, r := d.Decode(lines[i&1023], defTS)
			if r != ReasonNone {
				b.Fatal(r)
			}
			sink = ev
		}
		_ = sink
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(b.N*int(avg))/(cpuTime()-cpu0).Seconds()/1e6, "cpu_MB/s")
	})
	b.Run("anchor", func(b *testing.B) {
		type event struct {
			TS     int64   `json:"ts"`
			Key    string  `json:"key"`
			Metric string  `json:"metric"`
			Value  float64 `json:"value"`
			Count  uint64  `json:"count"`
		}
		b.SetBytes(avg)
		b.ReportAllocs()
		cpu0 := cpuTime()
		var sink event
		for i := 0; b.Loop(); i++ {
			var ev event
			if err := json.Unmarshal(lines[i&1023], &ev); err != nil {
				b.Fatal(err)
			}
			sink = ev
		}
		_ = sink
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(b.N*int(avg))/(cpuTime()-cpu0).Seconds()/1e6, "cpu_MB/s")
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
