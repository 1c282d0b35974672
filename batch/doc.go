// Package batch runs sliding-window jobs over files: one streaming pass over a CSV, NDJSON or
// Parquet input (gzip or zstd compressed too) that finds the best window ("largest revenue in 1,000 consecutive orders", "worst p95
// minute") in memory O(window), never O(file).
//
// # Windows
//
// A count window of size K (Job.Size) ending at row i covers rows i−K+1 … i. The first window
// ends at row K−1, so n rows have n−K+1 windows; a file with fewer than K rows is an error
// (ErrTooFewRows), not an empty answer. Sum and avg slide in O(1) per row in exact decimal
// fixed point: each value is read as an integer count of 10^-F (F is the first value's number of
// decimals, clamped to 2…6), the window sum is an exact int64, and a window's value is that sum
// correctly rounded to float64 (so 0.1 + 0.2 prints 0.3, and ties between windows are real
// ties). From the first value that has no such form (more decimals than F, or too large for the
// int64 sum of K values) the job goes on with a compensated float64 sum (window.SumWindow)
// seeded with the window so far; the switch depends on the values alone, so every reading mode
// and format gives the same bits. Max and min use the block algorithm of window.MaxWindow (2K
// values of memory once full, no branches on the data); quantiles keep the K values in sketch
// bins, adding the newcomer and removing the leaver, with a cursor on the answer's bin
// (rankBins: the answer of sketch.Bins.Quantile, found by moving from the last one, not by
// scanning every bin).
//
// A time window of span W (Job.Span) ending at row i covers the rows whose timestamp t satisfies
// ts_i − W < t ≤ ts_i, among rows 0 … i: the article's (now − W, now] with now = the row's own
// timestamp. A row exactly W older than now has left. Every row ends one window, so n rows have
// n windows. Rows must be sorted by time (equal timestamps are fine); an earlier timestamp is an
// error naming the row (ErrUnsorted): slide never reorders input silently. Sum, avg and count
// slide with the rows (a ring of the rows in the window), max and min use timestamp-keyed
// monotonic deques (window.Deque), quantiles use sketch bins with Add/Remove.
//
// The aggregates are window's statistics (window.ParseStat, as slide serve and usage rules
// read them): count, sum, avg, min, max, rate (the rows of a time window per second of its
// span; a count window has none) and any quantile (p50, p99.9, 0.75), each named by
// window.Stat.String in results. Quantiles are within the sketch's relative accuracy
// (DDSketch 1% by default) and clamped to the window's exact min and max; a rank that falls
// between two values may resolve to either neighbour; p0 and p100 are the exact min and max.
// Every other aggregate is exact up to float64 rounding. A statistic's window arithmetic is
// Job.aggregator (count windows, agg.go) and timeAgg.feed (time windows).
//
// # Best window and output
//
// The best window is the one with the largest (or, with Best = min, smallest) aggregate; the
// first one wins ties. Result marshals to one JSON line with the 0-based inclusive row indices
// of that window (and, for time windows, the timestamps of those rows in unix ms). The optional
// series output has every window's value, one per line in input order, in the same number
// format as encoding/json. ParquetSeriesWriter writes RunAll's series (SeriesRow) as a Parquet
// file instead, with the CSV series' columns in their order (slide batch --series X.parquet);
// the reader takes a top-level column whose name has a dot (p99.9) before a nested path.
//
// # Input
//
// A regular file passed to Run is mapped into memory (mmap) and parsed on all cores in place;
// that memory is page cache, not heap. Streams (pipes, stdin) are read in buffers and memory
// stays O(window + buffers).
//
// CSV needs a header row; NDJSON takes its columns from the first object. The value column is
// Job.Column or, by default, the only column (other than the time column) whose first value is
// a number. Values must be finite numbers; timestamps are unix milliseconds or RFC 3339, by
// textparse's one rule (no time.Parse fallback, as the event decoder), within the years 0000 to
// 9999 (ErrTimeRange: unix micro- or nanoseconds read as milliseconds would lie beyond). Every bad row stops the
// job with a *RowError that names the row, line and column.
//
// # RunAll: every input, groups, several aggregates, rows named by line
//
// Job.RunAll is what slide batch calls. It takes Parquet (parquet-go: only the columns the job
// reads, row group by row group, page by page; TIMESTAMP and DATE become unix ms, DECIMAL its
// digits, null an empty field) from a file, and gzip or zstd streams detected by their magic
// bytes (never by name alone). GroupBy partitions the rows by a column's text, as SQL's
// PARTITION BY: each group has its own count or time windows and best window, in one pass,
// memory O(groups × window) at most, and in fact what the groups' windows hold: every ring a
// window keeps (its rows, values, bin keys, block maxima) starts at 8 rows and doubles up to K
// (or to the rows of a time window), so a group of a few rows costs a few hundred bytes per
// aggregate whatever K is. Results come sorted by group, then in the order of Aggs. Several
// Aggs share the pass. count alone needs no value column. SkipBad counts bad rows by reason
// (Report.Skipped) instead of stopping; a skipped row keeps its row index, so row numbers are
// those of the file. Rows must be sorted by time for a time window across the whole file, not
// only within a group.
//
// Every Result names its window's first and last rows by data-row index, file line (1-based;
// the line a multi-line quoted record starts on; for Parquet the 1-based row number) and, with
// IDColumn, that column's text. With GroupBy, row indices are the file's, so a group's window
// spans other groups' rows.
//
// A plain job (one aggregate over an uncompressed CSV or NDJSON regular file, no series; count
// and time windows alike) runs Run's parallel path, then finds the two lines by a second scan
// of the mapped file up to the window's end (newlines counted 64 KiB at a time where there is
// no quote or blank line); a row error of Run's own (unsorted time) gets its line the same way.
// A plain job over a Parquet file whose value (and time) column is an integer, float, double,
// DECIMAL, TIMESTAMP or DATE column decodes those columns' pages straight into numbers, row
// groups on all cores (parquet_fast.go), and runs Run's aggregation over them, with the
// row-by-row path's numbers and errors. Everything else, stdin included, goes row by row on one
// core (rows.go, multi.go). Count sums
// run in Run's decimal fixed point on both paths, so a CSV, its gzip, zstd and Parquet copies
// give the same bits; time-window sums are compensated float64 sums on both.
//
// Hostile input gets a clear error in bounded memory: a Parquet footer or page header is walked
// before parquet-go decodes it (a list may not claim more elements than it has bytes, pages are
// at most 64 MiB and 4M values and must lie in their column chunk), parquet-go panics become
// ErrParquet, a zstd frame may ask for a window of at most 128 MiB, and a decompression bomb is
// just a long stream.
//
// # Bounds
//
// Every reader checks these while it reads, before it buffers past them, for mapped, streamed,
// parallel and compressed input alike (a mapped file's line end is looked for no further than
// the limit, so a 1 GiB line is neither paged in nor copied):
//
//   - A line, newline included, is at most 64 MiB, and so is a quoted CSV record of several
//     lines; past it the job stops with an error wrapping ErrLineTooLong that names the line
//     (where the record starts), also with SkipBad: resynchronising inside such a line would
//     mean guessing where rows start. 64 MiB is far above any row (and the old limit of the
//     streamed reader); Python's csv stops at 128 KiB fields, DuckDB at 2 MB lines.
//   - A CSV header is at most 4 MiB and 65,536 columns (Excel's 16,384 is the common ceiling of
//     exports; gene-expression matrices reach tens of thousands), NDJSON's first object at most
//     65,536 keys, a Parquet schema at most 65,536 columns: ErrHeaderTooLarge (ErrParquet for
//     Parquet). A row is split into at most 65,537 fields whatever its length, so a row of
//     millions of commas is a field-count error in kilobytes.
//
// These are constants, not options: an input past them is not a table slide can window.
//
// A Parquet page whose header carries a CRC-32 (the spec's page checksum, over the page as
// stored) is checked against it as it is read (by parquet-go); a mismatch stops the job with an
// error wrapping ErrPageChecksum that names the column, row group, page and offset. Writers may
// leave the CRC out (parquet-go sets it, DuckDB does not): in such a file a bit flipped in a
// value's bytes reads as another number with no error, and only flips that break a page's
// encoding or compression, or the footer's structure, are caught.
package batch
