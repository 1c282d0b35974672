package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
)

// order is one row of the generated order files.
type order struct {
	ID     int64   `parquet:"order_id"`
	TS     int64   `parquet:"ts,timestamp(millisecond)"`
	Cents  int64   `parquet:"-"`
	Amount float64 `parquet:"amount"`
	Region string  `parquet:"region"`
}

// genOrders makes n orders over groups regions, sorted by time (several per millisecond
// sometimes), amounts in cents.
func genOrders(n, groups int, seed uint64) []order {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]order, n)
	ts := int64(1764489600000)
	for i := range out {
		ts += int64(r.IntN(900))
		c := int64(r.IntN(100000) + 1)
		if i == 0 {
			c = 1230 // 12.30: two decimals in the first value, as the CSV writes them
		}
		out[i] = order{ID: 100000 + int64(i), TS: ts, Cents: c, Amount: float64(c) / 100,
			Region: fmt.Sprintf("r%03d", r.IntN(groups))}
	}
	return out
}

func ordersCSVText(rows []order, delim string) string {
	var b strings.Builder
	b.WriteString(strings.Join([]string{"order_id", "ts", "amount", "region"}, delim) + "\n")
	for _, o := range rows {
		fmt.Fprintf(&b, "%d%s%d%s%d.%02d%s%s\n", o.ID, delim, o.TS, delim, o.Cents/100, o.Cents%100, delim, o.Region)
	}
	return b.String()
}

func ordersNDJSON(rows []order) string {
	var b strings.Builder
	for _, o := range rows {
		fmt.Fprintf(&b, `{"order_id":%d,"ts":%d,"amount":%d.%02d,"region":%q}`+"\n", o.ID, o.TS, o.Cents/100, o.Cents%100, o.Region)
	}
	return b.String()
}

func gzipped(t testing.TB, s string) []byte {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	z.Write([]byte(s))
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zstded(t testing.TB, s string) []byte {
	z, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	return z.EncodeAll([]byte(s), nil)
}

// ordersParquet writes rows with parquet-go, in row groups of rowGroup rows and small pages,
// so a read crosses pages and row groups.
func ordersParquet(t testing.TB, rows []order, rowGroup int64) []byte {
	var b bytes.Buffer
	w := parquet.NewGenericWriter[order](&b, parquet.MaxRowsPerRowGroup(rowGroup), parquet.PageBufferSize(4096))
	for i := 0; i < len(rows); i += 1000 {
		if _, err := w.Write(rows[i:min(i+1000, len(rows))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeTemp(t testing.TB, name string, data []byte) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runAllFile(t testing.TB, j Job, path string) (Report, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return j.RunAll(context.Background(), f, path, nil)
}

// window identity: what every input format must agree on.
type winKey struct {
	group, agg     string
	best           float64
	start, end     int64
	startTS, endTS int64
	n              int64
}

func keys(rep Report) []winKey {
	var out []winKey
	for _, r := range rep.Results {
		out = append(out, winKey{r.Group, r.Agg, r.Best, r.Start, r.End, r.StartTS, r.EndTS, r.N})
	}
	return out
}

var formatJobs = []Job{
	{Size: 1000, Column: "amount"},
	{Size: 1000, Column: "amount", Agg: AggAvg, Best: BestMin},
	{Size: 50, Column: "amount", Aggs: []string{AggSum, AggMax, AggMin, AggP95, AggCount}},
	{Span: time.Minute, Column: "amount", Aggs: []string{AggSum, AggAvg, AggMax, AggP95, AggCount}},
	{Span: 5 * time.Minute, Aggs: []string{AggCount}},
	{Size: 20, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggMax}},
	{Span: 10 * time.Minute, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggP95}},
}

// Parquet (several row groups, written by parquet-go), gzip, zstd, NDJSON and a
// semicolon-separated CSV give the same windows as the CSV they were made from, and the CSV
// through the row-by-row path gives what Run's fast path gives.
func TestRunAllFormatsAgree(t *testing.T) {
	rows := genOrders(6000, 7, 1)
	csvText := ordersCSVText(rows, ",")
	inputs := map[string]string{
		"orders.csv":         writeTemp(t, "orders.csv", []byte(csvText)),
		"orders.semicolon":   writeTemp(t, "orders.semicolon", []byte(ordersCSVText(rows, ";"))),
		"orders.ndjson":      writeTemp(t, "orders.ndjson", []byte(ordersNDJSON(rows))),
		"orders.csv.gz":      writeTemp(t, "orders.csv.gz", gzipped(t, csvText)),
		"orders.csv.zst":     writeTemp(t, "orders.csv.zst", zstded(t, csvText)),
		"orders.ndjson.zst":  writeTemp(t, "orders.ndjson.zst", zstded(t, ordersNDJSON(rows))),
		"orders.parquet":     writeTemp(t, "orders.parquet", ordersParquet(t, rows, 2500)),
		"renamed.gz.parquet": writeTemp(t, "renamed.dat", gzipped(t, csvText)), // magic bytes, not the name
	}
	for i, j := range formatJobs {
		want, err := runAllFile(t, j, inputs["orders.csv"])
		if err != nil {
			t.Fatalf("job %d csv: %v", i, err)
		}
		if len(want.Results) == 0 {
			t.Fatalf("job %d: no results", i)
		}
		for name, path := range inputs {
			jj := j
			if name == "orders.semicolon" {
				jj.Delimiter = ';'
			}
			got, err := runAllFile(t, jj, path)
			if err != nil {
				t.Fatalf("job %d %s: %v", i, name, err)
			}
			if !slices.Equal(keys(got), keys(want)) {
				t.Errorf("job %d %s:\n got %v\nwant %v", i, name, keys(got), keys(want))
			}
			if name == "orders.parquet" {
				continue // lines are row numbers there
			}
			for k := range got.Results {
				g, w := got.Results[k], want.Results[k]
				off := int64(1) // NDJSON has no header line
				if strings.Contains(name, "ndjson") {
					off = 0
				}
				if g.StartLine != w.StartLine-1+off || g.EndLine != w.EndLine-1+off {
					t.Errorf("job %d %s: lines %d-%d, csv %d-%d", i, name, g.StartLine, g.EndLine, w.StartLine, w.EndLine)
				}
			}
		}
		// The fast path (Run) and the row-by-row path agree on the CSV.
		if len(j.Aggs) == 0 && j.GroupBy == "" {
			jj := j
			jj.SkipBad = true // forces the row-by-row path; nothing is bad
			got, err := runAllFile(t, jj, inputs["orders.csv"])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), keys(want)) || got.Results[0].StartLine != want.Results[0].StartLine {
				t.Errorf("job %d: row by row %v, fast path %v", i, got.Results, want.Results)
			}
		}
	}
}

// Every best window names its rows by file line and id, and its times in RFC 3339.
func TestRunAllNamesRows(t *testing.T) {
	csvText := "order_id,ts,amount\n" +
		"a1,2025-11-30T10:00:00Z,5\n" +
		"\n" + // a blank line: lines are file lines, not row numbers
		"a2,2025-11-30T10:00:30Z,7\n" +
		"a3,2025-11-30T10:01:10Z,1\n"
	p := writeTemp(t, "o.csv", []byte(csvText))
	rep, err := runAllFile(t, Job{Span: time.Minute, Column: "amount", IDColumn: "order_id"}, p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := rep.Results[0].MarshalJSON()
	want := `{"agg":"sum","span_ms":60000,"n":3,"best":12,"start":0,"end":1,"start_ts":1764496800000,"end_ts":1764496830000,` +
		`"start_line":2,"end_line":4,"start_id":"a1","end_id":"a2","start_time":"2025-11-30T10:00:00.000Z","end_time":"2025-11-30T10:00:30.000Z"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// brute is the exact per-group oracle: every window of every group computed from scratch.
func brute(rows []order, size int, span int64, agg string, isMax bool) map[string]winKey {
	byGroup := map[string][]int{}
	for i, o := range rows {
		byGroup[o.Region] = append(byGroup[o.Region], i)
	}
	out := map[string]winKey{}
	for g, idx := range byGroup {
		best := winKey{group: g, agg: agg, best: math.NaN(), n: int64(len(idx))}
		found := false
		for e := range idx {
			s := e - size + 1
			if span > 0 {
				s = e
				for s > 0 && rows[idx[s-1]].TS > rows[idx[e]].TS-span {
					s--
				}
			}
			if s < 0 {
				continue
			}
			var cents, mx, cnt int64
			mx = math.MinInt64
			for _, k := range idx[s : e+1] {
				cents += rows[k].Cents
				mx = max(mx, rows[k].Cents)
				cnt++
			}
			var v float64
			switch agg {
			case AggSum:
				v = float64(cents) / 100
			case AggMax:
				v = float64(mx) / 100
			case AggCount:
				v = float64(cnt)
			}
			if !found || (isMax && v > best.best) || (!isMax && v < best.best) {
				found = true
				best.best, best.start, best.end = v, int64(idx[s]), int64(idx[e])
				if span > 0 {
					best.startTS, best.endTS = rows[idx[s]].TS, rows[idx[e]].TS
				}
			}
		}
		if found {
			out[g] = best
		}
	}
	return out
}

// --group-by equals the exact per-group oracle, for count and time windows, max and min.
func TestGroupByOracle(t *testing.T) {
	rows := genOrders(6000, 13, 2)
	p := writeTemp(t, "orders.csv", []byte(ordersCSVText(rows, ",")))
	for _, c := range []struct {
		size int
		span time.Duration
		best string
	}{{size: 25, best: BestMax}, {size: 7, best: BestMin}, {span: 3 * time.Minute, best: BestMax}, {span: time.Minute, best: BestMin}} {
		j := Job{Size: c.size, Span: c.span, Column: "amount", GroupBy: "region", Best: c.best,
			Aggs: []string{AggSum, AggMax, AggCount}}
		rep, err := runAllFile(t, j, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Results) != 13*3 {
			t.Fatalf("%d results, want %d", len(rep.Results), 13*3)
		}
		for _, r := range rep.Results {
			want := brute(rows, c.size, c.span.Milliseconds(), r.Agg, c.best == BestMax)[r.Group]
			got := winKey{r.Group, r.Agg, r.Best, r.Start, r.End, r.StartTS, r.EndTS, r.N}
			// Time-window sums are compensated float64 sums: exact up to the last rounding.
			if math.Abs(got.best-want.best) <= 1e-12*math.Abs(want.best) {
				got.best = want.best
			}
			if got != want {
				t.Errorf("%+v %s %s:\n got %+v\nwant %+v", c, r.Group, r.Agg, got, want)
			}
			if r.StartLine != r.Start+2 || r.EndLine != r.End+2 {
				t.Errorf("lines %d-%d for rows %d-%d", r.StartLine, r.EndLine, r.Start, r.End)
			}
		}
	}
}

// A group with fewer rows than the count window has no window, and says so; the others do.
func TestGroupByTooFew(t *testing.T) {
	p := writeTemp(t, "g.csv", []byte("g,v\na,1\na,2\nb,5\na,3\n"))
	rep, err := runAllFile(t, Job{Size: 2, GroupBy: "g"}, p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rep.Results {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	want := []string{
		`{"group":"a","agg":"sum","size":2,"n":3,"best":5,"start":1,"end":3,"start_line":3,"end_line":5}`,
		`{"group":"b","agg":"sum","size":2,"n":1,"best":null,"error":"fewer rows than the window size"}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// When no group has as many rows as the count window, the error says so of the groups: it
// said "4 rows, window size 3", the file's rows, which are enough.
func TestGroupByAllTooFew(t *testing.T) {
	p := writeTemp(t, "g.csv", []byte("g,v\na,1\nb,2\na,3\nb,4\nc,5\n"))
	_, err := runAllFile(t, Job{Size: 3, GroupBy: "g"}, p)
	if !errors.Is(err, ErrTooFewRows) {
		t.Fatalf("err %v, want ErrTooFewRows", err)
	}
	want := `fewer rows than the window size: no group has 3 rows (3 groups; the largest, "a", has 2)`
	if err.Error() != want {
		t.Fatalf("err %q\nwant %q", err, want)
	}
}

// A first data row that cannot be read is reported as itself, not as "no data row to look at"
// when the value column is guessed from it (the file has rows; the first is broken).
func TestFirstRowBadNamed(t *testing.T) {
	in := "ts,amount\n1000,\"1\n2000,2\n"
	p := writeTemp(t, "bad.csv", []byte(in))
	want := `row 0 (line 2): malformed row: unterminated quoted field`
	for name, j := range map[string]Job{"fast": {Size: 1}, "row by row": {Size: 1, Aggs: []string{AggSum, AggMax}}} {
		if _, err := runAllFile(t, j, p); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	if _, err := (Job{Size: 1}).RunAll(context.Background(), strings.NewReader(in), "-", nil); err == nil || err.Error() != want {
		t.Errorf("stream: %v, want %q", err, want)
	}
	_, err := runAllFile(t, Job{Size: 1, SkipBad: true}, p)
	if !errors.Is(err, ErrColumn) || !strings.Contains(err.Error(), "the first data row is bad (row 0 (line 2): malformed row") {
		t.Errorf("--skip-bad: %v, want a column error naming the bad first row", err)
	}
}

// --skip-bad counts every bad row by reason, and the windows are those of the good rows.
func TestSkipBadCountsReasons(t *testing.T) {
	good := "ts,amount\n1000,1\n2000,2\n3000,3\n4000,4\n5000,5\n"
	bad := "ts,amount\n" +
		"1000,1\n" +
		"1500,abc\n" + // not a number (line 3)
		"2000,2\n" +
		"x,7\n" + // bad timestamp
		"3000,3\n" +
		"1,9\n" + // unsorted
		"3500,NaN\n" + // not finite
		"4000,4\n" +
		"4100,1,2\n" + // field count
		"4200,\"unterminated\n" + // malformed (swallows the rest: an unterminated quote)
		""
	rep, err := runAllFile(t, Job{Span: 10 * time.Second, SkipBad: true}, writeTemp(t, "bad.csv", []byte(bad)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{SkipNotNumber: 1, SkipBadTime: 1, SkipUnsorted: 1, SkipNotFinite: 1, SkipFieldCount: 1, SkipSyntax: 1}
	if fmt.Sprint(rep.Skipped) != fmt.Sprint(want) {
		t.Fatalf("skipped %v, want %v", rep.Skipped, want)
	}
	if rep.FirstSkipped[SkipNotNumber] != 3 || rep.FirstSkipped[SkipBadTime] != 5 || rep.FirstSkipped[SkipUnsorted] != 7 {
		t.Fatalf("first lines %v", rep.FirstSkipped)
	}
	if rep.N != 4 || rep.Results[0].Best != 10 {
		t.Fatalf("n %d best %v, want 4 rows summing to 10", rep.N, rep.Results[0].Best)
	}
	// Without --skip-bad the first bad row stops the job, naming its line.
	_, err = runAllFile(t, Job{Span: 10 * time.Second, SkipBad: false, Column: "amount", Aggs: []string{AggSum, AggMax}}, writeTemp(t, "bad.csv", []byte(bad)))
	if err == nil || err.Error() != `row 1 (line 3), column "amount": not a number: "abc"` {
		t.Fatalf("err %v", err)
	}
	ok, err := runAllFile(t, Job{Span: 10 * time.Second, SkipBad: true}, writeTemp(t, "good.csv", []byte(good)))
	if err != nil || ok.SkippedTotal() != 0 || ok.Results[0].Best != 15 {
		t.Fatalf("good file: %v %+v", err, ok)
	}
}

// count needs no value column, in count and time windows.
func TestCountWithoutColumn(t *testing.T) {
	p := writeTemp(t, "c.csv", []byte("ts,user,path\n1000,a,/x\n1500,b,/y\n9000,a,/x\n9100,c,/z\n9200,c,/z\n"))
	rep, err := runAllFile(t, Job{Span: time.Second, Agg: AggCount}, p)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Best != 3 || r.Start != 2 || r.End != 4 {
		t.Fatalf("%+v", r)
	}
}

// Stdin and pipes take the row-by-row path and still name lines; Parquet on a stream is a
// clear error.
func TestRunAllStream(t *testing.T) {
	rows := genOrders(2000, 3, 3)
	rep, err := Job{Size: 100, Column: "amount"}.RunAll(context.Background(), bytes.NewReader(gzipped(t, ordersCSVText(rows, ","))), "-", nil)
	if err != nil || rep.Results[0].StartLine != rep.Results[0].Start+2 {
		t.Fatalf("%v %+v", err, rep)
	}
	_, err = Job{Size: 100, Column: "amount"}.RunAll(context.Background(), bytes.NewReader(ordersParquet(t, rows, 500)), "-", nil)
	if err == nil || !strings.Contains(err.Error(), "Parquet needs a file") {
		t.Fatalf("parquet from a stream: %v", err)
	}
}

// A Parquet file written by DuckDB (testdata/duckdb/to_parquet.mjs: TIMESTAMP in
// microseconds, DECIMAL(10,2), row groups of 4096) gives the windows of the CSV it was made
// from.
func TestDuckDBParquetMatchesCSV(t *testing.T) {
	for _, j := range []Job{
		{Size: 1000, Column: "amount", IDColumn: "order_id"},
		{Size: 100, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggAvg, AggMin, AggP99}},
		{Span: 5 * time.Minute, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggP95, AggCount}},
		{Span: time.Minute, Column: "amount", Best: BestMin, Aggs: []string{AggMax, AggCount}},
	} {
		want, err := runAllFile(t, j, "../testdata/orders_regions.csv")
		if err != nil {
			t.Fatal(err)
		}
		got, err := runAllFile(t, j, "../testdata/orders_regions.parquet")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys(got), keys(want)) {
			t.Errorf("%+v:\n parquet %v\n     csv %v", j, keys(got), keys(want))
		}
		for i := range got.Results {
			g, w := got.Results[i], want.Results[i]
			if g.StartID != w.StartID || g.EndID != w.EndID || g.StartLine != w.StartLine-1 {
				t.Errorf("%+v: parquet names %s…%s (row %d), csv %s…%s (line %d)", j, g.StartID, g.EndID, g.StartLine, w.StartID, w.EndID, w.StartLine)
			}
		}
	}
}

func TestHasBlankLine(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for n := 0; n < 3000; n++ {
		p := make([]byte, r.IntN(40))
		for i := range p {
			p[i] = "ab\n\r,1"[r.IntN(6)]
		}
		want := false
		for i := 0; i+1 < len(p); i++ {
			if p[i] == '\n' && (p[i+1] == '\n' || p[i+1] == '\r') {
				want = true
			}
		}
		if got := hasBlankLine(p); got != want {
			t.Fatalf("%q: got %v", p, got)
		}
	}
}

// The lines of a fast-path result are those of the row-by-row path, with blank lines and
// quoted multi-line records before the window.
func TestLocateLines(t *testing.T) {
	var b strings.Builder
	b.WriteString("ts,amount\n")
	for i := 0; i < 200000; i++ {
		switch {
		case i == 1000:
			b.WriteString("\n\r\n")
		case i == 150000:
			b.WriteString("\"1\n\",1\n") // a quoted field over two lines: one row
		}
		fmt.Fprintf(&b, "%d,%d\n", i, (i*7919)%1000+1+i/151000)
	}
	p := writeTemp(t, "l.csv", []byte(b.String()))
	fast, err := runAllFile(t, Job{Size: 1000}, p)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := runAllFile(t, Job{Size: 1000, SkipBad: true}, p)
	if err != nil {
		t.Fatal(err)
	}
	f, s := fast.Results[0], slow.Results[0]
	if f.Start != s.Start || f.StartLine != s.StartLine || f.EndLine != s.EndLine || f.StartLine == 0 || f.Start < 150000 {
		t.Fatalf("fast %+v\nslow %+v", f, s)
	}
}
