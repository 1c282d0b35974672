package batch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// readParquetText reads every column of a Parquet file through slide's own reader, as text.
func readParquetText(t *testing.T, b []byte) (cols []string, rows [][]string) {
	t.Helper()
	p, err := newParquetRows(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cols = p.Columns()
	if err := p.Select(cols); err != nil {
		t.Fatal(err)
	}
	for {
		fields, line, err := p.Next()
		if err == io.EOF {
			return cols, rows
		}
		if err != nil {
			t.Fatal(err)
		}
		if line != int64(len(rows)+1) {
			t.Fatalf("row %d read as line %d", len(rows), line)
		}
		row := make([]string, len(fields))
		for i, f := range fields {
			row[i] = string(f)
		}
		rows = append(rows, row)
	}
}

// csvText is a series row as the CSV series writes it (cmd/slide): the text to match.
func csvText(r SeriesRow, group bool) []string {
	var out []string
	if group {
		out = append(out, r.Group)
	}
	out = append(out, strconv.FormatInt(r.Row, 10), strconv.FormatInt(r.Line, 10))
	if r.HasTS {
		out = append(out, strconv.FormatInt(r.TS, 10), FormatTime(r.TS))
	}
	for _, v := range r.Values {
		out = append(out, strconv.FormatFloat(v, 'f', -1, 64))
	}
	return out
}

// sameField compares a field read back with the CSV text: numbers by value (the reader
// writes doubles in encoding/json's format, 1e+21 where CSV has 21 digits), the rest exactly.
func sameField(got, want string) bool {
	if got == want {
		return true
	}
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	return err1 == nil && err2 == nil && g == w
}

// TestParquetSeriesRoundTrip: the windows of a grouped time-window job with three aggregates,
// written by ParquetSeriesWriter and read back through slide's own Parquet reader, are the
// rows and columns of the CSV series, in order, across several row groups.
func TestParquetSeriesRoundTrip(t *testing.T) {
	var in strings.Builder
	in.WriteString("ts,amount,region\n")
	const n = 3000
	for i := range n {
		in.WriteString(strconv.Itoa(1_700_000_000_000+i*250) + "," + strconv.FormatFloat(float64(i%97)*1.25e3+0.5, 'f', -1, 64) + "," + []string{"eu", "us", `"ap,""x"""`}[i%3] + "\n")
	}
	job := Job{Span: 2_000_000_000, Aggs: []string{"sum", "p99.9", "max"}, Agg: "sum", Column: "amount", GroupBy: "region"}
	var buf bytes.Buffer
	w, err := NewParquetSeriesWriter(&buf, job)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	_, err = job.RunAll(context.Background(), strings.NewReader(in.String()), "orders.csv", func(r SeriesRow) error {
		want = append(want, csvText(r, true))
		return w.Write(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A huge value and a tiny one, whose text differs between the two writers.
	extra := SeriesRow{Group: "", Row: n, Line: n + 2, TS: 1_700_000_999_000, HasTS: true, Values: []float64{1e21, 1e-7, math.MaxFloat64}}
	want = append(want, csvText(extra, true))
	if err := w.Write(extra); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte("PAR1")) {
		t.Fatal("not a Parquet file")
	}
	cols, got := readParquetText(t, buf.Bytes())
	if strings.Join(cols, ",") != "group,row,line,ts,time,sum,p99.9,max" {
		t.Fatalf("columns %v, want the CSV header's", cols)
	}
	if len(got) != len(want) || len(want) != n+1 {
		t.Fatalf("%d rows read back, %d written (want %d)", len(got), len(want), n+1)
	}
	for i := range want {
		for j := range want[i] {
			if !sameField(got[i][j], want[i][j]) {
				t.Fatalf("row %d, column %s: %q read back, %q in the CSV", i, cols[j], got[i][j], want[i][j])
			}
		}
	}
}

// A count-window job without groups has no group, ts or time column; a series row with the
// wrong number of values is refused, not written.
func TestParquetSeriesCountWindow(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewParquetSeriesWriter(&buf, Job{Size: 2, Agg: "sum"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		if err := w.Write(SeriesRow{Row: i, Line: i + 2, Values: []float64{float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(SeriesRow{Values: []float64{1, 2}}); err == nil {
		t.Error("a row of two values for one aggregate was written")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cols, rows := readParquetText(t, buf.Bytes())
	if strings.Join(cols, ",") != "row,line,sum" || len(rows) != 3 || strings.Join(rows[2], ",") != "2,4,2" {
		t.Fatalf("columns %v rows %v", cols, rows)
	}
	if _, err := NewParquetSeriesWriter(io.Discard, Job{Size: 2, Aggs: []string{"sum", "sum"}}); !errors.Is(err, ErrConfig) {
		t.Errorf("two aggregates of one name: %v, want ErrConfig", err)
	}
}
