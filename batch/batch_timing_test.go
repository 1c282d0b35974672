package batch

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/slide-metrics/slide/window"
)

const benchRows = 1_000_000

var (
	benchOnce sync.Once
	benchCSV  []byte
)

// ordersCSV is 1M rows of "ts,amount" with cents amounts, the shape of testdata/gen -amounts cents.
func ordersCSV() []byte {
	benchOnce.Do(func() {
		var b bytes.Buffer
		b.WriteString("ts,amount\n")
		x := uint64(1)
		ts := int64(1764489600000)
		var line []byte
		for i := 0; i < benchRows; i++ {
			x = x*6364136223846793005 + 1442695040888963407
			c := x>>33%99_999 + 1
			line = strconv.AppendInt(line[:0], ts, 10)
			line = append(line, ',')
			line = strconv.AppendUint(line, c/100, 10)
			line = append(line, '.', byte('0'+c/10%10), byte('0'+c%10), '\n')
			b.Write(line)
			ts += int64(x >> 50 % 1200)
		}
		benchCSV = b.Bytes()
	})
	return benchCSV
}

// BenchmarkBatchSum: the best sum of 1000 consecutive rows of a 1M-row in-memory CSV.
//
//	ours       Job.Run: the hand-written scanner (parallel chunks), fast float parser, compensated sum
//	sequential the same on one core (the pipeline disabled)
//	anchor the obvious Go: encoding/csv + strconv.ParseFloat + the same SumWindow
//
// The end-to-end goal against DuckDB is measured by testdata/duckdb/compare.sh.
func BenchmarkBatchSum(b *testing.B) {
	data := ordersCSV()
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			res, err := Job{Size: 1000}.Run(context.Background(), bytes.NewReader(data), nil)
			if err != nil || res.N != benchRows {
				b.Fatal(res, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	})
	b.Run("sequential", func(b *testing.B) { // ours on one core: no parallel pipeline
		defer func(seq bool) { sequentialOnly = seq }(sequentialOnly)
		sequentialOnly = true
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := (Job{Size: 1000}).Run(context.Background(), bytes.NewReader(data), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	})
	b.Run("anchor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r := csv.NewReader(bytes.NewReader(data))
			r.ReuseRecord = true
			w, _ := window.NewSumWindow(1000)
			best := 0.0
			if _, err := r.Read(); err != nil {
				b.Fatal(err)
			}
			for {
				rec, err := r.Read()
				if err == io.EOF {
					break
				}
				v, err := strconv.ParseFloat(rec[1], 64)
				if err != nil {
					b.Fatal(err)
				}
				if s, full := w.Push(v); full && s > best {
					best = s
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	})
}

// BenchmarkCSVRead: the reader alone, value and time column, rows per second.
func BenchmarkCSVRead(b *testing.B) {
	data := ordersCSV()
	vals, ts := make([]float64, batchRows), make([]int64, batchRows)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rd, err := NewCSVReader(bytes.NewReader(data))
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
}

// BenchmarkParseFloat: the fast path against strconv on a cents value.
func BenchmarkParseFloat(b *testing.B) {
	in := []byte("774.62")
	b.Run("ours", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParseFloat(in)
		}
	})
	b.Run("anchor", func(b *testing.B) {
		b.ReportAllocs()
		s := string(in)
		for b.Loop() {
			_, _ = strconv.ParseFloat(s, 64)
		}
	})
}
