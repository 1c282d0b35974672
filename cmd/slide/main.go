// Command slide is the streaming sliding-window metrics engine and rate limiter.
//
//	slide serve    run ingest, windows, limiter and the HTTP API
//	slide batch    sliding-window jobs over CSV / NDJSON / Parquet files
//	slide backtest replay a request log through rate-limit policies
//	slide query    ask a running server: window, range, top, series, metrics
//	slide produce  send demo load or an NDJSON file of events to Kafka
//	slide broker   run the embedded Kafka-protocol broker on its own
//	slide version  print the version
//
// Every flag can also be set from the environment as SLIDE_<FLAG>, upper case with
// dashes as underscores (--max-series → SLIDE_MAX_SERIES); a flag on the command
// line wins over the environment.
//
// `slide CMD --help` prints a description, examples and the flags (help.go) and exits 0.
// A command-line mistake is one line that names the flag or variable as it was given
// (--slots 0, SLIDE_SLOTS=abc) and a pointer to --help, exit 2; numeric flags are checked
// after parsing (validate.go, checkNumbers), 0 like negative values unless 0 has a stated
// meaning. Other failures exit 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// stdio bundles the streams a subcommand may use, so tests can run them in process.
// newLogger is the log of serve and broker: slog's text format, whose values holding a
// character strconv.IsPrint refuses (a control, a bidi override) or invalid UTF-8 are
// written Go-quoted, so a hostile key in a log line is seen as its escapes
// (TestLogsEscapeOddKeys). Not the JSON format: encoding/json leaves C1 controls and bidi
// overrides raw.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, s stdio) error
}

func commands() []command {
	return []command{
		{"serve", "run ingest, windows, limiter and the HTTP API", cmdServe},
		{"batch", "sliding-window aggregates over a CSV, NDJSON or Parquet file", cmdBatch},
		{"backtest", "replay a recorded request log through rate-limit policies", cmdBacktest},
		{"query", "ask a running slide serve: window, range, top, series, metrics, quota", cmdQuery},
		{"produce", "send demo load or an NDJSON file of events to Kafka", cmdProduce},
		{"broker", "run the embedded Kafka-protocol broker on its own (in memory; tests, demos)", cmdBroker},
		{"version", "print the version", cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr})
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and maps its error to an exit code: 0 success (and
// --help), 2 a usage error (printed in one line with a pointer to --help), 1 anything else.
func run(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 {
		printUsage(s.err)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help" {
		if args[0] == "help" && len(args) > 1 {
			// slide help serve is serve's help, as go help build and git help commit are.
			return run(ctx, append(slices.Clone(args[1:]), "--help"), s)
		}
		printUsage(s.out)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], s)
		var ue *usageError
		switch {
		case err == nil, errors.Is(err, errHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(s.err, "slide %s: %s\nrun 'slide %s --help' for usage\n", ue.cmd, ue.msg, ue.cmd)
			return 2
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(s.err, "slide %s: %v\n", c.name, err)
			return 1
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(s.err, "slide: unknown command %q%s\n\n", args[0], meantCommand(args[0], names...))
	printUsage(s.err)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: slide <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'slide <command> --help' (or slide help <command>) for its description, examples and flags. Every flag can also be set as SLIDE_<FLAG>.")
}

func cmdVersion(_ context.Context, args []string, s stdio) error {
	fs := newFlagSet("version", s.out)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	_, err := fmt.Fprintf(s.out, "slide %s\n", version)
	return err
}
