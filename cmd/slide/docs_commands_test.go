package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/internal/proctest"
)

// docCommand is a slide command line found in a page: where, and its words.
type docCommand struct {
	where string
	words []string
	// mistake: the page shows it refused as a mistake (its answer says "unknown flag"), to
	// show the message; its flags are not held to the flag set.
	mistake bool
}

// shellWords splits a command line as a shell would for our purpose: words separated by
// blanks, quotes kept together (and removed), a # outside quotes starting a comment.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '#' && !in:
			return words
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// docCommands returns every invocation of slide in the shell blocks of page: the lines of a
// ```sh block, and the "$ " lines of any block; a line ending in \ continues on the next.
// An invocation starts at a word "slide" or ".../slide" in command position (first, or after
// |, &&, ;, env assignments, or a for loop's do).
func docCommands(t *testing.T, page string) []docCommand {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	inBlock, shBlock := false, false
	pending, start := "", 0
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			shBlock = inBlock && (line == "```sh" || line == "```bash" || line == "```shell")
			continue
		}
		if !inBlock {
			continue
		}
		cmd, ok := strings.CutPrefix(line, "$ ")
		if !ok && !shBlock && pending == "" {
			continue
		}
		if !ok {
			cmd = line
		}
		if pending == "" {
			start = i + 1
		}
		if strings.HasSuffix(cmd, `\`) {
			pending += strings.TrimSuffix(cmd, `\`) + " "
			continue
		}
		cmd, pending = pending+cmd, ""
		words := shellWords(cmd)
		command := true
		for j, w := range words {
			switch {
			case w == "|" || w == "&&" || w == ";" || w == "do" || w == "then" || w == "&":
				command = true
				continue
			case command && strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
				continue // an environment assignment
			case command && (w == "slide" || strings.HasSuffix(w, "/slide")):
				end := j + 1
				for end < len(words) && !slices.Contains([]string{"|", "&&", ";", "&"}, words[end]) {
					end++
				}
				mistake := i+1 < len(lines) && strings.Contains(lines[i+1], ": unknown flag --")
				out = append(out, docCommand{where: page + ":" + strconv.Itoa(start), words: words[j:end], mistake: mistake})
			}
			command = false
		}
	}
	return out
}

// TestDocsCommandsExist: every slide command in README.md and docs/*.md, and every example of
// --help, names a subcommand slide has and flags that subcommand takes, and the pages call the
// binary as it is after make build (./bin/slide), so each pastes as written. TestREADMETour
// runs the tour's commands; this holds the rest to the flag sets.
func TestDocsCommandsExist(t *testing.T) {
	flags := commandFlags(t)
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md")
	var cmds []docCommand
	for _, p := range pages {
		cmds = append(cmds, docCommands(t, p)...)
	}
	for name, h := range helpTexts {
		for _, e := range h.examples {
			for _, c := range docCommands(t, writeTemp(t, "```sh\n"+e+"\n```\n")) {
				c.where = "slide " + name + " --help"
				cmds = append(cmds, c)
			}
		}
	}
	if len(cmds) < 30 {
		t.Fatalf("found %d slide commands in the pages; the reader no longer matches them", len(cmds))
	}
	for _, c := range cmds {
		bin, args := c.words[0], c.words[1:]
		if !strings.HasPrefix(c.where, "slide ") && bin != "./bin/slide" {
			t.Errorf("%s: %q: call ./bin/slide, as make build leaves it (a bare slide is not on PATH)", c.where, strings.Join(c.words, " "))
		}
		if len(args) == 0 {
			continue
		}
		sub := args[0]
		if sub == "query" && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			sub = "query"
		}
		known, ok := flags[sub]
		if !ok {
			t.Errorf("%s: slide %s: no such command", c.where, sub)
			continue
		}
		for _, a := range args[1:] {
			if c.mistake {
				break
			}
			name, ok := strings.CutPrefix(a, "--")
			if !ok || name == "" || name == "help" {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			if !slices.Contains(known, name) {
				t.Errorf("%s: slide %s has no flag --%s", c.where, sub, name)
			}
		}
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "example.md")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// docRun is a "$ " command of a page and the answer the page shows under it.
type docRun struct {
	where, cmd, want string
}

// docRuns returns the "$ " commands of page's blocks with the lines under each up to the next.
func docRuns(t *testing.T, page string) []docRun {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []docRun
	inBlock, cur := false, -1 // cur: the run whose answer the block's lines are
	for i, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock, cur = !inBlock, -1
			continue
		}
		if !inBlock {
			continue
		}
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, docRun{where: page + ":" + strconv.Itoa(i+1), cmd: cmd})
			cur = len(out) - 1
			continue
		}
		if cur >= 0 {
			out[cur].want += line + "\n"
		}
	}
	for i := range out {
		out[i].want = strings.TrimRight(out[i].want, "\n")
	}
	return out
}

// TestDocsCommandsRun runs, from the root of the clone as a reader would, every "$ " command of
// docs/*.md that needs no server: the batch jobs and backtests over testdata/, and the
// command-line mistakes the pages show (an answer "slide CMD: ..."). Each answer (stdout and
// stderr) must have the shape of the page's, as TestREADMETour holds the tour's; the commands
// that need a running server or broker are held to the flag sets by TestDocsCommandsExist.
func TestDocsCommandsRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the docs' commands run in bash, which is not installed")
	}
	dir := t.TempDir()
	bin, err := proctest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob("../../docs/*.md")
	ran := 0
	for _, p := range pages {
		for _, r := range docRuns(t, p) {
			words := shellWords(r.cmd)
			at := slices.Index(words, "./bin/slide")
			if at < 0 || at+1 >= len(words) {
				continue
			}
			sub := words[at+1]
			if sub != "batch" && sub != "backtest" && !strings.HasPrefix(r.want, "slide "+sub+": ") {
				continue // needs a server, a broker or files of yours
			}
			c := exec.Command("bash", "-c", strings.ReplaceAll(r.cmd, "./bin/slide", bin)+" 2>&1")
			c.Dir = "../.."
			c.Env = append(os.Environ(), "SLIDE_ADDR=", "SLIDE_URL=")
			got, _ := c.Output() // a mistake exits 2, as the page says; the answer is what is held
			ran++
			if g, w := answerShape(strings.TrimRight(string(got), "\n")), answerShape(r.want); g != w {
				t.Errorf("%s: $ %s\nanswered:\n%s\nwhose shape\n  %s\ndiffers from the page's\n%s\n  %s", r.where, r.cmd, got, g, r.want, w)
			}
		}
	}
	if ran < 8 {
		t.Fatalf("ran %d commands of the docs; the reader no longer finds them", ran)
	}
}

// TestREADMEIsShort: the README stays a five-minute read (#31: at most 250 lines); what a user
// needs beyond the tour goes to docs/ under their page.
func TestREADMEIsShort(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 250 {
		t.Errorf("README.md has %d lines; keep it at most 250 and move the rest to docs/", n)
	}
}
