package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// runWithin runs f in a goroutine and fails the test if it has not returned within a
// generous deadline: a guard for inputs that once made a job loop forever.
func runWithin(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not return (an endless loop)")
	}
}

// Timestamps within one span of the earliest int64 (a corrupt or sentinel value in an
// export) once made now − span wrap around to the far future: every row "left" its window
// over and over and slide batch spun forever with no output. Nothing has left such a window.
// (The text readers now refuse such times, ErrTimeRange; the arithmetic must hold anyway.)
func TestTimeWindowNearMinInt64(t *testing.T) {
	ts := []int64{math.MinInt64 + 200, math.MinInt64 + 300, math.MinInt64 + 1000, 0}
	vals := []float64{1, 2, 4, 8}
	for agg, want := range map[string][]float64{AggSum: {1, 3, 7, 8}, AggCount: {1, 2, 3, 1},
		AggMax: {1, 2, 4, 8}, AggMin: {1, 1, 1, 8}, AggP50: {1, 1, 2, 8}} {
		a, err := Job{Span: time.Second, Agg: agg}.aggregator()
		if err != nil {
			t.Fatal(err)
		}
		out, start, startTS := make([]float64, 4), make([]int64, 4), make([]int64, 4)
		runWithin(t, func() { a.feed(vals, ts, out, start, startTS) })
		for i := range out {
			// p50 is within the sketch's accuracy (and clamped to min and max); the others exact.
			if math.Abs(out[i]-want[i]) > 0.02*want[i] {
				t.Errorf("%v: windows %v, want %v", agg, out, want)
				break
			}
		}
	}
}

// DuckDB's UINTEGER and UBIGINT are Parquet UINT_32 and UINT_64, stored in INT32 and INT64:
// slide batch read their bits as signed, so 4,000,000,000 summed as −294,967,296, with no
// error, on the fast path and row by row alike.
func TestParquetUnsignedIntegers(t *testing.T) {
	type urow struct {
		TS  int64  `parquet:"ts"`
		U32 uint32 `parquet:"u32"`
		U64 uint64 `parquet:"u64"`
	}
	rows := []urow{{1000, 4_000_000_000, 1 << 63}, {2000, 3_000_000_000, 1<<63 + 2048}, {3000, 1, 5}}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[urow](&b)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "unsigned.parquet", b.Bytes())
	for _, c := range []struct {
		col  string
		want float64
	}{{"u32", 7_000_000_000}, {"u64", 1<<64 + 2048}} {
		for _, skip := range []bool{false, true} { // SkipBad takes the row-by-row path
			rep, err := runAllFile(t, Job{Size: 2, Column: c.col, SkipBad: skip}, path)
			if err != nil {
				t.Fatalf("%s: %v", c.col, err)
			}
			if r := rep.Results[0]; r.Best != c.want || r.Start != 0 {
				t.Errorf("%s (skip-bad %v): best %v from row %d, want %v from row 0", c.col, skip, r.Best, r.Start, c.want)
			}
		}
	}
}

// An empty CSV field or a Parquet null in the value column said only `column "amount": not a
// number`, which reads as if the exporter wrote text there; the message now says the field
// is empty (the reason stays not_a_number).
func TestEmptyValueSaysEmpty(t *testing.T) {
	_, _, err := runJob(t, Job{Size: 1, Column: "amount"}, "ts,amount\n1,10\n2,\n")
	if err == nil || !strings.Contains(err.Error(), `row 1 (line 3), column "amount": not a number: empty (a missing value or null)`) {
		t.Fatalf("error %v", err)
	}
	_, _, err = runJob(t, Job{Span: time.Second, Column: "amount"}, "ts,amount\n1,10\n,2\n")
	if err == nil || !strings.Contains(err.Error(), `row 1 (line 3), column "ts": not a timestamp (want unix milliseconds or RFC 3339): empty`) {
		t.Fatalf("error %v", err)
	}
}

// A join's export can name two columns alike (amount of the order, amount of the refund):
// slide batch --column amount read the first one with no word, the wrong answer half the
// time. It now refuses, as SQL refuses an ambiguous column, on both paths.
func TestDuplicateColumnRefused(t *testing.T) {
	in := "ts,amount,amount,key,key\n1000,1,5,a,b\n2000,2,6,a,b\n"
	path := writeTemp(t, "dup.csv", []byte(in))
	for _, c := range []struct {
		j    Job
		want string
	}{
		{Job{Size: 1, Column: "amount"}, `"amount" is columns 2 and 3`},
		{Job{Span: time.Second, Column: "amount"}, `"amount" is columns 2 and 3`},
		{Job{Size: 1, Column: "amount", SkipBad: true}, `"amount" is columns 2 and 3`},
		{Job{Size: 1, Column: "ts", GroupBy: "key"}, `"key" is columns 4 and 5`},
	} {
		_, err := runAllFile(t, c.j, path)
		if !errors.Is(err, ErrDuplicateColumn) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.j, err)
		}
	}
	if _, _, err := runJob(t, Job{Size: 1, Column: "amount"}, in); !errors.Is(err, ErrDuplicateColumn) {
		t.Errorf("Run: %v", err)
	}
	// Columns the job does not read may repeat.
	if rep, err := runAllFile(t, Job{Size: 1, Column: "ts"}, path); err != nil || rep.Results[0].Best != 2000 {
		t.Errorf("ts: %+v %v", rep, err)
	}
}

// Excel for Mac's "CSV (Macintosh)" ends lines with CR alone: the whole file is the header,
// and the error listed its columns with the raw CRs, which a terminal turns into an
// overwritten, unreadable line. The list is cut at the first CR and the cause named.
func TestCROnlyLinesNamed(t *testing.T) {
	in := "ts,amount\r1000,1\r2000,2\r"
	for _, j := range []Job{{Size: 1, Column: "amount"}, {Size: 1}, {Span: time.Second}} {
		_, _, err := runJob(t, j, in)
		if err == nil || strings.ContainsRune(err.Error(), '\r') || !strings.Contains(err.Error(), "carriage return") {
			t.Errorf("%+v: %q", j, err)
		}
	}
}

// FuzzJobTimeWindow: a time window job over any CSV gives the same result, series and error
// read sequentially or in tiny parallel chunks, and returns (timestamps near the ends of
// int64 once made it spin forever: the seed below).
func FuzzJobTimeWindow(f *testing.F) {
	for _, s := range []string{
		"ts,amount\n-9223372036854775800,1\n-9223372036854775700,2\n-9223372036854775000,4\n0,8\n",
		"ts,amount\n9223372036854775000,1\n9223372036854775807,2\n",
		"ts,amount\n1000,1\n1000,2\n2999,3\n3000,-4\n",
		"ts,amount\n2000,1\n1000,2\n",
		"ts,amount\n2025-11-30T08:00:00Z,1\n1764489600500,2.5\n",
	} {
		f.Add(s, uint16(1000), uint8(0))
	}
	aggs := []string{AggSum, AggCount, AggMax, AggMin, AggP50, AggAvg, AggRate}
	defer func(seq bool, size int) { sequentialOnly, chunkSize = seq, size }(sequentialOnly, chunkSize)
	f.Fuzz(func(t *testing.T, in string, spanMs uint16, agg uint8) {
		j := Job{Span: time.Duration(1+int(spanMs)) * time.Millisecond, Column: "amount",
			Agg: aggs[int(agg)%len(aggs)], Format: FormatCSV}
		run := func(seq bool, size int) string {
			sequentialOnly, chunkSize = seq, size
			res, series, err := runJob(t, j, in)
			return fmt.Sprint(res, series, err)
		}
		if a, b := run(true, 1<<20), run(false, 16); a != b {
			t.Fatalf("sequential %s\nchunks     %s", a, b)
		}
	})
}

// A ts column of unix microseconds (or nanoseconds), read as milliseconds, put every row
// some 55,000 years ahead and each 60 s window a row or two wide: "best":20 instead of 1342,
// exit 0. Times outside RFC 3339's years 0000-9999 are refused, naming the likely cause.
func TestMicrosecondTimestampsRefused(t *testing.T) {
	for _, in := range []string{
		"ts,amount\n1764489600040000,1\n1764489600041000,2\n",
		"ts,amount\n1764489600040000000,1\n",
		"ts,amount\n-62167219200001,1\n",
	} {
		_, _, err := runJob(t, Job{Span: time.Minute, Column: "amount"}, in)
		if !errors.Is(err, ErrTimeRange) || !errors.Is(err, ErrTime) || !strings.Contains(err.Error(), "microseconds or nanoseconds?") {
			t.Errorf("%q: %v", in, err)
		}
		path := writeTemp(t, "us.csv", []byte(in))
		if _, err := runAllFile(t, Job{Span: time.Minute, Column: "amount", GroupBy: "amount"}, path); !errors.Is(err, ErrTimeRange) {
			t.Errorf("%q row by row: %v", in, err)
		}
	}
	ok := "ts,amount\n-62167219200000,1\n0000-01-01T00:00:00.001Z,1\n253402300799999,1\n"
	if res, _, err := runJob(t, Job{Span: time.Minute, Column: "amount"}, ok); err != nil || res.N != 3 {
		t.Errorf("years 0000 and 9999: %+v %v", res, err)
	}
}

// The same for a Parquet INT64 column of unix microseconds (no TIMESTAMP type to say so), on
// the fast path and row by row.
func TestParquetMicrosecondColumnRefused(t *testing.T) {
	type row struct {
		TS     int64   `parquet:"ts"`
		Amount float64 `parquet:"amount"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[row](&b)
	if _, err := w.Write([]row{{1_764_489_600_040_000, 1}, {1_764_489_600_041_000, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := writeTemp(t, "us.parquet", b.Bytes())
	for _, j := range []Job{{Span: time.Minute, Column: "amount"}, {Span: time.Minute, Column: "amount", SkipBad: true},
		{Span: time.Minute, Column: "amount", Aggs: []string{"sum", "count"}}} {
		rep, err := runAllFile(t, j, path)
		if j.SkipBad {
			if !errors.Is(err, ErrNoRows) || rep.Skipped[SkipBadTime] != 2 {
				t.Errorf("skip-bad: %v, skipped %v", err, rep.Skipped)
			}
		} else if !errors.Is(err, ErrTimeRange) || !strings.Contains(err.Error(), `"1764489600040000"`) {
			t.Errorf("%v: %v", j.Aggs, err)
		}
	}
}
