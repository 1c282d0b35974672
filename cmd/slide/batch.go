package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/slide-metrics/slide/batch"
	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

func cmdBatch(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("batch", s.out)
	var (
		job                               batch.Job
		series, sketchKind, format, inFmt string
		aggs, delimiter                   string
	)
	fs.IntVar(&job.Size, "size", 0, "count window: the `K` most recent rows")
	windowVar(fs, &job.Span, "span", 0, "time window: rows with ts in (ts − `span`, ts], e.g. 60s")
	fs.StringVar(&job.TimeColumn, "time-column", batch.DefaultTimeColumn, "timestamp column for --span (unix ms or RFC 3339); never the value column")
	fs.StringVar(&aggs, "agg", batch.AggSum, "aggregates of each window, comma separated: "+window.StatNames+" (rate: time windows) or a percentile such as p95, p99.9 or 0.75 (count and rate need no value column)")
	fs.StringVar(&job.Column, "column", "", "value column (default: the only numeric column)")
	fs.StringVar(&job.Best, "best", batch.BestMax, "which window wins: max or min")
	fs.StringVar(&format, "format", "json", "output: json (one object per line), table or csv")
	fs.StringVar(&inFmt, "input-format", batch.FormatAuto, "input format: auto, csv, ndjson or parquet")
	fs.StringVar(&delimiter, "delimiter", ",", "CSV field separator: one character, or tab")
	fs.StringVar(&job.GroupBy, "group-by", "", "best window per value of `COLUMN` (as SQL PARTITION BY)")
	fs.StringVar(&job.IDColumn, "id-column", "", "name the first and last row of each window by this `COLUMN` too")
	fs.BoolVar(&job.SkipBad, "skip-bad", false, "skip bad rows and count them by reason (on stderr) instead of stopping")
	fs.StringVar(&series, "series", "", "also write every window (row, line, time, values) to `FILE` (- for stdout): Parquet when it ends in .parquet, else as --format (JSON lines or CSV)")
	fs.StringVar(&sketchKind, "sketch", "", "quantile sketch for percentiles, e.g. ddsketch:0.01 or hdr:2:1:3600000 (default DDSketch 1%)")
	path, err := parseBatchArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkNumbers(fs, zeroMeans{"size": "no count window", "span": "no time window"}); err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error { return usagef(fs, format, a...) }
	if path == "" {
		return usageErr("missing input FILE (or - for stdin)")
	}
	switch format {
	case "json", "table", "csv":
	case batch.FormatAuto, batch.FormatNDJSON, batch.FormatParquet:
		// --format used to name the input format; auto, ndjson and parquet still do.
		inFmt, format = format, "json"
	default:
		return flagErrorf(fs, "format", "want json, table or csv") // SLIDE_FORMAT=... when it came from there
	}
	job.Format = inFmt
	switch delimiter {
	case "tab", "\\t", "\t":
		job.Delimiter = '\t'
	default:
		if len(delimiter) != 1 {
			return usageErr("--delimiter %q: want one ASCII character or tab", delimiter)
		}
		job.Delimiter = delimiter[0]
	}
	if list := strings.Split(aggs, ","); len(list) > 1 {
		for i := range list {
			list[i] = strings.TrimSpace(list[i])
		}
		job.Aggs, job.Agg = list, list[0]
	} else {
		job.Agg = strings.TrimSpace(aggs)
	}
	if sketchKind != "" {
		k, err := sketch.ParseKind(sketchKind)
		if err != nil {
			return flagErrorf(fs, "sketch", "%v", sketchProblem(err))
		}
		job.Sketch = k
	}
	if err := job.Validate(); err != nil {
		return usageErr("%s", strings.TrimPrefix(err.Error(), batch.ErrConfig.Error()+": "))
	}

	var in io.Reader = s.in
	var size int64
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
	}
	resultOut := s.out
	var seriesOut io.Writer
	switch series {
	case "":
	case "-":
		seriesOut, resultOut = s.out, s.err
	default:
		f, err := createSeriesFile(series)
		if err != nil {
			return err
		}
		defer f.discard()
		seriesOut = f
	}
	var bar *progress
	if errFile, ok := s.err.(*os.File); ok && size >= progressMinBytes && term.IsTerminal(int(errFile.Fd())) {
		bar = &progress{w: errFile, total: size, began: time.Now()}
		job.Progress = bar.update
	}
	var sw seriesSink
	var seriesFn func(batch.SeriesRow) error
	if seriesOut != nil {
		if sw, err = newSeriesSink(seriesOut, series, format, job); err != nil {
			return err
		}
		seriesFn = sw.write
	}
	rep, err := job.RunAll(ctx, in, path, seriesFn)
	if bar != nil {
		bar.clear()
	}
	if n := rep.SkippedTotal(); err != nil && n > 0 {
		// What --skip-bad set aside explains the failure ("no data rows": all 100,000 bad).
		fmt.Fprintf(s.err, "slide batch: %s: skipped %d bad %s: %s\n", path, n, plural(n, "row", "rows"), skipSummary(rep))
	}
	if err != nil {
		var rowErr *batch.RowError
		var delim *batch.DelimiterHint
		switch {
		case errors.As(err, &delim):
			word := "'" + string(delim.Delim) + "'"
			if delim.Delim == '\t' {
				word = "tab"
			}
			return fmt.Errorf("%s: %w (set --delimiter %s)", path, err, word)
		case errors.Is(err, batch.ErrColumn):
			return fmt.Errorf("%s: %w (set --column)", path, err)
		case errors.As(err, &rowErr) || errors.Is(err, batch.ErrMissingColumn) ||
			errors.Is(err, batch.ErrParquet) || errors.Is(err, batch.ErrCompressed) ||
			errors.Is(err, batch.ErrLineTooLong) || errors.Is(err, batch.ErrHeaderTooLarge) ||
			errors.Is(err, batch.ErrNoRows) || errors.Is(err, batch.ErrTooFewRows) ||
			errors.Is(err, batch.ErrDuplicateColumn):
			return fmt.Errorf("%s: %w", path, err)
		}
		return err
	}
	if sw != nil {
		if err := sw.flush(); err != nil {
			return fmt.Errorf("writing series: %w", err)
		}
	}
	if f, ok := seriesOut.(*seriesFile); ok {
		if err := f.commit(); err != nil {
			return fmt.Errorf("writing %s: %w", series, err)
		}
	}
	if n := rep.SkippedTotal(); n > 0 {
		fmt.Fprintf(s.err, "slide batch: %s: skipped %d bad %s: %s\n", path, n, plural(n, "row", "rows"), skipSummary(rep))
	}
	return writeResults(resultOut, format, job, rep.Results)
}

// parseBatchArgs parses flags (environment first, then the command line) and returns the one
// positional argument. Flags may also follow it: "slide batch orders.csv --size 1000" (later
// flags are parsed without the environment, so the command line still wins).
func parseBatchArgs(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	var pos []string
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		pos = append(pos, rest[0])
		if err := parseCommandLine(fs, rest[1:]); err != nil {
			return "", err
		}
	}
	switch len(pos) {
	case 0:
		return "", nil
	case 1:
		return pos[0], nil
	}
	return "", usagef(fs, "one input file, got %d: %s", len(pos), strings.Join(pos, " "))
}
