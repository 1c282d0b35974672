package batch

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// typedRow has a column of every type the fast Parquet reader decodes itself.
type typedRow struct {
	TS     int64   `parquet:"ts"`
	Micros int64   `parquet:"micros,timestamp(microsecond)"`
	Day    int32   `parquet:"day,date"`
	F64    float64 `parquet:"f64"`
	F32    float32 `parquet:"f32"`
	I32    int32   `parquet:"i32"`
	I64    int64   `parquet:"i64"`
	Dec    int64   `parquet:"dec,decimal(2:12)"`
	Dict   float64 `parquet:"dict,dict"`
	Opt    *int64  `parquet:"opt,optional"`
	Big    int64   `parquet:"big"` // beyond 2^53: the text path's rounding
	// Two decimals, then three from row 5,000: the fixed-point sum hands over to the float
	// sum in the middle of a chunk.
	Mixed float64 `parquet:"mixed"`
}

func typedRows(n int) []typedRow {
	rows := make([]typedRow, n)
	x := uint64(7)
	for i := range rows {
		x = x*6364136223846793005 + 1442695040888963407
		r := int64(x >> 40)
		v := r % 100_000
		o := v - 50_000
		rows[i] = typedRow{
			TS:     1_764_489_600_000 + int64(i)*317,
			Micros: -5_000_000_123 + int64(i)*317_001,
			Day:    int32(19_000 + i/50),
			F64:    float64(v) / 100,
			F32:    float32(v) / 8,
			I32:    int32(o),
			I64:    o * 1_000,
			Dec:    v,
			Dict:   float64(v%37) / 4,
			Opt:    &o,
			Big:    1<<60 + r*3,
			Mixed:  float64(v) / 100,
		}
		if i >= 5_000 {
			rows[i].Mixed = float64(v) / 1000
		}
	}
	return rows
}

func typedParquet(t testing.TB, rows []typedRow, rowGroup int64) []byte {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewGenericWriter[typedRow](&b, parquet.MaxRowsPerRowGroup(rowGroup), parquet.PageBufferSize(2048))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The fast Parquet path (plain jobs) gives the row-by-row path's windows, bit for bit, for
// every column type it decodes, several row groups and lanes, count and time windows; the
// row-by-row path is forced with SkipBad (nothing is bad).
func TestParquetFastMatchesRowByRow(t *testing.T) {
	data := typedParquet(t, typedRows(8_000), 1_500)
	path := writeTemp(t, "typed.parquet", data)
	src, err := newParquetRows(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, col := range src.Columns() {
		if _, ok := src.fastColumn(col, false); !ok && col != "micros" && col != "day" {
			t.Errorf("column %q does not take the fast path", col)
		}
		if _, ok := src.fastColumn(col, true); ok != slices.Contains([]string{"ts", "micros", "day", "i32", "i64", "opt", "big"}, col) {
			t.Errorf("column %q as a time column: fast %v", col, ok)
		}
	}
	var jobs []Job
	for _, col := range []string{"f64", "f32", "i32", "i64", "dec", "dict", "opt", "big", "mixed"} {
		jobs = append(jobs,
			Job{Size: 500, Column: col},
			Job{Size: 500, Column: col, Agg: AggMin},
			Job{Size: 300, Column: col, Agg: AggP95},
			Job{Span: time.Minute, Column: col, Agg: AggAvg},
			Job{Span: 30 * time.Second, Column: col, Agg: AggP99, TimeColumn: "micros"},
			Job{Span: 72 * time.Hour, Column: col, Agg: AggMax, TimeColumn: "day"},
		)
	}
	for _, j := range jobs {
		fast, err := runAllFile(t, j, path)
		if err != nil {
			t.Fatalf("%+v: %v", j, err)
		}
		jj := j
		jj.SkipBad = true
		slow, err := runAllFile(t, jj, path)
		if err != nil {
			t.Fatalf("%+v row by row: %v", j, err)
		}
		if !slices.Equal(keys(fast), keys(slow)) {
			t.Errorf("%+v:\n fast %v\n slow %v", j, keys(fast), keys(slow))
		}
		if f, s := fast.Results[0], slow.Results[0]; f.StartLine != s.StartLine || f.EndLine != s.EndLine || f.StartLine != f.Start+1 {
			t.Errorf("%+v: fast lines %d-%d, slow %d-%d", j, f.StartLine, f.EndLine, s.StartLine, s.EndLine)
		}
	}
}

// A null or non-finite value, or an unsorted time, stops the fast path with the row-by-row
// path's error (the same row, line and text); IDColumn forces the row-by-row path.
func TestParquetFastErrors(t *testing.T) {
	rows := typedRows(10_000)
	rows[7_777].Opt = nil
	rows[6_001].F64 = math.NaN()
	rows[5_005].F32 = float32(math.Inf(-1))
	rows[4_004].TS = rows[4_003].TS - 1
	path := writeTemp(t, "bad.parquet", typedParquet(t, rows, 1_000))
	for _, j := range []Job{
		{Size: 10, Column: "opt"},
		{Size: 10, Column: "f64"},
		{Size: 10, Column: "f32"},
		{Span: time.Second, Column: "i32"},
	} {
		_, fast := runAllFile(t, j, path)
		jj := j
		jj.IDColumn = "i64"
		_, slow := runAllFile(t, jj, path)
		var re *RowError
		if fast == nil || slow == nil || !errors.As(fast, &re) || fast.Error() != slow.Error() {
			t.Errorf("%+v:\n fast %v\n slow %v", j, fast, slow)
		}
	}
}

// The fast reader stops its lanes when a job ends early, and hands out every row in order
// whatever the buffer sizes of Read.
func TestParquetFastReadOrder(t *testing.T) {
	rows := typedRows(50_000)
	data := typedParquet(t, rows, 4_321)
	src, err := newParquetRows(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, ok := newParquetFast(src, "f64", "ts")
	if !ok {
		t.Fatal("f64 and ts should be fast columns")
	}
	vals, ts := make([]float64, 777), make([]int64, 777)
	var i int
	for {
		n, err := p.Read(vals[:1+i%777], ts)
		for k := range n {
			if vals[k] != rows[i+k].F64 || ts[k] != rows[i+k].TS {
				t.Fatalf("row %d: %v %v, want %v %v", i+k, vals[k], ts[k], rows[i+k].F64, rows[i+k].TS)
			}
		}
		i += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if i != len(rows) {
		t.Fatalf("read %d rows, want %d", i, len(rows))
	}
	p.Close()
	// Early close: the lanes are blocked on full channels and must exit.
	q, _ := newParquetFast(src, "f64", "")
	if _, err := q.Read(vals, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { q.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the lanes")
	}
}

// The fast path reports progress: rows and an estimate of the file bytes read, both growing,
// the bytes within the file.
func TestParquetFastProgress(t *testing.T) {
	data := typedParquet(t, typedRows(200_000), 20_000)
	path := writeTemp(t, "p.parquet", data)
	var rows, bytes []int64
	j := Job{Size: 10, Column: "f64", Progress: func(r, b int64) { rows, bytes = append(rows, r), append(bytes, b) }}
	if _, err := runAllFile(t, j, path); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 5 || !slices.IsSorted(rows) || !slices.IsSorted(bytes) || bytes[0] <= 0 || bytes[len(bytes)-1] > int64(len(data)) {
		t.Fatalf("progress rows %v bytes %v (file %d bytes)", rows, bytes, len(data))
	}
}
