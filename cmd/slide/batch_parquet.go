package main

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/slide-metrics/slide/batch"
)

// seriesSink is where --series goes: JSON lines or CSV as --format says (seriesWriter), or
// Parquet when the file's name ends in .parquet: the extension picks, as a data tool expects.
type seriesSink interface {
	write(batch.SeriesRow) error
	flush() error
}

func newSeriesSink(w io.Writer, name, format string, job batch.Job) (seriesSink, error) {
	if strings.EqualFold(filepath.Ext(name), ".parquet") {
		pw, err := batch.NewParquetSeriesWriter(w, job)
		if err != nil {
			return nil, err
		}
		return parquetSink{pw}, nil
	}
	return newSeriesWriter(w, format, job), nil
}

// parquetSink is a batch.ParquetSeriesWriter as a seriesSink: flush writes the footer.
type parquetSink struct{ w *batch.ParquetSeriesWriter }

func (p parquetSink) write(r batch.SeriesRow) error { return p.w.Write(r) }
func (p parquetSink) flush() error                  { return p.w.Close() }
