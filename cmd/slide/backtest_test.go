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
		{"", []string{"--policies", pol, "--format", "xml", "-"}, 2, `--format xml: want text or json`},
		{"ts,key\n2000,a\n1000,a\n", []string{"--policies", pol, "-"}, 1, "slide backtest: -: line 3: request earlier than the previous one"},
		{"ts,key\n1,a\n", []string{"--policies", "/nonexistent.yaml", "-"}, 1, "reading policy file"},
		// An empty export (none, a header, blank lines) fails rather than reporting 0 denied.
		{"", []string{"--policies", pol, "-"}, 1, "slide backtest: -: no requests in the log"},
		{"ts,key\r\n", []string{"--policies", pol, "-"}, 1, "slide backtest: -: no requests in the log"},
		{"\n\n", []string{"--policies", pol, "-"}, 1, "slide backtest: -: no requests in the log"},
	} {
		code, _, stderr := runBacktest(t, c.stdin, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %s; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// --plans: each key replays with its plan's limit on a calendar day, and the most denied
// keys name their plan; a plan naming an unknown policy is refused with its line.
func TestBacktestPlans(t *testing.T) {
	dir := t.TempDir()
	pol, plans, bad := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "plans.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(pol, []byte("policies:\n  - {name: daily, algorithm: fixed_window, limit: 1, window: calendar_day, timezone: Europe/London}\n"), 0o644)
	os.WriteFile(plans, []byte("plans:\n  pro: {daily: {limit: 3}}\nkeys:\n  \"t-*\": pro\n"), 0o644)
	os.WriteFile(bad, []byte("plans:\n  pro: {hourly: {limit: 3}}\n"), 0o644)
	// 23:30 and 23:40 UTC on 2026-06-01 are 00:30 and 00:40 BST on the 2nd: one London day.
	log := "ts,key\n2026-06-01T22:50:00Z,t-1\n2026-06-01T22:55:00Z,u\n2026-06-01T23:30:00Z,t-1\n2026-06-01T23:30:00Z,u\n" +
		"2026-06-01T23:40:00Z,t-1\n2026-06-01T23:40:00Z,u\n2026-06-01T23:50:00Z,t-1\n2026-06-01T23:50:00Z,u\n2026-06-01T23:55:00Z,t-1\n"
	code, out, stderr := runBacktest(t, log, "--policies", pol, "--plans", plans, "-")
	// The 1st: one each. The 2nd: t-1 (pro) 3 of 4, u 1 of 3.
	want := "policy daily (fixed_window 1/calendar_day Europe/London): 9 requests, 6 allowed, 3 denied\n" +
		"  most denied keys: u 2, t-1 (pro) 1\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("exit %d\n got %s\nwant %s\nstderr %s", code, out, want, stderr)
	}
	if code, _, stderr := runBacktest(t, log, "--policies", pol, "--plans", bad, "-"); code == 0 || !strings.Contains(stderr, `bad.yaml:2: plan "pro": unknown policy or rule "hourly"`) {
		t.Errorf("bad plans: exit %d, stderr %s", code, stderr)
	}
}

// A rule the rings cannot serve is refused with a --rings value that serves it; pasting that
// value must not undo the rings the other rules read. The hint named only the refused metric
// (--rings tokens=…), which dropped the default cost rings, so the next start refused the
// cost rule with --rings cost=…, which dropped tokens again: the hints went round forever.
func TestBacktestRingsHintKeepsOtherMetrics(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "p.yaml")
	os.WriteFile(pol, []byte(`rules:
  - {name: day, metric: cost, agg: sum, window: 24h, max: 5}
  - {name: month, metric: tokens, agg: sum, window: calendar_month, max: 5}
`), 0o644)
	log := filepath.Join(dir, "log.csv")
	os.WriteFile(log, []byte("ts,key\n1000,a\n"), 0o644)
	args := []string{"--policies", pol, log}
	for range 3 {
		code, _, stderr := runBacktest(t, "", args...)
		if code == 0 {
			return
		}
		_, hint, ok := strings.Cut(stderr, "--rings ")
		if !ok {
			t.Fatalf("refused without a --rings hint: %s", stderr)
		}
		hint, _, _ = strings.Cut(strings.TrimSpace(hint), "\n")
		args = append([]string{"--rings", hint}, args[len(args)-3:]...)
	}
	t.Fatalf("following the --rings hints three times still does not load: %v", args)
}
