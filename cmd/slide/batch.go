package main

import (
	"context"
	"encoding/json"
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
)

const batchUsage = `usage: slide batch [flags] FILE|-

Streams a CSV (with a header row) or NDJSON file once, in memory O(window), and prints the best
sliding window as one JSON object:

  {"agg":"sum","size":1000,"n":100000,"best":500500,"start":0,"end":999}

start/end are the 0-based inclusive row indices of the best window (the first one on ties);
time windows add span_ms, start_ts and end_ts (unix ms). Count window of K rows: --size K.
Time window (ts − span, ts] ending at every row: --span 60s (rows sorted by --time-column).
With --series - the window values go to stdout and the result line to stderr.

flags:
`

func cmdBatch(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("batch", s.err)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), batchUsage)
		fs.PrintDefaults()
	}
	var (
		job                        batch.Job
		series, sketchKind, format string
	)
	fs.IntVar(&job.Size, "size", 0, "count window: the `K` most recent rows")
	fs.DurationVar(&job.Span, "span", 0, "time window: rows with ts in (ts − `span`, ts], e.g. 60s")
	fs.StringVar(&job.TimeColumn, "time-column", batch.DefaultTimeColumn, "timestamp column for --span (unix ms or RFC 3339); never the value column")
	fs.StringVar(&job.Agg, "agg", batch.AggSum, "aggregate of each window: sum, avg, min, max, count, p50, p95, p99")
	fs.StringVar(&job.Column, "column", "", "value column (default: the only numeric column)")
	fs.StringVar(&job.Best, "best", batch.BestMax, "which window wins: max or min")
	fs.StringVar(&format, "format", batch.FormatAuto, "input format: auto, csv or ndjson")
	fs.StringVar(&series, "series", "", "also write every window's value, one per line, to `FILE` (- for stdout)")
	fs.StringVar(&sketchKind, "sketch", "", "quantile sketch for p50/p95/p99, e.g. ddsketch:0.01 or hdr:2:1:3600000 (default DDSketch 1%)")
	path, err := parseBatchArgs(fs, args)
	if err != nil {
		return err
	}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(s.err, "slide batch: "+format+"\n\n", a...)
		fs.Usage()
		return errUsage
	}
	if path == "" {
		return usageErr("missing input FILE (or - for stdin)")
	}
	job.Format = format
	if sketchKind != "" {
		k, err := sketch.ParseKind(sketchKind)
		if err != nil {
			return usageErr("--sketch: %v", err)
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
		f, err := os.Create(series)
		if err != nil {
			return err
		}
		defer f.Close()
		seriesOut = f
	}
	var bar *progress
	if errFile, ok := s.err.(*os.File); ok && size > 0 && term.IsTerminal(int(errFile.Fd())) {
		bar = &progress{r: in, w: errFile, total: size}
		in = bar
	}
	res, err := job.Run(ctx, in, seriesOut)
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		var rowErr *batch.RowError
		switch {
		case errors.Is(err, batch.ErrColumn):
			return fmt.Errorf("%s: %w (set --column)", path, err)
		case errors.As(err, &rowErr) || errors.Is(err, batch.ErrMissingColumn):
			return fmt.Errorf("%s: %w", path, err)
		}
		return err
	}
	if c, ok := seriesOut.(io.Closer); ok && series != "-" {
		if err := c.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", series, err)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(resultOut, "%s\n", b)
	return err
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
		if err := fs.Parse(rest[1:]); err != nil {
			return "", errUsage
		}
	}
	switch len(pos) {
	case 0:
		return "", nil
	case 1:
		return pos[0], nil
	}
	fmt.Fprintf(fs.Output(), "slide batch: one input file, got %d: %s\n\n", len(pos), strings.Join(pos, " "))
	fs.Usage()
	return "", errUsage
}

// progress draws a bar on a terminal as the input file is read, at most ten times a second.
type progress struct {
	r           io.Reader
	w           io.Writer
	total, done int64
	last        time.Time
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		const width = 30
		frac := min(float64(p.done)/float64(p.total), 1)
		fill := int(frac * width)
		fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %.1f/%.1f MB", strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
			frac*100, float64(p.done)/1e6, float64(p.total)/1e6)
	}
	return n, err
}

// clear erases the bar so the result line starts clean.
func (p *progress) clear() {
	if !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
