package batch

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// Aggregates a Job computes over every window: these, rate (time windows), and any other
// statistic window.ParseStat reads (p90, p99.9, 0.75: every percentile), named as Result.Agg
// names it (window.Stat.String: "0.75" is p75).
const (
	AggSum   = "sum"
	AggAvg   = "avg"
	AggMin   = "min"
	AggMax   = "max"
	AggCount = "count"
	AggRate  = "rate"
	AggP50   = "p50"
	AggP95   = "p95"
	AggP99   = "p99"
)

// Which window wins.
const (
	BestMax = "max"
	BestMin = "min"
)

// Input formats.
const (
	FormatAuto   = "auto"
	FormatCSV    = "csv"
	FormatNDJSON = "ndjson"
)

// DefaultTimeColumn is the time column of a time window when Job.TimeColumn is empty.
const DefaultTimeColumn = "ts"

// Job errors that are not about one row.
var (
	ErrConfig     = errors.New("invalid batch job")
	ErrColumn     = errors.New("cannot choose the value column")
	ErrTooFewRows = errors.New("fewer rows than the window size")
	ErrOverflow   = errors.New("window value overflows float64")
	// ErrInputChanged: a mapped input file shrank while it was read (see Run).
	ErrInputChanged = errors.New("input file changed while being read")
)

// Job is one streaming pass over a file that finds the best sliding window. Exactly one of Size
// (a count window) and Span (a time window) is set.
//
// Zero fields take the documented defaults; Validate reports a config Run would refuse. A Job is
// a value: Run may be called concurrently on the same Job with different inputs.
type Job struct {
	// Size is the count window: the Size most recent rows. A file of n rows has n − Size + 1
	// windows; the first ends at row Size − 1.
	Size int
	// Span is the time window: the rows whose timestamp is in (ts − Span, ts], ts being the
	// timestamp of the row that ends the window. Every row ends one window. A whole number of
	// milliseconds.
	Span time.Duration
	// TimeColumn names the timestamp column (unix ms or RFC 3339) for Span; default "ts". It is
	// never picked as the value column, with or without Span.
	TimeColumn string
	// Column names the value column. Default: the only column, other than TimeColumn, whose
	// first-row value is a number; with none or several, Run fails with ErrColumn naming them.
	Column string
	// Agg is the aggregate of each window, in window.ParseStat's words: sum, avg, min, max,
	// count, rate (rows per second of a time window's span) or a percentile (p50, p95, p99.9,
	// 0.75); default sum. Quantiles come from sketch bins (relative accuracy of Sketch)
	// clamped to the window's exact min and max; p0 and p100 are the exact min and max.
	Agg string
	// Best says which window wins: the one with the largest (max, default) or smallest (min)
	// aggregate; the first one on ties.
	Best string
	// Format is csv, ndjson or auto (default): auto reads NDJSON when the first non-blank byte
	// is '{', CSV otherwise.
	Format string
	// Sketch is the quantile sketch for percentiles; zero is DDSketch at 1% relative accuracy.
	Sketch sketch.Kind
	// Logger receives one debug line per run; nil discards.
	Logger *slog.Logger

	// The fields below are RunAll's (Run ignores them; see RunAll for which jobs take the
	// row-by-row path).

	// Aggs computes several aggregates of the same windows in one pass (each has its own best
	// window); when set it replaces Agg. count and rate alone need no value column.
	Aggs []string
	// GroupBy partitions the rows by this column's text (SQL's PARTITION BY): every group has
	// its own windows and best window, for count and time windows alike. Memory is
	// O(groups × window) at most: a group's windows grow with its rows, so a group of a few
	// rows costs a few, whatever Size is.
	GroupBy string
	// IDColumn names a column (an order id) whose values name the first and last row of each
	// best window in the result, beside their file lines.
	IDColumn string
	// SkipBad skips bad rows (not a number, bad timestamp, unsorted, wrong field count, …)
	// and counts them by reason in Report.Skipped, instead of stopping at the first.
	SkipBad bool
	// Delimiter is the CSV field separator; default ','.
	Delimiter byte
	// Progress, when set, is called every few thousand rows of the row-by-row path with the
	// rows and the input bytes (compressed, as read) so far.
	Progress func(rows, bytes int64)
}

// batchRows is how many rows a Reader parses per call: big enough to amortize the call, small
// enough to stay in L1/L2 (rows × 24 bytes).
const batchRows = 2048

func (j Job) withDefaults() Job {
	// Aggregates by their one name (" P95" and "0.95" are p95), so the job compares names.
	j.Agg = aggName(cmp.Or(j.Agg, AggSum))
	if len(j.Aggs) > 0 {
		aggs := make([]string, len(j.Aggs))
		for i, a := range j.Aggs {
			aggs[i] = aggName(a)
		}
		j.Aggs = aggs
	}
	j.Best = cmp.Or(j.Best, BestMax)
	j.Format = cmp.Or(j.Format, FormatAuto)
	j.TimeColumn = cmp.Or(j.TimeColumn, DefaultTimeColumn)
	return j
}

// Validate reports a config Run would refuse; the error wraps ErrConfig.
func (j Job) Validate() error {
	d := j.withDefaults()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case j.Size < 0:
		return bad("size %d: must be positive", j.Size)
	case j.Span < 0:
		return bad("span %v: must be positive", j.Span)
	case j.Size > 0 && j.Span > 0:
		return bad("set a count window (size) or a time window (span), not both")
	case j.Size == 0 && j.Span == 0:
		return bad("set a count window (size) or a time window (span)")
	case j.Span > 0 && j.Span%time.Millisecond != 0:
		return bad("span %v: must be a whole number of milliseconds", j.Span)
	}
	for _, a := range append([]string{d.Agg}, j.Aggs...) {
		st, ok := window.ParseStat(a)
		switch {
		case !ok:
			return bad("agg %q: want %s or a percentile such as p95, p99.9 or 0.75", strings.TrimSpace(a), window.StatNames)
		case st.Kind == window.StatRate && j.Size > 0:
			return bad("agg %q: needs a time window (span): a count window has no length in time", a)
		case st.Kind == window.StatQuantile:
			if err := d.Sketch.Validate(); err != nil {
				return fmt.Errorf("%w: %w", ErrConfig, err)
			}
		}
	}
	for i, a := range d.Aggs {
		if slices.Contains(d.Aggs[:i], a) {
			return bad("agg %q listed twice", j.Aggs[i])
		}
	}
	switch j.Delimiter {
	case '"', '\n', '\r':
		return bad("delimiter %q: cannot be a quote or a line break", j.Delimiter)
	}
	if d.Best != BestMax && d.Best != BestMin {
		return bad("best %q: want max or min", j.Best)
	}
	if d.Format != FormatAuto && d.Format != FormatCSV && d.Format != FormatNDJSON && d.Format != FormatParquet {
		return bad("format %q: want auto, csv, ndjson or parquet", j.Format)
	}
	return nil
}

// NewReader returns the Reader for format (csv, ndjson, or auto: sniff the first non-blank
// byte, '{' meaning NDJSON).
func NewReader(r io.Reader, format string) (Reader, error) {
	switch format {
	case FormatCSV:
		return NewCSVReader(r)
	case FormatNDJSON:
		return NewNDJSONReader(r)
	case FormatAuto, "":
	default:
		return nil, fmt.Errorf("%w: format %q: want auto, csv or ndjson", ErrConfig, format)
	}
	if data, ok := r.(memInput); ok {
		if looksNDJSON(data) {
			return NewNDJSONReader(bytes.NewReader(data))
		}
		return newCSVReaderData(data)
	}
	br := bufio.NewReaderSize(r, 4096) // reads larger than this bypass its buffer
	for n := 1; ; n++ {
		p, err := br.Peek(n)
		if len(p) < n {
			if err == io.EOF || err == bufio.ErrBufferFull {
				return NewCSVReader(br) // blank or huge leading whitespace: let CSV report it
			}
			return nil, fmt.Errorf("reading input: %w", err)
		}
		c := p[n-1]
		if isJSONSpace(c) || (n <= 3 && c == "\xef\xbb\xbf"[n-1] && p[0] == 0xef) {
			continue
		}
		if c == '{' {
			return NewNDJSONReader(br)
		}
		return NewCSVReader(br)
	}
}

// memInput is a whole input in memory (a mapped file), handed to NewReader through Run. It
// has no Read method on purpose: only NewReader takes it.
type memInput []byte

func (memInput) Read([]byte) (int, error) { return 0, io.EOF }

// looksNDJSON reports whether the first non-blank byte (after a UTF-8 byte order mark) is '{'.
func looksNDJSON(p []byte) bool {
	for n, c := range p {
		if isJSONSpace(c) || (n < 3 && c == "\xef\xbb\xbf"[n] && p[0] == 0xef) {
			continue
		}
		return c == '{'
	}
	return false
}

// faultError turns the panic of a read from a mapped file that shrank under it (SIGBUS, with
// debug.SetPanicOnFault) into ErrInputChanged; any other panic goes on.
func faultError(e any) error {
	if re, ok := e.(runtime.Error); ok {
		if _, ok := re.(interface{ Addr() uintptr }); ok {
			return fmt.Errorf("reading input: %w (%v)", ErrInputChanged, re)
		}
	}
	panic(e)
}

// Run reads r in one pass (memory O(window), not O(file)), finds the best window and, when
// seriesOut is not nil, writes every window's value to it, one per line in input order: a count
// window has a value once Size rows are in (n − Size + 1 lines), a time window one per row.
// It stops with ctx.Err() when ctx is done (checked every few thousand rows). Bad rows stop it
// with a *RowError naming the row and column.
//
// When r is an *os.File of a regular file, Run maps it into memory (mmap, read-only) instead of
// reading it: the parallel CSV parser then works on the page cache directly, with no copy.
// That memory is the kernel's page cache, not the process heap, and the heap stays O(window).
// Pipes, terminals and other readers are streamed. The file must not shrink during the run: if
// it does, Run returns an error wrapping ErrInputChanged.
func (j Job) Run(ctx context.Context, r io.Reader, seriesOut io.Writer) (res Result, err error) {
	if err := j.Validate(); err != nil {
		return Result{}, err
	}
	if f, ok := r.(*os.File); ok {
		if data, unmap, ok := mapFile(f); ok {
			defer unmap()
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if e := recover(); e != nil {
					err = faultError(e)
				}
			}()
			r = memInput(data)
		}
	}
	rd, err := NewReader(r, j.withDefaults().Format)
	if err != nil {
		return Result{}, err
	}
	return j.RunReader(ctx, rd, seriesOut)
}

// RunReader is Run over an already opened Reader.
func (j Job) RunReader(ctx context.Context, rd Reader, seriesOut io.Writer) (Result, error) {
	if err := j.Validate(); err != nil {
		return Result{}, err
	}
	j = j.withDefaults()
	log := j.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	began := time.Now()
	if c, ok := rd.(io.Closer); ok {
		defer c.Close() // stops a parallel reader's goroutines when the job ends early
	}
	timeCol := ""
	if j.Span > 0 {
		timeCol = j.TimeColumn
		if indexOf(rd.Columns(), timeCol) < 0 {
			return Result{}, missingColumn(timeCol, rd.Columns())
		}
	}
	col, err := j.valueColumn(rd)
	if err != nil {
		return Result{}, err
	}
	var fx *fixedSpec
	if j.Size > 0 && (j.Agg == AggSum || j.Agg == AggAvg) {
		var first []byte
		if fr := rd.FirstRow(); fr != nil {
			if i := indexOf(rd.Columns(), col); i >= 0 && i < len(fr) {
				first = fr[i]
			}
		}
		s := newFixedSpec(first, j.Size)
		fx = &s
		switch c := rd.(type) { // before Select, which starts the parallel parser
		case *CSVReader:
			c.fixed = fx
		case *parquetFast:
			c.fixed = fx
		}
	}
	if err := uniqueColumns(rd.Columns(), col, timeCol); err != nil {
		return Result{}, err
	}
	if err := rd.Select(col, timeCol); err != nil {
		return Result{}, err
	}
	agg, err := j.aggregator()
	if err != nil {
		return Result{}, err
	}

	res := Result{Agg: j.Agg, Size: j.Size, Span: j.Span, Best: math.NaN(), Start: -1, End: -1}
	var series *bufio.Writer
	if seriesOut != nil {
		series = bufio.NewWriterSize(seriesOut, 256<<10)
	}
	var (
		vals   = make([]float64, batchRows)
		out    = make([]float64, batchRows)
		start  = make([]int64, batchRows)
		sts    = make([]int64, batchRows)
		ts     []int64
		num    []byte
		row    int64
		prevTS = int64(math.MinInt64)
		isMax  = j.Best == BestMax
		found  = false
		first  = int64(j.Size - 1) // first row that ends a window
	)
	if j.Span > 0 {
		ts = make([]int64, batchRows)
		first = 0
	}
	var (
		carry    []float64 // values read but not taken by the fixed-point path
		carryErr error     // and the error Read returned with them
	)
	if fx != nil {
		fs := newFixedSum(fx, j.Size, isMax, j.Agg == AggAvg)
		ivals := make([]int64, batchRows)
		fr, direct := rd.(fixedReader)
		for {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			var n int
			more := true
			if direct {
				n, more = fr.readFixed(ivals)
			} else {
				var k int
				k, carryErr = rd.Read(vals, nil)
				for n < k {
					m, ok := fx.toFixed(vals[n])
					if !ok {
						break
					}
					ivals[n] = m
					n++
				}
				if n < k || carryErr != nil {
					carry, more = vals[n:k], false
				}
			}
			if err := fs.consume(ivals[:n], row, series, &num); err != nil {
				return res, err
			}
			row += int64(n)
			res.N = row
			if !more {
				break
			}
		}
		// From here on (if anything is left) the compensated float64 sum takes over, seeded
		// with the window so far.
		w, err := fs.sumWindow()
		if err != nil {
			return res, err
		}
		agg = &countSum{w: w, avg: fs.avg}
		if fs.found {
			found = true
			res.Best, res.End = fs.value(fs.best), fs.end
			res.Start = res.End - int64(j.Size) + 1
		}
		if len(carry) > 0 {
			carry = append([]float64(nil), carry...) // vals is reused below
		} else if carryErr == io.EOF {
			carry, carryErr = nil, nil // Read reports the end again
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var n int
		var rerr error
		if carry != nil || carryErr != nil {
			n, rerr = copy(vals, carry), carryErr
			carry, carryErr = nil, nil
		} else {
			n, rerr = rd.Read(vals, ts)
		}
		if j.Span > 0 {
			for i, t := range ts[:n] {
				if t < prevTS {
					return res, &RowError{Row: row + int64(i), Column: timeCol,
						Value: strconv.FormatInt(t, 10) + " < " + strconv.FormatInt(prevTS, 10), Err: ErrUnsorted}
				}
				prevTS = t
			}
		}
		agg.feed(vals[:n], ts[:min(n, len(ts))], out[:n], start[:n], sts[:n])
		i0 := 0
		if row < first {
			i0 = int(min(first-row, int64(n)))
		}
		for i := i0; i < n; i++ {
			w := out[i]
			if !finite(w) {
				return res, &RowError{Row: row + int64(i), Column: col, Err: ErrOverflow}
			}
			if !found || (isMax && w > res.Best) || (!isMax && w < res.Best) {
				found = true
				res.Best, res.End = w, row+int64(i)
				if j.Span > 0 {
					res.Start, res.StartTS, res.EndTS = start[i], sts[i], ts[i]
				} else {
					res.Start = res.End - int64(j.Size) + 1
				}
			}
			if series != nil {
				num = appendNumber(num[:0], w)
				num = append(num, '\n')
				if _, err := series.Write(num); err != nil {
					return res, fmt.Errorf("writing series: %w", err)
				}
			}
		}
		row += int64(n)
		res.N = row
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return res, rerr
		}
	}
	if series != nil {
		if err := series.Flush(); err != nil {
			return res, fmt.Errorf("writing series: %w", err)
		}
	}
	if row == 0 {
		return res, ErrNoRows
	}
	if !found {
		return res, fmt.Errorf("%w: %d rows, window size %d", ErrTooFewRows, row, j.Size)
	}
	log.Debug("batch job done", "agg", j.Agg, "rows", row, "best", res.Best, "elapsed", time.Since(began))
	return res, nil
}

// valueColumn returns Column, or the only numeric column of the first row besides TimeColumn.
func (j Job) valueColumn(rd Reader) (string, error) {
	if j.Column != "" {
		return j.Column, nil
	}
	return j.pickColumn(rd, j.TimeColumn)
}

// firstRowErrer is a reader that peeked at the first data row and could not read it.
type firstRowErrer interface{ firstRowErr() error }

// pickColumn is guessColumn over src's first row. A first row that could not be read is not
// "no data row": without SkipBad the job stops at it anyway, so its error (row, line, what is
// wrong) is the answer; with SkipBad the column cannot be guessed from it, and the error says
// why.
func (j Job) pickColumn(src interface {
	Columns() []string
	FirstRow() [][]byte
}, skip ...string) (string, error) {
	first := src.FirstRow()
	if fe, ok := src.(firstRowErrer); ok && first == nil {
		if err := fe.firstRowErr(); err != nil {
			if j.SkipBad {
				return "", fmt.Errorf("%w: the first data row is bad (%w); set the column", ErrColumn, err)
			}
			return "", err
		}
	}
	return guessColumn(src.Columns(), first, skip...)
}

// guessColumn is the value column of a job without Column: the only column whose value in the
// first row is a number, the columns in skip (time, group, id) aside; none or several is
// ErrColumn, naming them.
func guessColumn(cols []string, first [][]byte, skip ...string) (string, error) {
	if first == nil {
		return "", fmt.Errorf("%w: no data row to look at (columns: %s); set the column", ErrColumn, columnList(cols))
	}
	var numeric []string
	for i, c := range cols {
		if slices.Contains(skip, c) || i >= len(first) {
			continue
		}
		if _, err := parseValue(first[i]); err == nil {
			numeric = append(numeric, c)
		}
	}
	switch len(numeric) {
	case 1:
		return numeric[0], nil
	case 0:
		if h := delimiterHint(cols); h != nil {
			return "", fmt.Errorf("%w: no numeric column in the first row (columns: %s: %w)", ErrColumn, cols[0], h)
		}
		return "", fmt.Errorf("%w: no numeric column in the first row (columns: %s); set the column", ErrColumn, columnList(cols))
	}
	return "", fmt.Errorf("%w: several numeric columns (%s); choose one", ErrColumn, strings.Join(numeric, ", "))
}

// appendNumber formats v as encoding/json does: shortest round-trip digits, plain notation
// between 1e-6 and 1e21.
func appendNumber(b []byte, v float64) []byte {
	abs := math.Abs(v)
	f := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		f = 'e'
	}
	b = strconv.AppendFloat(b, v, f, -1, 64)
	if f == 'e' { // e-07 → e-7, as encoding/json
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
