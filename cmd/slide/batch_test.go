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
		{"bad flag", "", []string{"--sise", "3", "-"}, 2, "flag provided but not defined: -sise"},
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runBatch(t, c.stdin, c.args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) || stdout != "" {
				t.Fatalf("exit %d (want %d)\nstdout %q\nstderr %s\nwant stderr containing %q", code, c.code, stdout, stderr, c.stderr)
			}
			if c.code == 2 && !strings.Contains(stderr, "usage: slide batch") && !strings.Contains(stderr, "-size") {
				t.Fatalf("usage error without usage:\n%s", stderr)
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
