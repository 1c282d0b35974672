package reliability_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// readerRSSBound is the peak RSS `slide batch` may reach refusing an input past the readers'
// bounds (a 64 MiB line, a 4 MiB header): a stream holds one line of up to 64 MiB while its
// buffer doubles to it (about 157 MiB measured), a mapped file only the 64 MiB it looked at
// for a line end (about 90 MiB). Before the bounds, a 1 GiB line in a file took 4.2 GB and a
// 300 MiB first row 1.87 GB.
const readerRSSBound = 200 << 20

// TestBatchReadersBoundBeforeTheyBuffer feeds `slide batch` what issue #25's probe fed it: a
// 1 GiB line (a sparse file, a pipe, a zstd stream), a 300 MiB first data row, a header of
// 10M columns (78 MiB), and the same past the limits of NDJSON. Each must stop with exit 1
// and an error naming the line and the limit, within readerRSSBound.
func TestBatchReadersBoundBeforeTheyBuffer(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name, head string, hole int64, tail string) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(head); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(tail), int64(len(head))+hole); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const gib = 1 << 30
	line1G := sparse("line1g.csv", "amount\n1\n", gib, "\n2\n")
	row300M := sparse("row300m.csv", "amount\n", 300<<20, "\n2\n")
	// The probe's header: 10,000,000 names, 78 MB (the numbers 0 … 9,999,999).
	var hdr bytes.Buffer
	for i := range 10_000_000 {
		if i > 0 {
			hdr.WriteByte(',')
		}
		hdr.WriteString(strconv.Itoa(i))
	}
	hdr.WriteString("\n1,2,3\n")
	header10M := filepath.Join(dir, "header10m.csv")
	if err := os.WriteFile(header10M, hdr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// A header of 1M columns in 2 MiB: under the byte limit, past the column limit.
	wide := filepath.Join(dir, "wide.csv")
	if err := os.WriteFile(wide, append(bytes.Repeat([]byte("a,"), 1<<20), "amount\n1\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("header of 10M columns: %.1f MiB", float64(hdr.Len())/(1<<20))

	for _, c := range []struct {
		name  string
		args  []string
		stdin func(w io.Writer) error // written to a pipe on stdin until slide stops reading
		want  string
	}{
		{"1 GiB line, mapped file", []string{"--size", "1", line1G}, nil,
			"line1g.csv: line 3: line too long (limit 64 MiB)"},
		{"1 GiB line, file row by row", []string{"--size", "1", "--agg", "sum,count", line1G}, nil,
			"line1g.csv: line 3: line too long (limit 64 MiB)"},
		{"1 GiB line, stdin", []string{"--size", "1", "-"}, func(w io.Writer) error {
			return writeLine(w, "amount\n1\n", gib)
		}, "-: line 3: line too long (limit 64 MiB)"},
		{"1 GiB line, zstd stdin", []string{"--size", "1", "-"}, func(w io.Writer) error {
			// RLE blocks: 32 KiB of stream, not an encoder's pass over 1 GiB (slow under -race).
			_, err := w.Write(kafkatest.ZstdRLE([]byte("amount\n1\n"), '7', gib, []byte("\n2\n")))
			return err
		}, "-: line 3: line too long (limit 64 MiB)"},
		{"300 MiB first data row", []string{"--size", "1", "--column", "amount", row300M}, nil,
			"row300m.csv: reading CSV: line 2: line too long (limit 64 MiB)"},
		{"10M-column header, mapped file", []string{"--size", "1", header10M}, nil,
			"header10m.csv: reading CSV header: line 1: header too large (limits 4 MiB and 65536 columns)"},
		{"10M-column header, stdin", []string{"--size", "1", "-"}, func(w io.Writer) error {
			_, err := w.Write(hdr.Bytes())
			return err
		}, "-: reading CSV header: line 1: header too large (limits 4 MiB and 65536 columns)"},
		{"1M columns in 2 MiB", []string{"--size", "1", wide}, nil,
			"wide.csv: reading CSV header: line 1: header too large: more than 65536 columns"},
		{"NDJSON 1 GiB line, stdin", []string{"--size", "1", "-"}, func(w io.Writer) error {
			return writeLine(w, "{\"amount\":1}\n{\"amount\":2,\"s\":\"", gib)
		}, "-: line 2: line too long (limit 64 MiB)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rssFile := filepath.Join(t.TempDir(), "rss")
			cmd := exec.Command(os.Args[0], append([]string{slideBin, "batch"}, c.args...)...)
			cmd.Env = append(os.Environ(), measureRSSEnv+"="+rssFile)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			writeErr := make(chan error, 1)
			if c.stdin != nil {
				w, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					bw := bufio.NewWriterSize(w, 1<<20)
					err := c.stdin(bw)
					if err == nil {
						err = bw.Flush()
					}
					w.Close()
					writeErr <- err
				}()
			} else {
				writeErr <- nil
			}
			began := time.Now()
			err := cmd.Run()
			elapsed := time.Since(began)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want 1; stderr:\n%s", err, stderr.String())
			}
			if werr := <-writeErr; werr != nil && !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, os.ErrClosed) {
				t.Fatalf("writing stdin: %v", werr)
			}
			raw, err := os.ReadFile(rssFile)
			if err != nil {
				t.Fatal(err)
			}
			peak, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if peak > readerRSSBound {
				t.Errorf("peak RSS %d MiB, bound %d MiB", peak>>20, readerRSSBound>>20)
			}
			msg := strings.TrimSpace(stderr.String())
			if !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 0 || strings.Contains(msg, "not a number") {
				t.Errorf("stderr %q, want one line containing %q", msg, c.want)
			}
			t.Logf("%s: %q; peak RSS %d MiB (bound %d MiB), %.2f s", c.name, msg, peak>>20, readerRSSBound>>20, elapsed.Seconds())
		})
	}
}

// measureRSSEnv names the file where the test binary, run as a launcher (see measureRSS),
// writes the peak RSS of the command it ran.
const measureRSSEnv = "SLIDE_TEST_PEAK_RSS_FILE"

// measureRSS runs args (stdin, stdout and stderr passed through), writes its peak RSS in
// bytes to the file named by measureRSSEnv and returns its exit code. A process started
// straight from the test would inherit the test's own peak RSS in its rusage (Go starts
// children with CLONE_VM, and Linux carries the old address space's peak across exec), so
// the test starts this small launcher, whose peak is a few MiB, and the launcher starts the
// command.
func measureRSS(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 125
	}
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	if err := os.WriteFile(os.Getenv(measureRSSEnv), []byte(strconv.FormatInt(peak, 10)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 125
	}
	return cmd.ProcessState.ExitCode()
}

// writeLine writes head, then n bytes of '7' with no line break.
func writeLine(w io.Writer, head string, n int64) error {
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	block := bytes.Repeat([]byte("7"), 1<<20)
	for ; n > 0; n -= int64(len(block)) {
		if _, err := w.Write(block[:min(int64(len(block)), n)]); err != nil {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
	}
	return nil
}
