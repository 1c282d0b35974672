package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
)

var (
	ndjsonOnce  sync.Once
	benchNDJSON []byte
)

// ordersNDJSONBench is ordersCSV's 1M rows as NDJSON: {"ts":…,"amount":…,"region":"r…"}, the
// value a number, the time unix ms, one string member the reader skips.
func ordersNDJSONBench() []byte {
	ndjsonOnce.Do(func() {
		var b bytes.Buffer
		lines := bytes.Split(bytes.TrimSuffix(ordersCSV(), []byte("\n")), []byte("\n"))[1:]
		for i, l := range lines {
			ts, v, _ := bytes.Cut(l, []byte(","))
			b.WriteString(`{"ts":`)
			b.Write(ts)
			b.WriteString(`,"amount":`)
			b.Write(v)
			b.WriteString(`,"region":"r`)
			b.Write([]byte{byte('0' + i%10), byte('0' + i/10%10), byte('0' + i/100%10)})
			b.WriteString("\"}\n")
		}
		benchNDJSON = b.Bytes()
	})
	return benchNDJSON
}

// BenchmarkNDJSONRead: the NDJSON reader alone over 1M rows, value and time column (ours),
// against encoding/json decoding each line into a struct (anchor); cpu_ns/row as well, since
// wall time on a shared machine mostly measures the others.
func BenchmarkNDJSONRead(b *testing.B) {
	data := ordersNDJSONBench()
	vals, ts := make([]float64, batchRows), make([]int64, batchRows)
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		cpu0 := cpuTime()
		for b.Loop() {
			rd, err := NewNDJSONReader(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			if err := rd.Select("amount", "ts"); err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := rd.Read(vals, ts); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/benchRows, "cpu_ns/row")
	})
	b.Run("anchor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		cpu0 := cpuTime()
		for b.Loop() {
			var row struct {
				TS     int64   `json:"ts"`
				Amount float64 `json:"amount"`
			}
			for rest := data; len(rest) > 0; {
				line, tail, _ := bytes.Cut(rest, []byte("\n"))
				rest = tail
				if err := json.Unmarshal(line, &row); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/benchRows, "cpu_ns/row")
	})
}

// BenchmarkNDJSONJob: the best sum of 1000 consecutive rows of the 1M NDJSON rows through
// Job.Run, the path of `slide batch` on an NDJSON file.
func BenchmarkNDJSONJob(b *testing.B) {
	data := ordersNDJSONBench()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := Job{Size: 1000, Column: "amount"}.Run(context.Background(), bytes.NewReader(data), nil)
		if err != nil || res.N != benchRows {
			b.Fatal(res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/benchRows, "cpu_ns/row")
}
