package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// tourStep is one "$ command" of the README's tour and the answer shown under it.
type tourStep struct {
	cmd, want string
	where     string // a docs page's "file:line"; "" for the README's tour, whose every answer is held
}

// readmeTour returns the demo banner and the command steps of the "Five-minute tour"
// section of README.md.
func readmeTour(t *testing.T) (banner string, steps []tourStep) {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, "\n## Five-minute tour\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Five-minute tour" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	inBlock := false
	var block []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "```") {
			if inBlock {
				b, st := parseTourBlock(block)
				if b != "" {
					banner = b
				}
				steps = append(steps, st...)
			}
			inBlock, block = !inBlock, nil
			continue
		}
		if inBlock {
			block = append(block, line)
		}
	}
	if banner == "" || len(steps) < 8 {
		t.Fatalf("README.md tour: banner found %v, %d commands; the parser no longer matches the README", banner != "", len(steps))
	}
	return banner, steps
}

// parseTourBlock splits a fenced block into "$ " commands and their answers; a block that
// starts with the banner's first line is the banner.
func parseTourBlock(lines []string) (banner string, steps []tourStep) {
	if len(lines) > 0 && strings.HasPrefix(lines[0], "slide is running") {
		return strings.Join(lines, "\n") + "\n", nil
	}
	for _, line := range lines {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, tourStep{cmd: cmd})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].want += line + "\n"
		}
	}
	for i := range steps {
		steps[i].want = strings.TrimRight(steps[i].want, "\n")
	}
	return "", steps
}

// TestREADMETour runs the README's tour as a user pastes it: `slide serve --demo` (on free
// ports, the README's 127.0.0.1:8080 rewritten to them), then each "$ " command through
// bash, from a directory holding ./bin/slide. Each answer must have the shape of the one
// the README shows (JSON: the same fields with the same types; HTTP: the same status line
// and header names; tables: the same lines with the same words where the README has
// words), and the banner must be the README's, printed after the startup logs.
func TestREADMETour(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour runs %s, which is not installed (make deps installs curl)", tool)
		}
	}
	banner, steps := readmeTour(t)
	start := time.Now()
	defer func() { t.Logf("tour: %s in all", time.Since(start).Round(time.Millisecond)) }()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := proctest.Build(filepath.Join(dir, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	kafkaAddr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %s", time.Since(start).Round(time.Millisecond))
	p := proctest.Start(t, "slide serve --demo", bin, "serve", "--demo", "--addr", addr, "--embedded-kafka-addr", kafkaAddr)
	base := "http://" + addr

	// The banner, as the README shows it, after the last startup log line.
	wantBanner := strings.ReplaceAll(banner, "127.0.0.1:8080", addr)
	if _, err := p.WaitOutput("Try, from another terminal", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// The rest of the banner: wait for it rather than a guessed time (a miss fails below).
	polltest.Until(10*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(p.Output(), wantBanner) })
	out := p.Output()
	at := strings.Index(out, wantBanner)
	if at < 0 {
		t.Fatalf("the banner differs from README.md's:\n%s\nwant:\n%s", out, wantBanner)
	}
	if gen := strings.Index(out, `msg="ingest: generation"`); gen < 0 || gen > at {
		t.Errorf("the banner is not after the startup logs:\n%s", out)
	}

	// Demo traffic reaches every tenant within seconds; the tour's tables need them all.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var m struct {
			Metrics []struct {
				Name   string
				Series int
			}
		}
		err := proctest.GetJSON(base+"/v1/metrics", &m)
		series := map[string]int{}
		for _, x := range m.Metrics {
			series[x.Name] = x.Series
		}
		// The tenants of both metrics, and the demo's spans of every service and route.
		if err == nil && len(m.Metrics) == 3 && series["latency_ms"] == 20 && series["cost"] == 20 && series["duration_ms"] >= 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo traffic did not reach the 20 tenants of both metrics and the 7 routes of the spans: %+v %v", m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	t.Logf("demo data after %s", time.Since(start).Round(time.Millisecond))
	// docs/sre.md's "$ " commands run against the same demo: each must succeed, and a JSON or
	// PromQL answer ("{…") must have the page's shape unless the page cut it short ("…"). A
	// table of history is held to success only: seconds after start its older rows are empty.
	for _, r := range docRuns(t, "../../docs/sre.md") {
		want := r.want
		if strings.Contains(want, "…") || !strings.HasPrefix(want, "{") {
			want = "" // run it, hold it to exit 0 and an answer
		}
		steps = append(steps, tourStep{cmd: r.cmd, want: want, where: r.where})
	}
	// The examples of slide query CMD --help run against make run too (sre.md says so), those
	// that ask another address aside: each must succeed and answer.
	for name, h := range helpTexts {
		for _, e := range h.examples {
			if strings.HasPrefix(name, "query") && !strings.Contains(e, "--addr") {
				steps = append(steps, tourStep{cmd: "./bin/" + e, where: "slide " + name + " --help"})
			}
		}
	}
	for _, st := range steps {
		cmd := strings.ReplaceAll(st.cmd, "127.0.0.1:8080", addr)
		c := exec.Command("bash", "-c", cmd)
		c.Dir = dir
		// ./bin/slide query's --addr; curl must not send loopback requests to a proxy.
		c.Env = append(os.Environ(), "SLIDE_URL="+addr, "no_proxy=127.0.0.1,localhost", "NO_PROXY=127.0.0.1,localhost")
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := c.Run(); err != nil {
			t.Errorf("$ %s\n%v\n%s%s", st.cmd, err, stdout.String(), stderr.String())
			continue
		}
		got := strings.TrimRight(strings.ReplaceAll(stdout.String(), "\r\n", "\n"), "\n")
		if st.where != "" && st.want == "" {
			if got == "" {
				t.Errorf("%s: $ %s\nanswered nothing", st.where, st.cmd)
			}
			continue
		}
		gotShape, wantShape := answerShape(got), answerShape(st.want)
		if gotShape != wantShape {
			t.Errorf("$ %s\nanswered:\n%s\nwhose shape\n  %s\ndiffers from the README's answer\n%s\n  %s", st.cmd, got, gotShape, st.want, wantShape)
		}
	}
}

// answerShape describes an answer without its values: JSON as its fields and their types,
// an HTTP response (curl -i) as its status line, header names and body, text line by line
// with every token holding a digit replaced by N.
func answerShape(s string) string {
	if head, body, ok := strings.Cut(s, "\n\n"); ok && strings.HasPrefix(s, "HTTP/") {
		lines := strings.Split(head, "\n")
		var names []string
		for _, h := range lines[1:] {
			name, _, _ := strings.Cut(h, ":")
			names = append(names, strings.ToLower(name))
		}
		slices.Sort(names)
		return lines[0] + " [" + strings.Join(names, " ") + "] " + answerShape(body)
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "{") {
			var v any
			d := json.NewDecoder(strings.NewReader(line))
			d.UseNumber()
			if err := d.Decode(&v); err == nil {
				out = append(out, jsonShape(v))
				continue
			}
		}
		fields := strings.Fields(line)
		for i, f := range fields {
			if digits.MatchString(f) {
				fields[i] = "N"
			}
		}
		out = append(out, strings.Join(fields, " "))
	}
	return strings.Join(out, " | ")
}

var digits = regexp.MustCompile(`[0-9]`)

func jsonShape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%q:%s", k, jsonShape(x[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		first := jsonShape(x[0])
		for _, e := range x[1:] {
			if jsonShape(e) != first {
				return "[mixed]"
			}
		}
		return "[" + first + "]"
	case json.Number:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}
