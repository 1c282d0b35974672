package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// shrinkLimits makes the readers' bounds small enough for unit tests, keeping their order:
// lines of 64 KiB, quote searches of 4 KiB and parallel chunks of at most 4 KiB (far below
// the line limit, as they must be), headers of 16 KiB and 100 columns.
func shrinkLimits(t *testing.T) {
	t.Helper()
	l, h, c, q, cs := lineLimit, headerLimit, columnLimit, quoteScan, chunkSize
	t.Cleanup(func() { lineLimit, headerLimit, columnLimit, quoteScan, chunkSize = l, h, c, q, cs })
	lineLimit, headerLimit, columnLimit, quoteScan, chunkSize = 64<<10, 16<<10, 100, 4<<10, min(chunkSize, 4<<10)
}

// inSmallModes is inModes with chunks that shrinkLimits allows: the sequential reader, then
// the parallel pipeline cutting the input into chunks of 8, 64 and 4096 bytes.
func inSmallModes(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer func(seq bool, size int) { sequentialOnly, chunkSize = seq, size }(sequentialOnly, chunkSize)
	t.Run("sequential", func(t *testing.T) { sequentialOnly = true; f(t) })
	for _, size := range []int{8, 64, 4096} {
		t.Run(fmt.Sprintf("chunks=%d", size), func(t *testing.T) { sequentialOnly, chunkSize = false, size; f(t) })
	}
}

// everyReader runs a job over in through each way slide reads a CSV: the CSVReader from a
// stream and from memory, and RunAll over a mapped file (Run's fast path), over the same file
// row by row and over its gzip stream (these two, which have no parallel mode, when rows is
// set). It returns each one's error.
func everyReader(t *testing.T, in string, rows bool) map[string]error {
	t.Helper()
	path := writeTemp(t, "in.csv", []byte(in))
	errs := map[string]error{}
	rd, err := NewCSVReader(strings.NewReader(in))
	if err == nil {
		_, _, err = readAll(t, rd, "amount", "")
	}
	errs["stream"] = err
	rd, err = newCSVReaderData([]byte(in))
	if err == nil {
		_, _, err = readAll(t, rd, "amount", "")
	}
	errs["memory"] = err
	_, errs["file"] = runAllFile(t, Job{Size: 1, Column: "amount"}, path)
	if rows {
		_, errs["file, row by row"] = runAllFile(t, Job{Size: 1, Column: "amount", IDColumn: "name"}, path)
		_, errs["gzip"] = Job{Size: 1, Column: "amount"}.RunAll(context.Background(), bytes.NewReader(gzipped(t, in)), "-", nil)
	}
	return errs
}

// TestLineLimit: a line of lineLimit bytes or more (without its newline) stops every reader
// with ErrLineTooLong naming the line, and one byte less is read; a quoted record of several
// lines is held to the same limit, named by the line it starts on.
func TestLineLimit(t *testing.T) { inSmallModes(t, testLineLimit) }

func testLineLimit(t *testing.T) {
	shrinkLimits(t)
	head := "name,amount\na,1\n\nb,2\n"      // the long line is line 5
	fits := strings.Repeat("x", lineLimit-3) // + ",3" is lineLimit-1 bytes
	for _, c := range []struct {
		name, in string
		line     int // 0: no error
	}{
		{"fits", head + fits + ",3\nc,4\n", 0},
		{"fits, crlf", head + fits[1:] + ",3\r\nc,4\n", 0},
		{"fits, last line", head + fits + ",3", 0},
		{"one byte over", head + fits + "x,3\nc,4\n", 5},
		{"one byte over, last line", head + fits + "x,3", 5},
		{"one byte over, rows before", "name,amount\na,1\nb,2\n" + fits + "x,3\nc,4\n", 4}, // parsed in chunks up to it
		{"fits, rows before", "name,amount\na,1\nb,2\n" + fits + ",3\nc,4\n", 0},
		{"far over", head + strings.Repeat("x", 2*lineLimit) + ",3\nc,4\n", 5},
		{"first data row", "name,amount\n" + strings.Repeat("1", lineLimit) + ",3\n", 2},
		{"quoted record", head + "\"" + strings.Repeat("x\n", lineLimit/2) + "\",3\nc,4\n", 5},
		{"quoted record fits", head + "\"" + strings.Repeat("x\n", lineLimit/4) + "\",3\nc,4\n", 0},
	} {
		for mode, err := range everyReader(t, c.in, sequentialOnly) {
			if c.line == 0 {
				if err != nil {
					t.Errorf("%s, %s: %v", c.name, mode, err)
				}
				continue
			}
			want := fmt.Sprintf("line %d: line too long", c.line)
			if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(limit 64 KiB)") {
				t.Errorf("%s, %s: %v, want ErrLineTooLong %q", c.name, mode, err, want)
			}
		}
	}
}

// TestHeaderLimit: a header past headerLimit bytes or columnLimit columns is ErrHeaderTooLarge,
// in every reader; one at the limits is read.
func TestHeaderLimit(t *testing.T) {
	shrinkLimits(t)
	cols := func(n int) string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("c%d", i)
		}
		names[0], names[n-1] = "name", "amount"
		return strings.Join(names, ",")
	}
	row := func(n int) string { return "a" + strings.Repeat(",", n-1) + "1\n" }
	long := "name," + strings.Repeat("x", headerLimit) + ",amount"
	for _, c := range []struct {
		name, in, msg string
	}{
		{"columns at the limit", cols(columnLimit) + "\n" + row(columnLimit), ""},
		{"one column over", cols(columnLimit+1) + "\n" + row(columnLimit+1), "line 1: header too large: more than 100 columns"},
		{"far more columns", "\n" + cols(2000) + "\n" + row(2000), "line 2: header too large: more than 100 columns"},
		{"bytes", long + "\n" + row(3), "line 1: header too large (limits 16 KiB and 100 columns)"},
		{"quoted bytes", "name,\"" + strings.Repeat("x\n", headerLimit/2) + "\",amount\n" + row(3), "line 1: header too large: a quoted record"},
	} {
		for mode, err := range everyReader(t, c.in, true) {
			if c.msg == "" {
				if err != nil {
					t.Errorf("%s, %s: %v", c.name, mode, err)
				}
				continue
			}
			if !errors.Is(err, ErrHeaderTooLarge) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s, %s: %v, want ErrHeaderTooLarge %q", c.name, mode, err, c.msg)
			}
		}
	}
}

// TestWideRowBounded: a row of millions of fields under a three-column header is a field
// count error, and splitting it allocates columnLimit fields, not one per comma (before the
// bound a 3 MiB row of commas cost 72 MB of field slices).
func TestWideRowBounded(t *testing.T) {
	shrinkLimits(t)
	lineLimit = 4 << 20 // a row of 3 MiB, under the limit
	wide := strings.Repeat(",", 3<<20)
	for name, in := range map[string]string{
		"plain":  "name,x,amount\na,1,2\n" + wide + "\n",
		"quoted": "name,x,amount\na,1,2\n\"q\"" + wide + "\n",
	} {
		path := writeTemp(t, "wide.csv", []byte(in))
		for _, j := range []Job{{Size: 1, Column: "amount"}, {Size: 1, Column: "amount", IDColumn: "name"}} {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := runAllFile(t, j, path)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrFieldCount) || !strings.Contains(err.Error(), "line 3") {
				t.Errorf("%s, %+v: %v, want a field count error on line 3", name, j, err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
				t.Errorf("%s, %+v: reading allocated %d MiB", name, j, alloc>>20)
			}
		}
	}
	var c csvRows
	c.delim = ','
	if fields, _ := c.fs.split([]byte(wide), c.delim, true); len(fields) != columnLimit+1 {
		t.Errorf("csvRows.split: %d fields, want columnLimit + 1", len(fields))
	}
	var r CSVReader
	if fields, _ := r.splitRecord([]byte("\"q\"" + wide)); len(fields) != columnLimit+1 {
		t.Errorf("CSVReader.splitRecord: %d fields, want columnLimit + 1", len(fields))
	}
}

// TestNDJSONBounds: NDJSON's lines have the line limit (named by line), and its first object,
// which gives the columns, at most columnLimit keys.
func TestNDJSONBounds(t *testing.T) {
	shrinkLimits(t)
	keys := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"amount":1`)
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, `,"k%d":%d`, i, i)
		}
		return b.String() + "}\n"
	}
	for _, c := range []struct {
		name, in string
		want     error
		msg      string
	}{
		{"keys at the limit", keys(columnLimit) + `{"amount":2}` + "\n", nil, ""},
		{"a key over", keys(columnLimit + 1), ErrHeaderTooLarge, "line 1: header too large: the first object has more than 100 keys"},
		{"a repeated key is one column", `{"amount":1` + strings.Repeat(`,"k":1`, 2*columnLimit) + "}\n", nil, ""},
		{"long line", `{"amount":1}` + "\n" + `{"amount":2,"s":"` + strings.Repeat("x", lineLimit) + `"}` + "\n", ErrLineTooLong, "line 2: line too long (limit 64 KiB)"},
	} {
		path := writeTemp(t, "in.ndjson", []byte(c.in))
		for _, j := range []Job{{Size: 1, Column: "amount"}, {Size: 1, Column: "amount", SkipBad: true}} {
			_, err := runAllFile(t, j, path)
			if c.want == nil && err != nil || c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg)) {
				t.Errorf("%s, %+v: %v, want %v %q", c.name, j, err, c.want, c.msg)
			}
		}
	}
}

// TestLongLineNotScannedToItsEnd: in a mapped file, the reader looks for a line's end no
// further than lineLimit (a 1 GiB line must not be paged in to be refused). The file here has
// a hole past the limit that faults when read: a read of it would be ErrInputChanged.
func TestLongLineNotScannedToItsEnd(t *testing.T) {
	shrinkLimits(t)
	path, data := mapTemp(t, []byte("amount\n1\n2\n"+strings.Repeat("7", lineLimit+1<<20)+"\n3\n"))
	// Shrink the file under the mapping: pages past the end now fault (SIGBUS).
	if err := os.Truncate(path, int64(len("amount\n1\n2\n")+lineLimit+4096)); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []bool{true, false} {
		t.Run(fmt.Sprintf("sequential=%v", seq), func(t *testing.T) {
			defer func(s bool) { sequentialOnly = s }(sequentialOnly)
			sequentialOnly = seq
			err := func() (err error) {
				defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
				defer func() {
					if e := recover(); e != nil {
						err = faultError(e)
					}
				}()
				_, err = Job{Size: 1}.Run(context.Background(), memInput(data), nil)
				return err
			}()
			if !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "line 4") {
				t.Fatalf("got %v, want ErrLineTooLong on line 4", err)
			}
		})
	}
}

// TestQuoteOpenMatchesSplitters: whether a record is complete, by quoteOpen line by line, is
// what both splitters find on the joined record, for every text of up to 8 bytes over
// quote, delimiter, letter, space and newline (that is one record: a quoted field open at each
// line end but the last).
func TestQuoteOpenMatchesSplitters(t *testing.T) {
	const alphabet = "\",a \n"
	var c CSVReader
	r := csvRows{delim: ','}
	var buf []byte
	checked := 0
	var walk func(n int)
	walk = func(n int) {
		lines := bytes.Split(buf, []byte("\n"))
		open := quoteOpen(lines[0], false, ',')
		for _, l := range lines[1:] {
			if !open {
				break
			}
			open = quoteOpen(l, true, ',')
		}
		if open || len(lines) == 1 || recordSpans(lines) {
			_, c1 := c.splitRecord(buf)
			_, c2 := r.fs.split(buf, r.delim, true)
			if c1 != !open || c2 != !open {
				t.Fatalf("%q: quoteOpen says complete=%v, splitRecord %v, csvRows.split %v", buf, !open, c1, c2)
			}
			checked++
		}
		if n == 0 {
			return
		}
		for i := 0; i < len(alphabet); i++ {
			buf = append(buf, alphabet[i])
			walk(n - 1)
			buf = buf[:len(buf)-1]
		}
	}
	walk(8)
	if checked < 100_000 {
		t.Fatalf("only %d texts checked", checked)
	}
}

// recordSpans reports whether a quoted field is open at every line end but the last.
func recordSpans(lines [][]byte) bool {
	open := quoteOpen(lines[0], false, ',')
	for _, l := range lines[1 : len(lines)-1] {
		if !open {
			return false
		}
		open = quoteOpen(l, true, ',')
	}
	return open
}

// A time window per group costs memory for the rows in its window, not a fixed ring: a file
// of one row per user, grouped by user, allocated 16 KiB per group and aggregate before (1M
// users of slide batch --span 60s --group-by key --agg sum,p95 took 23 GB of RSS).
func TestTimeWindowGroupsSmall(t *testing.T) {
	const groups = 20000
	var b strings.Builder
	b.WriteString("ts,user,amount\n")
	for i := range groups {
		fmt.Fprintf(&b, "%d,u%d,%d\n", 1000+i, i, i%97)
	}
	path := writeTemp(t, "users.csv", []byte(b.String()))
	j := Job{Span: time.Minute, Column: "amount", GroupBy: "user", Aggs: []string{AggSum, "p95"}}
	rep, per := allocatedPerGroup(t, j, path, groups)
	if len(rep.Results) != 2*groups {
		t.Fatalf("%d results, want %d", len(rep.Results), 2*groups)
	}
	// Two results a group (about 1.4 KiB with their slice's growth) and its state.
	if per > 8<<10 {
		t.Errorf("%d bytes allocated per group of one row, want at most 8 KiB", per)
	}
}

// allocatedPerGroup runs j over path and returns its report and the bytes it allocated per
// group of groups.
func allocatedPerGroup(t *testing.T, j Job, path string, groups int) (Report, uint64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := runAllFile(t, j, path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return rep, (after.TotalAlloc - before.TotalAlloc) / uint64(groups)
}

// A count window per group costs memory for the rows it holds, not for K of them: slide batch
// --size 1000 --group-by over 181k groups of a handful of rows took 1.8 GB for sum, 4 GB for
// max and 7.8 GB for p95, because every group's rings were allocated at K rows up front.
func TestCountWindowGroupsSmall(t *testing.T) {
	const groups, size, big = 20000, 1000, 1500
	var b strings.Builder
	b.WriteString("ts,user,amount\n")
	for i := range groups {
		fmt.Fprintf(&b, "%d,u%d,%d.%02d\n", 1000+i, i, i%97, i%100)
	}
	for i := range big { // one group with windows, so the job has an answer
		fmt.Fprintf(&b, "%d,big,%d\n", 1000+groups+i, i%89)
	}
	path := writeTemp(t, "users.csv", []byte(b.String()))
	aggs := []string{AggSum, AggMax, "p95"}
	j := Job{Size: size, Column: "amount", GroupBy: "user", Aggs: aggs}
	rep, per := allocatedPerGroup(t, j, path, groups)
	if len(rep.Results) != len(aggs)*(groups+1) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(aggs)*(groups+1))
	}
	for _, r := range rep.Results {
		if r.Group == "big" && (r.TooFew || r.N != big || r.End-r.Start != size-1) {
			t.Fatalf("group big: %+v", r)
		}
	}
	// Three results a group (about 2 KiB with their slice's growth) and its state.
	t.Logf("%d bytes allocated per group of one row", per)
	if per > 8<<10 {
		t.Errorf("%d bytes allocated per group of one row, want at most 8 KiB", per)
	}
}
