package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// flagsDocPath is the flag reference, written from the flag sets themselves.
const flagsDocPath = "../../docs/flags.md"

// flagsDoc renders docs/flags.md: per subcommand its synopsis and its flags, grouped by topic
// as --help groups them, each with its type, default and meaning as the flag set holds them.
func flagsDoc(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("# Flags\n\n")
	buf.WriteString("Generated from the flag sets by `make docs` (`TestFlagsDoc` fails when this page and the\n")
	buf.WriteString("flags drift apart). Every flag can also be set as `SLIDE_<FLAG>` (upper case, dashes as\n")
	buf.WriteString("underscores: `--max-series` is `SLIDE_MAX_SERIES`; `slide query`'s `--addr` is `SLIDE_URL`); the\n")
	buf.WriteString("command line wins. Byte sizes take units (`64MiB`, `1.5GB`) or a bare number of bytes; durations\n")
	buf.WriteString("take `ms`, `s`, `m`, `h`, and window lengths `d` too.\n")
	var captured *flag.FlagSet
	flagSetHook = func(fs *flag.FlagSet) { captured = fs }
	defer func() { flagSetHook = nil }()
	for _, sub := range subcommands {
		captured = nil
		if code := run(context.Background(), append(append([]string{}, sub...), "--help"), stdio{strings.NewReader(""), io.Discard, io.Discard}); code != 0 || captured == nil {
			t.Fatalf("slide %v --help: exit %d", sub, code)
		}
		name := strings.Join(sub, " ")
		fmt.Fprintf(&buf, "\n## `slide %s`\n\n`%s`\n", name, helpTexts[name].synopsis)
		topics := helpTopics[name]
		titles := []string{}
		for _, tp := range topics {
			titles = append(titles, tp.title)
		}
		for _, title := range append(titles, "other") {
			var rows []string
			captured.VisitAll(func(f *flag.Flag) {
				if topicOf(topics, f.Name) != title {
					return
				}
				typ, usage := flag.UnquoteUsage(f)
				switch f.Value.(type) {
				case windowFlag:
					typ = "duration"
				case bytesFlag:
					typ = "size"
				}
				if typ == "" {
					typ = "bool"
				}
				def := f.DefValue
				if isZeroDefault(f) {
					def = ""
				}
				cell := func(s string) string {
					return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
				}
				code := func(s string) string {
					if s == "" {
						return ""
					}
					return "`" + s + "`"
				}
				rows = append(rows, fmt.Sprintf("| `--%s` | %s | %s | %s |", f.Name, typ, code(cell(def)), cell(usage)))
			})
			if len(rows) == 0 {
				continue
			}
			if len(topics) > 0 {
				fmt.Fprintf(&buf, "\n### %s\n", title)
			}
			buf.WriteString("\n| flag | type | default | meaning |\n|---|---|---|---|\n")
			buf.WriteString(strings.Join(rows, "\n") + "\n")
		}
	}
	return buf.Bytes()
}

// TestFlagsDoc: docs/flags.md is what the flag sets say. A flag added, renamed or reworded
// fails here until `make docs` writes the page again (SLIDE_UPDATE_DOCS=1 does it here).
func TestFlagsDoc(t *testing.T) {
	want := flagsDoc(t)
	if os.Getenv("SLIDE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(flagsDocPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(flagsDocPath)
	if err != nil {
		t.Fatalf("%v (run make docs)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/flags.md drifted from the flags at line %d (run make docs):\n have %q\n want %q", i+1, g, w)
			}
		}
	}
}

// TestEveryFlagHasATopic: every flag of a subcommand that groups its flags belongs to a
// topic, so --help never ends in a heap called "other".
func TestEveryFlagHasATopic(t *testing.T) {
	for cmd, flags := range commandFlags(t) {
		topics, ok := helpTopics[cmd]
		if !ok {
			continue
		}
		for _, f := range flags {
			if topicOf(topics, f) == "other" {
				t.Errorf("slide %s --%s has no topic: add it to helpTopics[%q] in help_topics.go", cmd, f, cmd)
			}
		}
	}
}

// commandFlags returns the flags each subcommand defines, as its flag set has them when it
// parses --help (query: the union of its subcommands').
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	var mu sync.Mutex
	var seen []*flag.FlagSet
	flagSetHook = func(fs *flag.FlagSet) { mu.Lock(); seen = append(seen, fs); mu.Unlock() }
	defer func() { flagSetHook = nil }()
	out := map[string][]string{}
	for _, sub := range subcommands {
		seen = nil
		if code := run(context.Background(), append(append([]string{}, sub...), "--help"), stdio{strings.NewReader(""), io.Discard, io.Discard}); code != 0 {
			t.Fatalf("slide %v --help: exit %d", sub, code)
		}
		if len(seen) != 1 {
			t.Fatalf("slide %v --help parsed %d flag sets, want 1", sub, len(seen))
		}
		names := out[sub[0]]
		seen[0].VisitAll(func(f *flag.Flag) {
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		})
		out[sub[0]] = names
	}
	return out
}
