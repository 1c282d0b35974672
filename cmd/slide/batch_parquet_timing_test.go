package main

import (
	"io"
	"testing"

	"github.com/slide-metrics/slide/batch"
)

// BenchmarkSeriesParquet: writing 100K windows of a grouped time-window job with two
// aggregates as Parquet (--series X.parquet) against the CSV series (--series X.csv), to
// io.Discard (stated, not a goal: the price of a typed, compressed file over text).
func BenchmarkSeriesParquet(b *testing.B) {
	const n = 100_000
	job := batch.Job{Span: 60_000_000_000, GroupBy: "region", Aggs: []string{"sum", "p95"}, Agg: "sum"}
	rows := make([]batch.SeriesRow, n)
	for i := range rows {
		rows[i] = batch.SeriesRow{Group: []string{"eu", "us", "ap"}[i%3], Row: int64(i), Line: int64(i + 2),
			TS: 1_764_489_600_000 + int64(i)*990, HasTS: true, Values: []float64{float64(i%977) * 1.37, float64(i%89) + 0.25}}
	}
	run := func(b *testing.B, name string) {
		b.ReportAllocs()
		for b.Loop() {
			sink, err := newSeriesSink(io.Discard, name, "csv", job)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rows {
				if err := sink.write(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := sink.flush(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/window")
	}
	b.Run("ours", func(b *testing.B) { run(b, "series.parquet") })
	b.Run("anchor", func(b *testing.B) { run(b, "series.csv") })
}
