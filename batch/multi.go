package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/slide-metrics/slide/window"
)

// SeriesRow is one window of the series output of RunAll: the window ending at data row Row
// (0-based, counting skipped rows too) on file line Line, with TS its timestamp (time windows;
// unix ms) and Values[i] the value of Job.Aggregates()[i].
type SeriesRow struct {
	Group  string
	Row    int64
	Line   int64
	TS     int64
	HasTS  bool
	Values []float64
}

// Report is what RunAll found: one Result per group and aggregate (groups in byte order, then
// aggregates in the order asked), the rows read and, with SkipBad, the bad rows by reason.
type Report struct {
	Results []Result
	// N is the number of good data rows; Skipped counts the bad rows by reason (SkipBad), and
	// FirstSkipped has the file line of the first of each reason.
	N            int64
	Skipped      map[string]int64
	FirstSkipped map[string]int64
}

// SkippedTotal is the number of bad rows skipped.
func (r Report) SkippedTotal() int64 {
	var n int64
	for _, c := range r.Skipped {
		n += c
	}
	return n
}

// Skip reasons of Report.Skipped.
const (
	SkipNotNumber   = "not_a_number"
	SkipNotFinite   = "not_finite"
	SkipBadTime     = "bad_timestamp"
	SkipUnsorted    = "unsorted_timestamp"
	SkipFieldCount  = "wrong_field_count"
	SkipSyntax      = "malformed_row"
	SkipMissing     = "missing_field"
	SkipOtherReason = "other"
)

// skipReason maps a row error to its Report.Skipped key.
func skipReason(err error) string {
	switch {
	case errors.Is(err, ErrNotNumber):
		return SkipNotNumber
	case errors.Is(err, ErrNotFinite), errors.Is(err, ErrOverflow):
		return SkipNotFinite
	case errors.Is(err, ErrTime):
		return SkipBadTime
	case errors.Is(err, ErrUnsorted):
		return SkipUnsorted
	case errors.Is(err, ErrFieldCount):
		return SkipFieldCount
	case errors.Is(err, ErrSyntax):
		return SkipSyntax
	case errors.Is(err, ErrMissingColumn):
		return SkipMissing
	}
	return SkipOtherReason
}

// Aggregates returns the aggregates the job computes, in order: Aggs, or Agg alone, each by
// the name Result.Agg and the series give it (window.Stat.String: "0.75" and "P75" are p75).
func (j Job) Aggregates() []string {
	j = j.withDefaults()
	if len(j.Aggs) > 0 {
		return j.Aggs
	}
	return []string{j.Agg}
}

// aggName is the one name of an aggregate (window.Stat.String); a name ParseStat does not
// read is kept for Validate to refuse.
func aggName(a string) string {
	if st, ok := window.ParseStat(a); ok {
		return st.String()
	}
	return a
}

// rowByRow reports whether the job needs the row-by-row path: everything but one aggregate
// over a plain comma-separated file with nothing asked beyond the best window.
func (j Job) rowByRow() bool {
	return len(j.Aggs) > 1 || j.GroupBy != "" || j.IDColumn != "" || j.SkipBad ||
		(j.Delimiter != 0 && j.Delimiter != ',') || j.countOnly() && j.Column == "" ||
		j.Format == FormatParquet
}

// countOnly reports whether every aggregate is count or rate (which need no value column).
func (j Job) countOnly() bool {
	for _, a := range j.Aggregates() {
		if a != AggCount && a != AggRate {
			return false
		}
	}
	return true
}

// RunAll is the job over an input of any supported kind, with everything a person reading the
// result needs: the input may be CSV (Delimiter), NDJSON or Parquet, gzip- or zstd-compressed
// (detected by magic bytes; name is the file name, "" or "-" for a stream, and only helps to
// recognize Parquet); the result names the first and last row of each best window by file line
// (and IDColumn) and, for time windows, time; GroupBy partitions the rows; several Aggs are
// computed in one pass; SkipBad counts bad rows instead of stopping.
//
// A plain job over an uncompressed CSV or NDJSON regular file takes Run's fast path, then
// finds the two lines of its best window by a second scan of the mapped file up to the
// window's end. Everything else, and every stream, goes row by row: memory O(groups × window)
// at most (each group's windows grow with the rows they hold).
// series, when not nil, receives every window (see SeriesRow), in input order.
func (j Job) RunAll(ctx context.Context, r io.Reader, name string, series func(SeriesRow) error) (Report, error) {
	if err := j.Validate(); err != nil {
		return Report{}, err
	}
	f, isFile := r.(*os.File)
	var st os.FileInfo
	if isFile {
		var err error
		if st, err = f.Stat(); err != nil || !st.Mode().IsRegular() {
			isFile = false
		}
	}
	// Parquet: a file, by magic bytes or name.
	if isFile && j.Format != FormatCSV && j.Format != FormatNDJSON {
		var head [4]byte
		n, _ := f.ReadAt(head[:], 0)
		if _, format := sniff(head[:n], name); format == FormatParquet || j.Format == FormatParquet {
			src, err := newParquetRows(f, st.Size())
			if err != nil {
				return Report{}, err
			}
			defer src.Close()
			if rep, ok, err := j.runParquetFast(ctx, src, series); ok {
				return rep, err
			}
			return j.runRows(ctx, src, series, func() int64 { return 0 })
		}
	}
	if j.Format == FormatParquet {
		return Report{}, fmt.Errorf("%w: Parquet needs a file, not a stream (%s)", ErrParquet, streamName(name))
	}
	var fileHead []byte
	if isFile {
		var head [4]byte
		n, _ := f.ReadAt(head[:], 0)
		fileHead = head[:n]
	}
	comp, _ := sniff(fileHead, name)
	if isFile && comp == CompressionNone && !j.rowByRow() && series == nil {
		return j.runFast(ctx, f)
	}
	counter := &countingReader{r: r}
	in, head, err := peekReader(counter, 4)
	if err != nil {
		return Report{}, err
	}
	if !isFile {
		comp, _ = sniff(head, name)
		if comp == CompressionNone {
			if _, format := sniff(head, ""); format == FormatParquet {
				return Report{}, fmt.Errorf("%w: Parquet needs a file, not a stream (%s)", ErrParquet, streamName(name))
			}
		}
	}
	in, closeIn, err := decompress(in, comp)
	if err != nil {
		return Report{}, err
	}
	defer closeIn()
	src, err := j.openText(in)
	if err != nil {
		return Report{}, err
	}
	return j.runRows(ctx, src, series, func() int64 { return counter.n })
}

func streamName(name string) string {
	if name == "" || name == "-" {
		return "stdin"
	}
	return name
}

// openText opens a CSV or NDJSON row source (Format, or auto: '{' first means NDJSON).
func (j Job) openText(in io.Reader) (rowSource, error) {
	format := j.withDefaults().Format
	if format == FormatAuto {
		br, head, err := peekReader(in, 4096)
		if err != nil {
			return nil, err
		}
		in = br
		format = FormatCSV
		if looksNDJSON(head) {
			format = FormatNDJSON
		}
	}
	if format == FormatNDJSON {
		return newNDJSONRows(in)
	}
	delim := j.Delimiter
	if delim == 0 {
		delim = ','
	}
	return newCSVRows(in, delim)
}

// runFast is Run's fast path plus the lines of the best window (one more scan of the mapping).
func (j Job) runFast(ctx context.Context, f *os.File) (Report, error) {
	if len(j.Aggs) == 1 { // Run computes Agg
		j.Agg, j.Aggs = j.Aggs[0], nil
	}
	res, err := j.Run(ctx, f, nil)
	if err != nil {
		// Run's own row errors (unsorted time, overflow) know the row, not the line.
		var re *RowError
		if errors.As(err, &re) && re.Line == 0 && re.Row >= 0 {
			if lines, lerr := j.locate(f, re.Row, re.Row); lerr == nil {
				re.Line = lines[0]
			}
		}
		return Report{}, err
	}
	if res.Start >= 0 {
		if lines, err := j.locate(f, res.Start, res.End); err == nil {
			res.StartLine, res.EndLine = lines[0], lines[1]
		}
	}
	return Report{Results: []Result{res}, N: res.N}, nil
}

// detectColumn is valueColumn over a row source: the only numeric column of the first row that
// is neither the time, group nor id column.
func (j Job) detectColumn(src rowSource) (string, error) {
	return j.pickColumn(src, j.TimeColumn, j.GroupBy, j.IDColumn)
}

// genFixedSum is the count-window sum/avg of the row-by-row path: fixed point (see fixedSpec)
// while every value has a fixed-point form, then the compensated float64 sum seeded with the
// window, exactly as Run does, so both paths give the same bits.
type genFixedSum struct {
	fs *fixedSum
	fl *countSum
}

func newGenFixedSum(fx *fixedSpec, k int, avg bool) *genFixedSum {
	return &genFixedSum{fs: newFixedSum(fx, k, true, avg)}
}

func (a *genFixedSum) feed(vals []float64, ts []int64, out []float64, start, sts []int64) {
	for i, v := range vals {
		if a.fs != nil {
			if m, ok := a.fs.fx.toFixed(v); ok {
				f := a.fs
				if f.n == f.k {
					f.push(m)
				} else {
					f.fill(m)
				}
				out[i] = f.value(f.s)
				continue
			}
			w, _ := a.fs.sumWindow()
			a.fl, a.fs = &countSum{w: w, avg: a.fs.avg}, nil
		}
		a.fl.feed(vals[i:i+1], nil, out[i:i+1], nil, nil)
	}
}
