package batch

import (
	"bytes"
	"context"
	"encoding/csv"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

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

var (
	groupOnce sync.Once
	groupCSV  []byte
)

// ordersGroupCSV is ordersCSV with a region column of 1,000 groups (r000…r999).
func ordersGroupCSV() []byte {
	groupOnce.Do(func() {
		var b bytes.Buffer
		lines := bytes.Split(bytes.TrimSuffix(ordersCSV(), []byte("\n")), []byte("\n"))
		b.WriteString("ts,amount,region\n")
		x := uint64(7)
		for _, l := range lines[1:] {
			x = x*6364136223846793005 + 1442695040888963407
			b.Write(l)
			b.WriteString(",r")
			g := x >> 33 % 1000
			b.Write([]byte{byte('0' + g/100), byte('0' + g/10%10), byte('0' + g%10), '\n'})
		}
		groupCSV = b.Bytes()
	})
	return groupCSV
}

// BenchmarkBatchGroupBy: the best sum of 100 consecutive rows of each of 1,000 groups over a
// 1M-row stream (issue #16: ≥ 0.5× the throughput of the same job without groups).
//
//	ours      RunAll with GroupBy: one pass, a window per group
//	anchor    RunAll, the same job without groups, over the same stream (the row-by-row path)
//	fast      Run, the same job without groups on the fast CSV path (stated, not a goal)
func BenchmarkBatchGroupBy(b *testing.B) {
	data := ordersGroupCSV()
	run := func(b *testing.B, j Job) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		cpu0 := cpuTime()
		for b.Loop() {
			rep, err := j.RunAll(context.Background(), bytes.NewReader(data), "-", nil)
			if err != nil || rep.N != benchRows {
				b.Fatal(rep.N, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
		// CPU time per row as well: on a shared machine wall time mostly measures the others.
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/benchRows, "cpu_ns/row")
	}
	b.Run("ours", func(b *testing.B) { run(b, Job{Size: 100, Column: "amount", GroupBy: "region"}) })
	b.Run("anchor", func(b *testing.B) { run(b, Job{Size: 100, Column: "amount"}) })
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := (Job{Size: 100, Column: "amount"}).Run(context.Background(), bytes.NewReader(data), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
	})
}

// BenchmarkBatchParquet: the best sum of 1000 consecutive rows of the 1M orders as a Parquet
// file (parquet-go, row groups of 128K rows) against the same rows as a CSV file, end to end
// through RunAll (stated, not a goal; the goal against DuckDB's read_parquet is measured by
// testdata/duckdb/compare.sh).
func BenchmarkBatchParquet(b *testing.B) {
	csvPath := writeTemp(b, "orders.csv", ordersCSV())
	lines := bytes.Split(bytes.TrimSuffix(ordersCSV(), []byte("\n")), []byte("\n"))[1:]
	type row struct {
		TS     int64   `parquet:"ts"`
		Amount float64 `parquet:"amount"`
	}
	rows := make([]row, len(lines))
	for i, l := range lines {
		ts, v, _ := bytes.Cut(l, []byte(","))
		rows[i].TS, _ = strconv.ParseInt(string(ts), 10, 64)
		rows[i].Amount, _ = ParseFloat(v)
	}
	var pq bytes.Buffer
	w := parquet.NewGenericWriter[row](&pq, parquet.MaxRowsPerRowGroup(128<<10))
	if _, err := w.Write(rows); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	pqPath := writeTemp(b, "orders.parquet", pq.Bytes())
	run := func(b *testing.B, path string, size int) {
		b.ReportAllocs()
		b.SetBytes(int64(size))
		cpu0 := cpuTime()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			rep, err := Job{Size: 1000}.RunAll(context.Background(), f, path, nil)
			f.Close()
			if err != nil || rep.N != benchRows {
				b.Fatal(rep.N, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/benchRows, "cpu_ns/row")
	}
	b.Run("ours", func(b *testing.B) { run(b, pqPath, pq.Len()) })
	b.Run("anchor", func(b *testing.B) { run(b, csvPath, len(ordersCSV())) })
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
