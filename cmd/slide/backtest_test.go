package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runBacktest(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"backtest"}, args...), stdio{strings.NewReader(stdin), &out, &errb})
	return code, out.String(), errb.String()
}

// The article's boundary burst through the command, from stdin, in both formats.
func TestBacktestCommand(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(pol, []byte(`policies:
  - {name: fixed, algorithm: fixed_window, limit: 100, window: 60s}
  - {name: log, algorithm: sliding_log, limit: 100, window: 60s, backend: redis}
`), 0o644)
	var log strings.Builder
	log.WriteString("ts,key\n")
	for i := 0; i < 200; i++ {
		ts := "2025-11-30T10:00:59.900Z"
		if i >= 100 {
			ts = "2025-11-30T10:01:00.100Z"
		}
		log.WriteString(ts + ",u42\n")
	}
	code, out, stderr := runBacktest(t, log.String(), "--policies", pol, "--format", "json", "-")
	want := `{"policy":"fixed","algorithm":"fixed_window","requests":200,"allowed":200,"denied":0,"top_denied":[],"timeline":[]}
{"policy":"log","algorithm":"sliding_log","requests":200,"allowed":100,"denied":100,"top_denied":[{"key":"u42","denied":100}],"timeline":[{"start":"2025-11-30T10:01:00Z","allowed":0,"denied":100}]}
`
	if code != 0 || out != want {
		t.Fatalf("exit %d\n got %s\nwant %s\nstderr %s", code, out, want, stderr)
	}
	code, out, _ = runBacktest(t, log.String(), "--policies", pol, "-")
	wantText := `policy fixed (fixed_window 100/1m0s): 200 requests, 200 allowed, 0 denied
policy log (sliding_log 100/1m0s): 200 requests, 100 allowed, 100 denied
  most denied keys: u42 100
  2025-11-30T10:01:00Z  100 denied, 0 allowed
`
	if code != 0 || out != wantText {
		t.Fatalf("text: exit %d\n got %s\nwant %s", code, out, wantText)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"-"}, 2, "missing --policies FILE"},
		{"", []string{"--policies", pol}, 2, "missing REQUESTS"},
		{"", []string{"--policies", pol, "--format", "xml", "-"}, 2, `--format "xml"`},
		{"ts,key\n2000,a\n1000,a\n", []string{"--policies", pol, "-"}, 1, "slide backtest: -: line 3: request earlier than the previous one"},
		{"ts,key\n1,a\n", []string{"--policies", "/nonexistent.yaml", "-"}, 1, "reading policy file"},
	} {
		code, _, stderr := runBacktest(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %s; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
