package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slide-metrics/slide/batch"
)

// writeResults prints the results of slide batch: one JSON object per line (json), an aligned
// table (table) or CSV with a header (csv).
func writeResults(w io.Writer, format string, job batch.Job, results []batch.Result) error {
	if format == "json" {
		for _, r := range results {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
				return err
			}
		}
		return nil
	}
	header, rows := resultTable(job, results)
	if format == "csv" {
		cw := csv.NewWriter(w)
		cw.Write(header)
		cw.WriteAll(rows)
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// resultTable is the results as text columns (for table and csv).
func resultTable(job batch.Job, results []batch.Result) ([]string, [][]string) {
	var header []string
	if job.GroupBy != "" {
		header = append(header, job.GroupBy)
	}
	header = append(header, "agg", "window", "n", "best", "start_row", "end_row", "start_line", "end_line")
	if job.IDColumn != "" {
		header = append(header, "start_"+job.IDColumn, "end_"+job.IDColumn)
	}
	if job.Span > 0 {
		header = append(header, "start_time", "end_time")
	}
	var rows [][]string
	for _, r := range results {
		var row []string
		if job.GroupBy != "" {
			row = append(row, r.Group)
		}
		win := strconv.Itoa(r.Size) + " rows"
		if r.Span > 0 {
			win = r.Span.String()
		}
		row = append(row, r.Agg, win, strconv.FormatInt(r.N, 10))
		if r.TooFew {
			row = append(row, "(fewer rows than the window)")
			for len(row) < len(header) {
				row = append(row, "")
			}
			rows = append(rows, row)
			continue
		}
		best := strconv.FormatFloat(r.Best, 'f', -1, 64) // sums, maxima, minima: exact, every digit
		if r.Agg == "avg" || strings.HasPrefix(r.Agg, "p") {
			best = num(&r.Best) // a mean or a sketch quantile: four significant digits, as query's tables
		}
		row = append(row, best,
			strconv.FormatInt(r.Start, 10), strconv.FormatInt(r.End, 10),
			strconv.FormatInt(r.StartLine, 10), strconv.FormatInt(r.EndLine, 10))
		if job.IDColumn != "" {
			row = append(row, r.StartID, r.EndID)
		}
		if job.Span > 0 {
			row = append(row, batch.FormatTime(r.StartTS), batch.FormatTime(r.EndTS))
		}
		rows = append(rows, row)
	}
	return header, rows
}

// seriesWriter writes --series: NDJSON objects for --format json, CSV with a header otherwise.
// Each window names its group, row, line and (time windows) time, then one value per aggregate.
type seriesWriter struct {
	w     *bufio.Writer
	json  bool
	group bool
	aggs  []string
	buf   []byte
	began bool
}

func newSeriesWriter(w io.Writer, format string, job batch.Job) *seriesWriter {
	return &seriesWriter{w: bufio.NewWriterSize(w, 256<<10), json: format == "json", group: job.GroupBy != "", aggs: job.Aggregates()}
}

func (s *seriesWriter) write(r batch.SeriesRow) error {
	b := s.buf[:0]
	if s.json {
		b = append(b, '{')
		if s.group {
			b = append(b, `"group":`...)
			gb, _ := json.Marshal(r.Group)
			b = append(b, gb...)
			b = append(b, ',')
		}
		b = append(b, `"row":`...)
		b = strconv.AppendInt(b, r.Row, 10)
		b = append(b, `,"line":`...)
		b = strconv.AppendInt(b, r.Line, 10)
		if r.HasTS {
			b = append(b, `,"ts":`...)
			b = strconv.AppendInt(b, r.TS, 10)
			b = append(b, `,"time":"`...)
			b = append(b, batch.FormatTime(r.TS)...)
			b = append(b, '"')
		}
		for i, a := range s.aggs {
			b = append(b, ',', '"')
			b = append(b, a...)
			b = append(b, '"', ':')
			b = strconv.AppendFloat(b, r.Values[i], 'f', -1, 64)
		}
		b = append(b, '}', '\n')
	} else {
		if !s.began {
			var h []string
			if s.group {
				h = append(h, "group")
			}
			h = append(h, "row", "line")
			if r.HasTS {
				h = append(h, "ts", "time")
			}
			b = append(b, strings.Join(append(h, s.aggs...), ",")...)
			b = append(b, '\n')
		}
		if s.group {
			b = appendCSVField(b, r.Group)
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, r.Row, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Line, 10)
		if r.HasTS {
			b = append(b, ',')
			b = strconv.AppendInt(b, r.TS, 10)
			b = append(b, ',')
			b = append(b, batch.FormatTime(r.TS)...)
		}
		for _, v := range r.Values {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
		}
		b = append(b, '\n')
	}
	s.began = true
	s.buf = b
	_, err := s.w.Write(b)
	return err
}

func (s *seriesWriter) flush() error { return s.w.Flush() }

func appendCSVField(b []byte, f string) []byte {
	if !strings.ContainsAny(f, ",\"\r\n") {
		return append(b, f...)
	}
	return append(append(b, '"'), strings.ReplaceAll(f, `"`, `""`)+`"`...)
}

// skipSummary is "2 not_a_number (first at line 5), 1 unsorted_timestamp (first at line 9)".
func skipSummary(rep batch.Report) string {
	reasons := make([]string, 0, len(rep.Skipped))
	for r := range rep.Skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%d %s (first at line %d)", rep.Skipped[r], r, rep.FirstSkipped[r])
	}
	return strings.Join(parts, ", ")
}

// progressMinBytes: smaller inputs finish before a bar would be worth drawing.
const progressMinBytes = 256 << 20

// progress draws a bar on a terminal (rows, bytes, rate, ETA), at most ten times a second,
// from the job's Progress callback.
type progress struct {
	w           io.Writer
	total       int64
	began, last time.Time
}

func (p *progress) update(rows, done int64) {
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	fmt.Fprint(p.w, p.line(rows, done, now.Sub(p.began)))
}

// line is one frame of the bar.
func (p *progress) line(rows, done int64, elapsed time.Duration) string {
	const width = 30
	frac := min(float64(done)/float64(max(p.total, 1)), 1)
	fill := int(frac * width)
	rate := float64(done) / max(elapsed.Seconds(), 1e-3)
	eta := "?"
	if rate > 0 && done > 0 {
		eta = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return fmt.Sprintf("\r[%s%s] %3.0f%% %d rows %.1f/%.1f MB %.1f MB/s ETA %s\033[K", strings.Repeat("=", fill),
		strings.Repeat(" ", width-fill), frac*100, rows, float64(done)/1e6, float64(p.total)/1e6, rate/1e6, eta)
}

// clear erases the bar so the result line starts clean.
func (p *progress) clear() {
	if !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// seriesFile is a --series FILE being written. A regular (or new) FILE is written under a
// temporary name beside it and renamed over FILE only when the job succeeds, so a failed job
// leaves FILE as it was: a pipeline sees the failure and no fresh partial output (make takes
// a new file, even a partial one, for an up-to-date target). Anything else (a FIFO,
// /dev/stdout) is written in place.
type seriesFile struct {
	*os.File
	path, tmp string
}

func createSeriesFile(path string) (*seriesFile, error) {
	s := &seriesFile{path: path}
	var err error
	if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
		s.File, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	} else {
		s.tmp = fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
		s.File, err = os.OpenFile(s.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		pe.Path = path // name the file the user asked for, not its temporary name
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// commit closes the file and renames it to its path when it was written under another.
func (s *seriesFile) commit() error {
	if err := s.File.Close(); err != nil {
		return err
	}
	tmp := s.tmp
	s.tmp = ""
	if tmp == "" {
		return nil
	}
	return os.Rename(tmp, s.path)
}

// discard closes the file and removes its temporary copy; after commit it does nothing.
func (s *seriesFile) discard() {
	s.File.Close()
	if s.tmp != "" {
		os.Remove(s.tmp)
	}
}
