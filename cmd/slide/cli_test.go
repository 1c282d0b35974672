package main

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/ingest"
)

// subcommands lists every subcommand as its --help is asked for: each of commands(), and
// query's own six.
var subcommands = func() [][]string {
	var out [][]string
	for _, c := range commands() {
		if c.name == "query" {
			for _, q := range []string{"window", "range", "top", "series", "metrics", "quota"} {
				out = append(out, []string{"query", q})
			}
			continue
		}
		out = append(out, []string{c.name})
	}
	return out
}()

// TestHelpOfEverySubcommand: --help (and -h) exits 0 and prints, on stdout, the usage line,
// a description, examples and each flag with its default, for every subcommand.
func TestHelpOfEverySubcommand(t *testing.T) {
	for _, sub := range subcommands {
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runCmd(t, context.Background(), "", append(append([]string{}, sub...), h)...)
			name := strings.Join(sub, " ")
			if code != 0 || errOut != "" {
				t.Errorf("slide %s %s: exit %d, stderr %q; want exit 0 and the help on stdout", name, h, code, errOut)
				continue
			}
			for _, want := range []string{"usage: slide " + name, "\nexamples:\n  slide "} {
				if !strings.Contains(out, want) {
					t.Errorf("slide %s --help lacks %q:\n%s", name, want, out)
				}
			}
			if desc := strings.SplitN(out, "\n\n", 3); len(desc) < 3 || len(desc[1]) < 40 {
				t.Errorf("slide %s --help has no description paragraph:\n%s", name, out)
			}
			if name != "version" && !strings.Contains(out, "\nflags (each can also be set as SLIDE_<FLAG>") {
				t.Errorf("slide %s --help lists no flags:\n%s", name, out)
			}
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"query", "--help"}} {
		if code, out, _ := runCmd(t, context.Background(), "", args...); code != 0 || !strings.Contains(out, "usage: slide") {
			t.Errorf("slide %v: exit %d, stdout %q", args, code, out)
		}
	}
	// produce's defaults read as one statement each, not two that contradict.
	_, out, _ := runCmd(t, context.Background(), "", "produce", "--help")
	for _, bad := range []string{`(default: the embedded broker of slide serve) (default`, "unlimited unless set (default 1000)"} {
		if strings.Contains(out, bad) {
			t.Errorf("produce --help still says %q", bad)
		}
	}
}

// TestUsageErrorsAreOneLine: an unknown flag, a bad value or a stray argument is one line
// naming the flag as given, then the pointer to --help, with exit 2; never the whole usage.
func TestUsageErrorsAreOneLine(t *testing.T) {
	quick := []string{"--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"serve", "--bogus"}, "slide serve: unknown flag --bogus"},
		{nil, []string{"serve", "--addr"}, "slide serve: --addr needs a value"},
		{nil, []string{"serve", "--slots", "many"}, "slide serve: --slots many: want a whole number"},
		{nil, []string{"serve", "--slot", "10"}, `slide serve: --slot 10: "10" is not a duration such as 90s, 5m, 1h or 7d`},
		{nil, []string{"serve", "--demo=maybe"}, "slide serve: --demo maybe: want true or false"},
		{nil, append([]string{"serve", "--slot", "0"}, quick...), "slide serve: --slot 0s: must be positive"},
		{nil, append([]string{"serve", "--slots", "0"}, quick...), "slide serve: --slots 0: must be at least 1"},
		{nil, append([]string{"serve", "--slots", "-1"}, quick...), "slide serve: --slots -1: must be at least 1"},
		{nil, append([]string{"serve", "--max-series", "0"}, quick...), "slide serve: --max-series 0: must be at least 1"},
		{nil, append([]string{"serve", "--max-memory", "1KiB"}, quick...), "slide serve: --max-memory 1KiB: too small for one series (6300 bytes each with 30 slots)"},
		{map[string]string{"SLIDE_MAX_MEMORY": "2 parsecs"}, append([]string{"serve"}, quick...), `slide serve: SLIDE_MAX_MEMORY="2 parsecs": unit "parsecs": want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB`},
		{nil, append([]string{"serve", "--evict-interval", "0s"}, quick...), "slide serve: --evict-interval 0s: must be positive"},
		{nil, append([]string{"serve", "--max-conns-per-client", "-1"}, quick...), "slide serve: --max-conns-per-client -1: must be 0 (no cap) or more"},
		{nil, append([]string{"serve", "--max-series-per-metric", "-1"}, quick...), "slide serve: --max-series-per-metric -1: must be 0 (no cap per metric) or more"},
		// A zero that would quietly become the default is refused (operating.md: "never
		// silently replaced by a default").
		{nil, append([]string{"serve", "--peer-timeout", "0"}, quick...), "slide serve: --peer-timeout 0s: must be positive"},
		{nil, append([]string{"serve", "--snapshot-chunk-bytes", "0"}, quick...), "slide serve: --snapshot-chunk-bytes 0: must be at least 1"},
		{nil, append([]string{"serve", "--max-inflated-bytes", "0"}, quick...), "slide serve: --max-inflated-bytes 0: must be at least 1"},
		{nil, append([]string{"serve", "--limiter-max-bytes", "0"}, quick...), "slide serve: --limiter-max-bytes 0: must be at least 1"},
		{nil, append([]string{"serve", "--usage-staleness", "-1s"}, quick...), "slide serve: --usage-staleness -1s: must be 0 (no cache) or more"},
		{nil, append([]string{"serve", "--sketch", "tdigest"}, quick...),
			`slide serve: --sketch tdigest: unknown sketch family "tdigest"; want ddsketch[:ACCURACY], hdr[:SIGFIGS:LOWEST:HIGHEST] or native[:SCHEMA]`},
		{nil, append([]string{"serve", "--rings", "latency_ms=10s:30:native:40"}, quick...),
			`slide serve: --rings latency_ms=10s:30:native:40: metric latency_ms: "10s:30:native:40": sketch: schema must be an integer in 1..8; want ddsketch[:ACCURACY], hdr[:SIGFIGS:LOWEST:HIGHEST] or native[:SCHEMA]`},
		{nil, append([]string{"serve", "--log-level", "loud"}, quick...), "slide serve: --log-level loud: want debug, info, warn or error"},
		{nil, []string{"serve", "stray"}, "slide serve: unexpected argument stray"},
		{map[string]string{"SLIDE_SLOTS": "abc"}, []string{"serve"}, "slide serve: SLIDE_SLOTS=abc: want a whole number"},
		{map[string]string{"SLIDE_SLOTS": "0"}, append([]string{"serve"}, quick...), "slide serve: SLIDE_SLOTS=0: must be at least 1"},
		{map[string]string{"SLIDE_RINGS": "cost=1m"}, append([]string{"serve"}, quick...), "slide serve: SLIDE_RINGS=cost=1m: metric cost"},
		{map[string]string{"SLIDE_RINGS": "cost=1m"}, append([]string{"serve", "--rings", "cost=2m"}, quick...), "slide serve: --rings cost=2m: metric cost"},
		{nil, []string{"produce", "--heavy", "-1"}, "slide produce: --heavy -1: must be 0 (none) or more"},
		{nil, []string{"produce", "--connect-timeout", "0s"}, "slide produce: --connect-timeout 0s: must be positive"},
		{nil, []string{"broker", "--partitions", "0"}, "slide broker: --partitions 0: must be at least 1"},
		{nil, []string{"broker", "--sync-writes"}, "slide broker: --sync-writes true: only with --data-dir"},
		{nil, []string{"query", "top", "--k", "0"}, "slide query top: --k 0: must be at least 1"},
		{nil, []string{"query", "frobnicate"}, "slide query: unknown command frobnicate; want window"},
		{nil, []string{"query", "windw"}, "slide query: unknown command windw (did you mean window?); want window"},
		// Flags before the command, as kubectl and docker take them: say where they go.
		{nil, []string{"query", "--addr", "http://x", "window"}, "slide query: --addr before the command: flags go after it, e.g. slide query window --addr URL; want window"},
		{nil, []string{"batch", "--size", "-3", "-"}, "slide batch: --size -3: must be 0 (no count window) or more"},
		{map[string]string{"SLIDE_SIZE": "5"}, []string{"batch", "-", "--size", "-3"}, "slide batch: --size -3: must be 0 (no count window) or more"},
		{map[string]string{"SLIDE_SIZE": "-5"}, []string{"batch", "-"}, "slide batch: SLIDE_SIZE=-5: must be 0 (no count window) or more"},
		{nil, []string{"version", "--bogus"}, "slide version: unknown flag --bogus"},
		// Near misses say what was meant: another tool's name, a slip of a letter or two.
		{nil, []string{"serve", "--port", "8081"}, "slide serve: unknown flag --port (did you mean --addr?)"},
		{nil, []string{"serve", "--polices", "p.yaml"}, "slide serve: unknown flag --polices (did you mean --policies?)"},
		{nil, []string{"serve", "--max-sereis", "9"}, "slide serve: unknown flag --max-sereis (did you mean --max-series?)"},
		{nil, []string{"serve", "--partitioner", "murmur2"}, "slide serve: unknown flag --partitioner (did you mean --key-partitioner?)"},
		{nil, []string{"query", "window", "--url", "http://x"}, "slide query window: unknown flag --url (did you mean --addr?)"},
		{nil, []string{"batch", "--value", "amount", "-"}, "slide batch: unknown flag --value (did you mean --column?)"},
		// Byte sizes take units everywhere; the refusal names the flag or the variable.
		{nil, append([]string{"serve", "--max-body-bytes", "64 furlongs"}, quick...), `slide serve: --max-body-bytes "64 furlongs": unit "furlongs"`},
		{map[string]string{"SLIDE_MAX_INFLATED_BYTES": "lots"}, append([]string{"serve"}, quick...), "slide serve: SLIDE_MAX_INFLATED_BYTES=lots: want a size such as 2GiB"},
		// serve's SLIDE_ADDR is a listen address; a URL there is named, with query's variable.
		{map[string]string{"SLIDE_ADDR": "http://127.0.0.1:8080"}, []string{"serve", "--embedded-kafka-addr", "127.0.0.1:0"},
			"slide serve: SLIDE_ADDR=http://127.0.0.1:8080: serve listens on host:port such as 127.0.0.1:8080; a URL is slide query's address (its variable is SLIDE_URL)"},
		{map[string]string{"SLIDE_URL": "ftp://x"}, []string{"query", "metrics"}, "slide query metrics: SLIDE_URL=ftp://x"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v) // restored (unset) when the subtest ends
			}
			code, out, errOut := runCmd(t, context.Background(), "", c.args...)
			cmd := strings.TrimPrefix(strings.SplitN(c.want, ":", 2)[0], "slide ")
			wantTail := "\nrun 'slide " + cmd + " --help' for usage\n"
			if code != 2 || !strings.HasPrefix(errOut, c.want) || !strings.HasSuffix(errOut, wantTail) || strings.Count(errOut, "\n") != 2 || out != "" {
				t.Errorf("%v %v: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and two lines: %q…, then %q", c.env, c.args, code, out, errOut, c.want, strings.TrimSpace(wantTail))
			}
		})
	}
}

// TestRuntimeErrorsNameTheVariable: a flag's value that fails once serve starts (a policy
// file that is not there) is named as it was given: SLIDE_POLICIES=... from the
// environment, --policies ... from the command line.
func TestRuntimeErrorsNameTheVariable(t *testing.T) {
	quick := []string{"serve", "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0"}
	t.Setenv("SLIDE_POLICIES", "/nonexistent/p.yaml")
	code, _, errOut := runCmd(t, context.Background(), "", quick...)
	if code != 1 || !strings.HasPrefix(errOut, "slide serve: SLIDE_POLICIES=/nonexistent/p.yaml: ") {
		t.Errorf("SLIDE_POLICIES: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCmd(t, context.Background(), "", append(quick, "--policies", "/nonexistent/q.yaml")...)
	if code != 1 || !strings.HasPrefix(errOut, "slide serve: --policies: ") || !strings.Contains(errOut, "q.yaml") {
		t.Errorf("--policies over SLIDE_POLICIES: exit %d, stderr:\n%s", code, errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("SLIDE_POLICIES", "")
	t.Setenv("SLIDE_ADDR", ln.Addr().String())
	code, _, errOut = runCmd(t, context.Background(), "", "serve", "--embedded-kafka-addr", "127.0.0.1:0")
	if want := "slide serve: SLIDE_ADDR=" + ln.Addr().String() + ": address already in use"; code != 1 || !strings.Contains(errOut, "\n"+want) {
		t.Errorf("taken SLIDE_ADDR: exit %d, stderr:\n%s\nwant %q…", code, errOut, want)
	}
}

// TestBindErrorNamesFlagAndVariable: a taken port names the flag and the SLIDE_* variable
// that move it, for the HTTP API and the embedded broker alike.
func TestBindErrorNamesFlagAndVariable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, c := range []struct {
		args       []string
		flag, env  string
		subcommand string
	}{
		{[]string{"serve", "--addr", taken, "--embedded-kafka-addr", "127.0.0.1:0"}, "--addr", "SLIDE_ADDR", "serve"},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--embedded-kafka-addr", taken}, "--embedded-kafka-addr", "SLIDE_EMBEDDED_KAFKA_ADDR", "serve"},
		{[]string{"broker", "--addr", taken}, "--addr", "SLIDE_ADDR", "broker"},
	} {
		code, _, errOut := runCmd(t, context.Background(), "", c.args...)
		want := "slide " + c.subcommand + ": " + c.flag + " " + taken + ": address already in use"
		if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "with "+c.flag+" or "+c.env) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %q naming %s and %s", c.args, code, errOut, want, c.flag, c.env)
		}
	}
}

// Every numeric serve flag either refuses 0, or says in its help what 0 means: operating.md
// promises that 0 is "never silently replaced by a default". A new flag fails here until it
// is listed in serveMustBePositive or its help says "0: ...".
func TestServeZeroIsRefusedOrExplained(t *testing.T) {
	fs := flag.NewFlagSet("slide serve", flag.ContinueOnError)
	var c serveConfig
	c.register(fs)
	refused := map[string]bool{}
	for _, name := range serveMustBePositive {
		refused[name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		switch g.Get().(type) {
		case int, int64, float64, time.Duration:
		default:
			return
		}
		said := serveZero[f.Name] != "" || strings.Contains(f.Usage, "(0:") || strings.Contains(f.Usage, "(0 ") || strings.Contains(f.Usage, "0 for ")
		if !refused[f.Name] && !said {
			t.Errorf("--%s 0 is taken without a word of what it means (%q): refuse it (serveMustBePositive) or say it in the help", f.Name, f.Usage)
		}
	})
	// --usage-staleness 0 is its help's "no cache", which the cluster spells negative (its
	// zero value is the default).
	if got := (&serveConfig{usageStaleness: 0}).clusterStaleness(); got >= 0 {
		t.Errorf("--usage-staleness 0 reaches the cluster as %v, its default; want a negative staleness (no cache)", got)
	}
	if got := (&serveConfig{usageStaleness: 3 * time.Second}).clusterStaleness(); got != 3*time.Second {
		t.Errorf("--usage-staleness 3s reaches the cluster as %v", got)
	}
}

// TestHelpNamesACommand: slide help CMD is CMD's help, as go help and git help are, not the
// command list with CMD ignored; slide help of a command slide lacks is the unknown command.
func TestHelpNamesACommand(t *testing.T) {
	for _, sub := range [][]string{{"serve"}, {"batch"}, {"query", "window"}, {"query"}} {
		code, out, errOut := runCmd(t, context.Background(), "", append([]string{"help"}, sub...)...)
		_, want, _ := runCmd(t, context.Background(), "", append(append([]string{}, sub...), "--help")...)
		if name := strings.Join(sub, " "); code != 0 || errOut != "" || out != want {
			t.Errorf("slide help %s: exit %d, stderr %q, stdout:\n%s\nwant slide %s --help's:\n%s", name, code, errOut, out, name, want)
		}
	}
	if code, out, errOut := runCmd(t, context.Background(), "", "help", "serv"); code != 2 || out != "" || !strings.HasPrefix(errOut, `slide: unknown command "serv"`) {
		t.Errorf("slide help serv: exit %d, stdout %q, stderr %q; want the unknown command, exit 2", code, out, errOut)
	}
}

// TestUnknownCommandSaysWhatWasMeant: a slip of a letter in the command (slide serv, slide
// querry) names the command meant, as an unknown flag does; a word far from every command
// gets the list alone.
func TestUnknownCommandSaysWhatWasMeant(t *testing.T) {
	for arg, want := range map[string]string{
		"serv":   `slide: unknown command "serv" (did you mean serve?)` + "\n",
		"querry": `slide: unknown command "querry" (did you mean query?)` + "\n",
		"frob":   `slide: unknown command "frob"` + "\n",
	} {
		code, out, errOut := runCmd(t, context.Background(), "", arg)
		if first, _, _ := strings.Cut(errOut, "\n"); code != 2 || out != "" || first+"\n" != want || !strings.Contains(errOut, "commands:") {
			t.Errorf("slide %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2, %q and the commands", arg, code, out, errOut, want)
		}
	}
}

// A --data-dir that cannot be written, or that another broker holds, is named as
// --data-dir; it was blamed on --addr, with one line per file the broker tried to write.
func TestBrokerDataDirErrorNamesDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held := t.TempDir()
	b, err := ingest.StartBroker(context.Background(), ingest.BrokerConfig{Addr: "127.0.0.1:0", DataDir: held})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(file, "d"), "slide broker: --data-dir " + filepath.Join(file, "d") + ": mkdir "},
		{held, "slide broker: --data-dir " + held + ": in use by another broker (pid "},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a broker that starts runs until then
		code, _, errOut := runCmd(t, ctx, "", "broker", "--addr", "127.0.0.1:0", "--data-dir", c.dir)
		cancel()
		if code != 1 || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("--data-dir %s: exit %d, stderr:\n%s\nwant exit 1 and one line: %q…", c.dir, code, errOut, c.want)
		}
	}
}
