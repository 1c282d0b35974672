package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/slide-metrics/slide/ingest"
)

// cmdBroker runs the embedded Kafka-protocol broker on its own, until SIGTERM. It is the
// broker `slide serve` embeds, in a process of its own, so that several slide processes can
// share one group (a local rebalance) and a slide process can be killed and restarted
// while the log survives (the crash tests). It keeps the log in memory, or with --data-dir in
// a directory that a broker started on it again reloads: one node, not for production.
func cmdBroker(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("broker", s.out)
	var cfg ingest.BrokerConfig
	var logLevel string
	fs.StringVar(&cfg.Addr, "addr", ingest.DefaultBrokerAddr, "listen address (port 0 picks a free port, printed on stdout)")
	fs.StringVar(&cfg.Advertise, "advertise", "", "host:port clients are told to use (default: the listen address)")
	fs.StringVar(&cfg.Topic, "topic", ingest.DefaultTopic, "topic created at start")
	fs.IntVar(&cfg.Partitions, "partitions", ingest.DefaultBrokerPartitions, "partitions of the topic and of topics created on first use")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "keep the log, topics and committed offsets in this directory (created if needed; one broker at a time), reloaded by a broker started on it again; default in memory, lost at exit")
	fs.BoolVar(&cfg.SyncWrites, "sync-writes", false, "with --data-dir, sync every produced batch to disk before acknowledging it (default: synced as segments roll and at exit, as Kafka's default)")
	fs.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := checkNumbers(fs, nil, "partitions"); err != nil {
		return err
	}
	if cfg.SyncWrites && cfg.DataDir == "" {
		return flagErrorf(fs, "sync-writes", "only with --data-dir: without one the log is in memory")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return flagErrorf(fs, "log-level", "want debug, info, warn or error")
	}
	cfg.Logger = newLogger(s.err, level)
	keepOnHUP(ctx, cfg.Logger, "SIGHUP: the broker reloads nothing; it goes on (SIGTERM stops it)")
	b, err := ingest.StartBroker(ctx, cfg)
	if de := (*ingest.DataDirError)(nil); errors.As(err, &de) {
		// Not the address's fault: a read-only or shared --data-dir was blamed on --addr.
		return envNamed(fs, fmt.Errorf("--data-dir %s: %w", cfg.DataDir, de.Err))
	}
	if err != nil {
		return envNamed(fs, bindErrorHint("addr", cfg.Addr, err, ""))
	}
	defer b.Close()
	// One line on stdout, parsed by scripts and tests: the address to give --brokers.
	where := "in memory"
	if cfg.DataDir != "" {
		where = "log in " + cfg.DataDir
	}
	fmt.Fprintf(s.out, "broker listening on %s (topic %s, %d partitions, %s)\n", b.Addrs()[0], cfg.Topic, cfg.Partitions, where)
	<-ctx.Done()
	return nil
}
