package main

import (
	"context"
	"flag"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// readmeFlagTables returns, per "### `slide CMD`" section of README.md, the flags named in
// the first cell of its table rows ("| `--topic`, `--group` | ...").
func readmeFlagTables(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^#{2,3} ")
	section := regexp.MustCompile("^### `slide ([a-z]+)`")
	flagName := regexp.MustCompile("`--([a-z0-9-]+)`")
	tables := map[string][]string{}
	cmd := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if heading.MatchString(line) {
			cmd = ""
			if m := section.FindStringSubmatch(line); m != nil {
				cmd = m[1]
				tables[cmd] = nil
			}
			continue
		}
		if cmd == "" || !strings.HasPrefix(line, "| `--") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range flagName.FindAllStringSubmatch(first, -1) {
			tables[cmd] = append(tables[cmd], m[1])
		}
	}
	return tables
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

// TestREADMEFlagTables: the flag table of each subcommand in README.md lists every flag the
// subcommand has, and nothing else. A new flag fails here until its row is added.
func TestREADMEFlagTables(t *testing.T) {
	tables := readmeFlagTables(t)
	for cmd, flags := range commandFlags(t) {
		table, ok := tables[cmd]
		if !ok {
			t.Errorf("README.md has no section \"### `slide %s`\"", cmd)
			continue
		}
		for _, f := range flags {
			if !slices.Contains(table, f) {
				t.Errorf("README.md: the flag table of `slide %s` lacks --%s (add a row `| `--%s` | default | meaning |` under \"### `slide %s`\")", cmd, f, f, cmd)
			}
		}
		for _, f := range table {
			if !slices.Contains(flags, f) {
				t.Errorf("README.md: the flag table of `slide %s` lists --%s, which `slide %s` does not have", cmd, f, cmd)
			}
		}
		seen := map[string]bool{}
		for _, f := range table {
			if seen[f] {
				t.Errorf("README.md: the flag table of `slide %s` lists --%s twice", cmd, f)
			}
			seen[f] = true
		}
	}
}
