package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.out from the current output")

// runBatch runs "slide batch args…" in process from the repository root.
func runBatch(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"batch"}, args...), stdio{strings.NewReader(stdin), &out, &errb})
	return code, out.String(), errb.String()
}

// TestBatchGolden runs every testdata/golden/NAME.args (one argument per line) and compares
// stdout, then stderr after a "--- stderr" line, with NAME.out.
func TestBatchGolden(t *testing.T) {
	t.Chdir("../..")
	argsFiles, err := filepath.Glob("testdata/golden/*.args")
	if err != nil || len(argsFiles) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, af := range argsFiles {
		name := strings.TrimSuffix(filepath.Base(af), ".args")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(af)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimSpace(string(raw)), "\n")
			code, stdout, stderr := runBatch(t, "", args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got := stdout
			if stderr != "" {
				got += "--- stderr\n" + stderr
			}
			golden := strings.TrimSuffix(af, ".args") + ".out"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("slide batch %s\n got:\n%s\nwant:\n%s", strings.Join(args, " "), got, want)
			}
		})
	}
}

// The article's line, through the binary's code path, from stdin.
func TestBatchArticleFromStdin(t *testing.T) {
	var in strings.Builder
	in.WriteString("amount\n")
	for i := 0; i < 100_000; i++ {
		in.WriteString(strings.TrimSpace(strings.Repeat(" ", 0)))
		in.WriteString(itoa((i*7919)%1000+1) + "\n")
	}
	code, stdout, stderr := runBatch(t, in.String(), "--size", "1000", "-")
	const want = `{"agg":"sum","size":1000,"n":100000,"best":500500,"start":0,"end":999,"start_line":2,"end_line":1001}` + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

func TestBatchEnvironment(t *testing.T) {
	t.Setenv("SLIDE_SIZE", "2")
	t.Setenv("SLIDE_AGG", "max")
	code, stdout, stderr := runBatch(t, "amount\n1\n5\n2\n", "-")
	if code != 0 || stdout != `{"agg":"max","size":2,"n":3,"best":5,"start":0,"end":1,"start_line":2,"end_line":3}`+"\n" {
		t.Fatalf("env: exit %d %q %s", code, stdout, stderr)
	}
	// The command line wins over the environment, also after the file argument.
	code, stdout, _ = runBatch(t, "amount\n1\n5\n2\n", "-", "--agg", "min")
	if code != 0 || stdout != `{"agg":"min","size":2,"n":3,"best":2,"start":1,"end":2,"start_line":3,"end_line":4}`+"\n" {
		t.Fatalf("flag after file: exit %d %q", code, stdout)
	}
}

// TestBatchAnyStat: --agg takes what serve takes (window.ParseStat), and the results and
// the series name each aggregate by its one name (p50 of {1, 4} is the sketch's bin, 1%
// above 1).
func TestBatchAnyStat(t *testing.T) {
	code, stdout, stderr := runBatch(t, "ts,amount\n1000,1\n1500,4\n2000,2\n", "--span", "1s", "--agg", "0.5,RATE,p100", "--series", "-", "-")
	want := `{"row":0,"line":2,"ts":1000,"time":"1970-01-01T00:00:01.000Z","p50":1,"rate":1,"p100":1}
{"row":1,"line":3,"ts":1500,"time":"1970-01-01T00:00:01.500Z","p50":1.0100000000000005,"rate":2,"p100":4}
{"row":2,"line":4,"ts":2000,"time":"1970-01-01T00:00:02.000Z","p50":2,"rate":2,"p100":4}
`
	if code != 0 || stdout != want || !strings.Contains(stderr, `{"agg":"p50",`) || !strings.Contains(stderr, `{"agg":"rate","span_ms":1000,"n":3,"best":2,`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if code, _, stderr := runBatch(t, "amount\n1\n", "--size", "1", "--agg", "rate", "-"); code != 2 || !strings.Contains(stderr, "needs a time window") {
		t.Errorf("rate over a count window: exit %d %s", code, stderr)
	}
}

func TestBatchErrors(t *testing.T) {
	cases := []struct {
		name, stdin string
		args        []string
		code        int
		stderr      string // substring
	}{
		{"no file", "", []string{"--size", "3"}, 2, "missing input FILE"},
		{"no window", "", []string{"-"}, 2, "set a count window (size) or a time window (span)"},
		{"both windows", "", []string{"--size", "3", "--span", "1s", "-"}, 2, "not both"},
		{"bad agg", "", []string{"--size", "3", "--agg", "median", "-"}, 2, `agg "median"`},
		{"bad flag", "", []string{"--sise", "3", "-"}, 2, "unknown flag --sise"},
		{"two files", "", []string{"--size", "3", "a.csv", "b.csv"}, 2, "one input file, got 2"},
		{"bad sketch", "", []string{"--size", "3", "--agg", "p95", "--sketch", "tdigest", "-"}, 2, "--sketch"},
		{"missing file", "", []string{"--size", "3", "/nonexistent/orders.csv"}, 1, "no such file"},
		{"bad value", "ts,amount\n1,10\n2,x\n", []string{"--size", "1", "-"}, 1,
			`slide batch: -: row 1 (line 3), column "amount": not a number: "x"`},
		{"unsorted", "ts,amount\n2000,1\n1000,2\n", []string{"--span", "1s", "-"}, 1,
			`slide batch: -: row 1 (line 3), column "ts": timestamp earlier than the previous row's`},
		{"ambiguous column", "id,amount\n1,2\n", []string{"--size", "1", "-"}, 1,
			"several numeric columns (id, amount); choose one (set --column)"},
		{"missing column", "ts,amount\n1,2\n", []string{"--size", "1", "--column", "price", "-"}, 1,
			`missing column "price" (columns: ts, amount)`},
		// A file of another delimiter reads as one column holding it: the answer says so and
		// names the flag, instead of only "set --column" (the column was there).
		{"semicolons, no column", "ts;amount\n1000;1\n", []string{"--size", "1", "-"}, 1,
			`no numeric column in the first row (columns: ts;amount: one column holding ';', the file's delimiter?) (set --delimiter ';')`},
		{"semicolons, column", "ts;amount\n1000;1\n", []string{"--size", "1", "--column", "amount", "-"}, 1,
			`missing column "amount" (columns: ts;amount: one column holding ';', the file's delimiter?) (set --delimiter ';')`},
		{"tabs", "ts\tamount\n1000\t1\n", []string{"--size", "1", "--column", "amount", "-"}, 1,
			"(columns: ts\tamount: one column holding a tab, the file's delimiter?) (set --delimiter tab)"},
		// An input with no window to give names itself like any other bad input.
		{"empty input", "", []string{"--size", "1", "-"}, 1, "slide batch: -: empty input: no data rows"},
		{"header only", "ts,amount\n", []string{"--size", "1", "--column", "amount", "-"}, 1, "slide batch: -: no data rows"},
		{"too few rows", "ts,amount\n1,2\n", []string{"--size", "3", "-"}, 1,
			"slide batch: -: fewer rows than the window size: 1 rows, window size 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runBatch(t, c.stdin, c.args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) || stdout != "" {
				t.Fatalf("exit %d (want %d)\nstdout %q\nstderr %s\nwant stderr containing %q", code, c.code, stdout, stderr, c.stderr)
			}
			if c.code == 2 && (!strings.HasSuffix(stderr, "\nrun 'slide batch --help' for usage\n") || strings.Count(stderr, "\n") != 2) {
				t.Fatalf("a usage error is one line and the pointer to --help:\n%s", stderr)
			}
		})
	}
}

func TestBatchSeriesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "series.txt")
	code, stdout, stderr := runBatch(t, "amount\n1\n2\n3\n4\n", "--size", "2", "--series", path, "-")
	if code != 0 || stdout != `{"agg":"sum","size":2,"n":4,"best":7,"start":2,"end":3,"start_line":4,"end_line":5}`+"\n" {
		t.Fatalf("exit %d %q %s", code, stdout, stderr)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "{\"row\":1,\"line\":3,\"sum\":3}\n{\"row\":2,\"line\":4,\"sum\":5}\n{\"row\":3,\"line\":5,\"sum\":7}\n" {
		t.Fatalf("series file %q, %v", got, err)
	}
}

// A job that fails on a bad row (exit 1) once left the windows before it in --series FILE,
// a fresh file that make takes for an up-to-date target and a later step for the answer.
// FILE is replaced only when the job succeeds; a failed one leaves it as it was.
func TestBatchSeriesFileOnlyOnSuccess(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"series.csv", "series.parquet"} {
		path := filepath.Join(dir, name)
		code, _, stderr := runBatch(t, "amount\n1\n2\n3\nx\n4\n", "--size", "2", "--series", path, "-")
		if code != 1 || !strings.Contains(stderr, "line 5") {
			t.Fatalf("%s: exit %d, %s", name, code, stderr)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: a failed job left the series file (%v)", name, err)
		}
		if err := os.WriteFile(path, []byte("previous\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		runBatch(t, "amount\n1\n2\n3\nx\n4\n", "--size", "2", "--series", path, "-")
		if got, err := os.ReadFile(path); err != nil || string(got) != "previous\n" {
			t.Errorf("%s: a failed job overwrote the series file: %.40q %v", name, got, err)
		}
		if code, _, stderr := runBatch(t, "amount\n1\n2\n", "--size", "2", "--series", path, "-"); code != 0 {
			t.Fatalf("%s: exit %d, %s", name, code, stderr)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) == "previous\n" {
			t.Errorf("%s: a good job did not replace the series file: %.40q %v", name, got, err)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 2 {
		t.Errorf("files left in the directory: %v", left)
	}
}

// With --skip-bad, a file whose every row is bad (a ts column of microseconds) failed with
// "no data rows" alone: the 100,000 rows skipped, and why, went unsaid.
func TestBatchSkipBadReportsOnFailure(t *testing.T) {
	code, _, stderr := runBatch(t, "ts,amount\n1764489600040000,1\n1764489600041000,2\n", "--span", "1m", "--skip-bad", "-")
	if code != 1 || !strings.Contains(stderr, "skipped 2 bad rows: 2 bad_timestamp (first at line 2)") ||
		!strings.Contains(stderr, "no data rows") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

func TestProgressBar(t *testing.T) {
	var screen bytes.Buffer
	p := &progress{w: &screen, total: 1000 << 20, began: time.Now().Add(-2 * time.Second)}
	if got, want := p.line(5_000_000, 600<<20, 2*time.Second), "\r[==================            ]  60% 5000000 rows 629.1/1048.6 MB 314.6 MB/s ETA 1s\033[K"; got != want {
		t.Fatalf("bar\n got %q\nwant %q", got, want)
	}
	p.update(1, 1)
	p.clear()
	if s := screen.String(); !strings.HasPrefix(s, "\r[") || !strings.HasSuffix(s, "\r\033[K") {
		t.Fatalf("progress output %q", s)
	}
	// Not a terminal (a buffer): the command draws nothing on stderr.
	code, _, stderr := runBatch(t, "amount\n1\n", "--size", "1", "-")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// The new flags end to end: group-by with several aggregates in the three output formats,
// a semicolon file, count without a value column, --skip-bad's summary, Parquet and gzip.
func TestBatchDataTeamFlags(t *testing.T) {
	t.Chdir("../..")
	csvIn := "order_id;ts;amount;region\n1;1000;5;eu\n2;2000;7;us\n3;3000;1;eu\n4;4000;9;us\n5;5000;2;eu\n"
	code, out, stderr := runBatch(t, csvIn, "--delimiter", ";", "--size", "2", "--agg", "sum,max", "--group-by", "region", "--id-column", "order_id", "-")
	want := `{"group":"eu","agg":"sum","size":2,"n":3,"best":6,"start":0,"end":2,"start_line":2,"end_line":4,"start_id":"1","end_id":"3"}
{"group":"eu","agg":"max","size":2,"n":3,"best":5,"start":0,"end":2,"start_line":2,"end_line":4,"start_id":"1","end_id":"3"}
{"group":"us","agg":"sum","size":2,"n":2,"best":16,"start":1,"end":3,"start_line":3,"end_line":5,"start_id":"2","end_id":"4"}
{"group":"us","agg":"max","size":2,"n":2,"best":9,"start":1,"end":3,"start_line":3,"end_line":5,"start_id":"2","end_id":"4"}
`
	if code != 0 || out != want {
		t.Fatalf("json: exit %d\n got %s\nwant %s\n%s", code, out, want, stderr)
	}
	code, out, _ = runBatch(t, csvIn, "--delimiter", ";", "--size", "2", "--column", "amount", "--group-by", "region", "--format", "csv", "-")
	wantCSV := "region,agg,window,n,best,start_row,end_row,start_line,end_line\neu,sum,2 rows,3,6,0,2,2,4\nus,sum,2 rows,2,16,1,3,3,5\n"
	if code != 0 || out != wantCSV {
		t.Fatalf("csv: exit %d\n got %q\nwant %q", code, out, wantCSV)
	}
	code, out, _ = runBatch(t, csvIn, "--delimiter", ";", "--span", "2s", "--agg", "count", "--format", "table", "-")
	wantTable := "agg    window  n  best  start_row  end_row  start_line  end_line  start_time                end_time\n" +
		"count  2s      5  2     0          1        2           3         1970-01-01T00:00:01.000Z  1970-01-01T00:00:02.000Z\n"
	if code != 0 || out != wantTable {
		t.Fatalf("table: exit %d\n got %q\nwant %q", code, out, wantTable)
	}
	code, out, stderr = runBatch(t, "ts,amount\n1000,1\n2000,x\n3000,2\n2500,4\n4000,3\n", "--span", "10s", "--skip-bad", "-")
	if code != 0 || !strings.Contains(out, `"n":3,"best":6,`) ||
		stderr != "slide batch: -: skipped 2 bad rows: 1 not_a_number (first at line 3), 1 unsorted_timestamp (first at line 5)\n" {
		t.Fatalf("skip-bad: exit %d %q %q", code, out, stderr)
	}
	// The same answers from the DuckDB-written Parquet and from gzip as from the CSV.
	args := []string{"--size", "1000", "--column", "amount", "--format", "csv"}
	_, fromCSV, _ := runBatch(t, "", append(args, "testdata/orders_regions.csv")...)
	_, fromParquet, stderr := runBatch(t, "", append(args, "testdata/orders_regions.parquet")...)
	raw, _ := os.ReadFile("testdata/orders_regions.csv")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	_, fromGzip, _ := runBatch(t, gz.String(), append(args, "-")...)
	cut := func(s string) string { // the columns before the lines (Parquet's are row numbers)
		var b strings.Builder
		for _, l := range strings.Split(s, "\n") {
			f := strings.Split(l, ",")
			b.WriteString(strings.Join(f[:min(len(f), 6)], ",") + "\n")
		}
		return b.String()
	}
	if fromCSV == "" || cut(fromParquet) != cut(fromCSV) || fromGzip != fromCSV {
		t.Fatalf("csv %q\nparquet %q (%s)\ngzip %q", fromCSV, fromParquet, stderr, fromGzip)
	}
	code, _, stderr = runBatch(t, "", "--size", "2", "--format", "xml", "-")
	if code != 2 || !strings.Contains(stderr, `--format xml: want json, table or csv`) {
		t.Fatalf("bad format: %d %s", code, stderr)
	}
	// From the environment, the variable is what is named (#31: SLIDE_FORMAT's error named --format).
	t.Setenv("SLIDE_FORMAT", "xml")
	code, _, stderr = runBatch(t, "", "--size", "2", "-")
	if code != 2 || !strings.Contains(stderr, `SLIDE_FORMAT=xml: want json, table or csv`) {
		t.Fatalf("bad SLIDE_FORMAT: %d %s", code, stderr)
	}
	os.Unsetenv("SLIDE_FORMAT")
	code, _, stderr = runBatch(t, "", "--size", "2", "--delimiter", ";;", "-")
	if code != 2 || !strings.Contains(stderr, `--delimiter ";;"`) {
		t.Fatalf("bad delimiter: %d %s", code, stderr)
	}
}

// TestBatchSeriesParquet: --series FILE.parquet writes the windows the CSV series has, row
// for row: each aggregate column, read back from the Parquet file by slide batch itself (a
// window of one row: its max is the row's value), equals the CSV's.
func TestBatchSeriesParquet(t *testing.T) {
	t.Chdir("../..")
	dir := t.TempDir()
	csvPath, pqPath := filepath.Join(dir, "series.csv"), filepath.Join(dir, "series.PARQUET")
	args := []string{"testdata/orders_regions.csv", "--column", "amount", "--span", "60s", "--group-by", "region", "--agg", "sum,p95", "--format", "csv"}
	for _, out := range []string{csvPath, pqPath} {
		if code, _, stderr := runBatch(t, "", append(args, "--series", out)...); code != 0 {
			t.Fatalf("--series %s: exit %d %s", out, code, stderr)
		}
	}
	raw, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if lines[0] != "group,row,line,ts,time,sum,p95" || len(lines) != 10001 {
		t.Fatalf("CSV series: header %q, %d lines", lines[0], len(lines))
	}
	pq, err := os.ReadFile(pqPath)
	if err != nil || !bytes.HasPrefix(pq, []byte("PAR1")) || !bytes.HasSuffix(pq, []byte("PAR1")) {
		t.Fatalf("%s is not a Parquet file (%d bytes, %v)", pqPath, len(pq), err)
	}
	for col, agg := range map[int]string{5: "sum", 6: "p95"} {
		code, out, stderr := runBatch(t, "", pqPath, "--size", "1", "--column", agg, "--agg", "max", "--series", "-", "--format", "csv")
		if code != 0 {
			t.Fatalf("reading %s back: exit %d %s", pqPath, code, stderr)
		}
		back := strings.Split(strings.TrimSpace(out), "\n")
		if back[0] != "row,line,max" || len(back) != len(lines) {
			t.Fatalf("%s read back: header %q, %d lines, want %d", agg, back[0], len(back), len(lines))
		}
		for i := 1; i < len(lines); i++ {
			want := strings.Split(lines[i], ",")[col]
			if got := strings.Split(back[i], ",")[2]; got != want {
				t.Fatalf("row %d, %s: %s in the Parquet file, %s in the CSV", i-1, agg, got, want)
			}
		}
	}
}
