package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/rls"
)

// docYAML is a ```yaml block of a page: where it starts and its text.
type docYAML struct{ where, text string }

func docYAMLBlocks(t *testing.T, page string) []docYAML {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []docYAML
	var cur *docYAML
	for i, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```yaml":
			cur = &docYAML{where: page + ":" + strconv.Itoa(i+1)}
		case cur != nil && strings.HasPrefix(trimmed, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// docRings are the rings the pages' configs are loaded with: serve's defaults, and rings
// reaching a month for the tokens metric the calendar-month rules count (platform.md says
// they need them).
const docRings = DefaultRings + ",tokens=1m:60+1h:48+1d:36"

// TestDocsConfigsLoad: every slide configuration a page shows loads as the page says, so a
// reader can paste it: policies and rules files (a lone policy line as one of a file's
// policies), a plans file with the policies file shown before it on its page (whose names it
// must use), event maps and Envoy rate limit configs. Policies, plans and maps load through
// slide backtest, which refuses what serve refuses; another program's config (a Collector's,
// Envoy's) is not slide's to load.
func TestDocsConfigsLoad(t *testing.T) {
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	emptyLog, emptyLines := write("empty.csv", "ts,key\n"), write("empty.log", "")
	onePolicy := write("one.yaml", "policies:\n  - {name: p, algorithm: fixed_window, limit: 1, window: 1s}\n")
	backtest := func(b docYAML, log string, args ...string) {
		t.Helper()
		args = append(append([]string{"--rings", docRings}, args...), log)
		// An empty log fails after every file has loaded: that failure is a config that loads.
		if code, _, stderr := runBacktest(t, "", args...); code != 0 && !strings.HasSuffix(stderr, ": no requests in the log\n") {
			t.Errorf("%s: the page's config does not load:\n%s\n%s", b.where, b.text, stderr)
		}
	}
	checked := 0
	for _, page := range pages {
		policies := "" // the page's last policies file
		for i, b := range docYAMLBlocks(t, page) {
			name := filepath.Base(page) + "-" + strconv.Itoa(i) + ".yaml"
			switch first := strings.TrimSpace(b.text); {
			case strings.HasPrefix(first, "policies:"), strings.HasPrefix(first, "rules:"):
				policies = write(name, b.text)
				backtest(b, emptyLog, "--policies", policies)
			case strings.HasPrefix(first, "- {name:"):
				backtest(b, emptyLog, "--policies", write(name, "policies:\n"+b.text))
			case strings.HasPrefix(first, "plans:"):
				if policies == "" {
					t.Errorf("%s: a plans file with no policies file before it on its page to name", b.where)
					continue
				}
				backtest(b, emptyLog, "--policies", policies, "--plans", write(name, b.text))
			case strings.HasPrefix(first, "- metric:"):
				backtest(b, emptyLines, "--policies", onePolicy, "--event-map", write(name, b.text))
			case strings.HasPrefix(first, "domain:"):
				if _, err := rls.Parse([]byte(b.text), b.where, rls.LoadOptions{DefaultBackend: limiter.BackendRedis}); err != nil {
					t.Errorf("%s: the page's rate limit config does not load: %v", b.where, err)
				}
			default:
				continue
			}
			checked++
		}
	}
	if checked < 7 {
		t.Fatalf("checked %d configs of the pages; the reader no longer finds them", checked)
	}
}
