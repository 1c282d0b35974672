package batch

import (
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// parquetSeriesRowGroup is the rows of one row group the writer buffers before writing it:
// memory stays O(row group) whatever the number of windows.
const parquetSeriesRowGroup = 128 << 10

// ParquetSeriesWriter writes the windows of a RunAll (its SeriesRow callback) as a Parquet
// file with the columns and names of the CSV series, in that order: group (a string, with
// GroupBy), row and line (INT64), ts (INT64 TIMESTAMP(MILLIS, UTC)) and time (a string, with
// a time window), then one DOUBLE per aggregate named as Job.Aggregates names it (sum, p95,
// p99.9). Every column is required; pages are zstd-compressed, row groups hold 128 Ki rows.
// Close writes the footer: a file without it is not Parquet. Not safe for concurrent use.
type ParquetSeriesWriter struct {
	w     *parquet.Writer
	group bool
	ts    bool
	aggs  int
	rows  []parquet.Row
	n     int
	text  []byte // the group and time bytes of the rows buffered, reset once they are written
}

// NewParquetSeriesWriter returns a writer of job's series to w. It writes nothing until the
// first row group is full or Close is called.
func NewParquetSeriesWriter(w io.Writer, job Job) (*ParquetSeriesWriter, error) {
	aggs := job.Aggregates()
	var fields []reflect.StructField
	add := func(name, opts string, t reflect.Type) {
		tag := name
		if opts != "" {
			tag += "," + opts
		}
		fields = append(fields, reflect.StructField{Name: "F" + strconv.Itoa(len(fields)), Type: t, Tag: reflect.StructTag(`parquet:"` + tag + `"`)})
	}
	var str, i64, f64 = reflect.TypeFor[string](), reflect.TypeFor[int64](), reflect.TypeFor[float64]()
	s := &ParquetSeriesWriter{group: job.GroupBy != "", ts: job.Span > 0, aggs: len(aggs)}
	if s.group {
		add("group", "", str)
	}
	add("row", "", i64)
	add("line", "", i64)
	if s.ts {
		add("ts", "timestamp(millisecond:utc)", i64)
		add("time", "", str)
	}
	seen := map[string]bool{"group": s.group, "row": true, "line": true, "ts": s.ts, "time": s.ts}
	for _, a := range aggs {
		if seen[a] {
			return nil, fmt.Errorf("%w: aggregate %q named twice in the series columns", ErrConfig, a)
		}
		seen[a] = true
		add(a, "", f64)
	}
	// A struct of the columns in order (parquet.Group would sort them by name); rows are
	// written as values, so the struct is only the schema.
	schema := parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Elem().Interface())
	s.w = parquet.NewWriter(w, schema, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetSeriesRowGroup))
	return s, nil
}

// Write adds one window. Its Values must be one per aggregate, as RunAll hands them.
func (s *ParquetSeriesWriter) Write(r SeriesRow) error {
	if len(r.Values) != s.aggs {
		return fmt.Errorf("series row with %d values, want %d", len(r.Values), s.aggs)
	}
	if s.n == len(s.rows) {
		s.rows = append(s.rows, nil)
	}
	row := s.rows[s.n][:0]
	col := func(v parquet.Value) { row = append(row, v.Level(0, 0, len(row))) }
	// Byte arrays point into s.text: WriteRows copies them, so one buffer serves a batch
	// instead of two allocations a row.
	bytesCol := func(from int) { col(parquet.ByteArrayValue(s.text[from:len(s.text):len(s.text)])) }
	if s.group {
		from := len(s.text)
		s.text = append(s.text, r.Group...)
		bytesCol(from)
	}
	col(parquet.Int64Value(r.Row))
	col(parquet.Int64Value(r.Line))
	if s.ts {
		col(parquet.Int64Value(r.TS))
		from := len(s.text)
		s.text = appendTime(s.text, r.TS)
		bytesCol(from)
	}
	for _, v := range r.Values {
		col(parquet.DoubleValue(v))
	}
	s.rows[s.n] = row
	s.n++
	if s.n == 1024 { // hand rows to the writer in batches: one call per row costs more
		return s.flushRows()
	}
	return nil
}

func (s *ParquetSeriesWriter) flushRows() error {
	if s.n == 0 {
		return nil
	}
	_, err := s.w.WriteRows(s.rows[:s.n])
	s.n, s.text = 0, s.text[:0]
	return err
}

// Close writes the rows still buffered and the footer. It does not close the io.Writer.
func (s *ParquetSeriesWriter) Close() error {
	if err := s.flushRows(); err != nil {
		return err
	}
	return s.w.Close()
}
