// Command soak runs the real slide binary under sustained load and fails when it breaks a
// promise: `make soak`, not part of `make test`.
//
//	go run ./internal/soak [--bin bin/slide] [--duration 60s]   # SOAK_DURATION sets the default
//
// # What it runs
//
// `slide broker` (the embedded Kafka-protocol broker as its own process) and `slide serve
// --demo=false --brokers <it>` on free ports, with a policy file of its own (a token bucket
// and a sliding counter on the memory backend, and two usage rules that read the windows)
// and --log-level warn. The broker is a separate process, not the one serve embeds, because
// it keeps every record in memory for ever (≈190 B a record, 4.2 GB after a 60 s run):
// embedded, it would add gigabytes to the serve RSS this soak bounds and hide what slide
// itself holds.
//
// Then, concurrently:
//
//   - --window-workers goroutines GET /v1/window (a random tenant, latency_ms, window 5m,
//     q=0.5,0.95,0.99) and --allow-workers goroutines POST /v1/allow (the token bucket, the
//     sliding counter, or the token bucket with both usage rules, for a tenant among the
//     first tenth, so that some requests are denied), back to back on keep-alive
//     connections, from before the first event until the producer is done;
//   - every second: the lag, as the records in the log (the partitions' high watermarks,
//     asked of the broker) that slide_ingest_events_total does not count yet, and
//     slide_ingest_lag summed over partitions; the RSS of serve and of the producer;
//   - `slide produce --keys N`: first rate probes, then the run of --duration.
//
// # The rate
//
// "The highest rate the machine sustains" is found by running flat out: the main run asks
// `slide produce` for --rate 1e9, which no machine delivers, so the producer sends as fast
// as the broker acknowledges (it waits once 100,000 records are unacknowledged) and its
// "sent N events … in T" line, flush included, is the sustained rate. --rate N asks for a
// fixed rate instead; --probe finds one with 2 s runs from 50,000 events/s, doubling while
// the producer delivers ≥ 90 % of the target, and then runs at the best delivered rate
// (probe events count like the others).
//
// # What fails the run (one FAIL line each, exit status 1)
//
//   - any /v1/window or /v1/allow answer that is a transport error, a 5xx, or not what the
//     route promises: /v1/window answers 200 with the series, or 404 only while a key has
//     had no event yet (a 404 after a 200 for the same key is an error); /v1/allow answers
//     200 with "allowed":true or 429 with "allowed":false;
//   - a produce run that exits non-zero (records it could not deliver);
//   - a lost or extra event: after the producer exits and the lag drains to 0 (within 2 min),
//     the events produced (the sum of every produce run's "sent N events") must equal the
//     /v1/window count over key=* of latency_ms plus cost (window 5m, which holds the whole
//     run: --duration is capped at 4m) and slide_ingest_events_total, with
//     slide_ingest_rejected_total and slide_ingest_expired_total both 0;
//   - RSS past the bound, at the peak or at the end. The bound is
//     start + series × 32 KiB + 128 MiB: start is serve's RSS once ready; a series ring
//     grows until its slots are full (30 × 10 s for latency_ms, 60 × 1 m for cost) and a
//     full latency series takes 13 KB (BenchmarkSeriesMemory in BENCHMARKS.md), so 32 KiB
//     holds one with the Go heap's 2× GC headroom; series = keys × 2 metrics; 128 MiB is
//     four partitions' 10 MiB fetch buffers doubled for GC, plus the HTTP and limiter state;
//   - serve not exiting cleanly on SIGTERM, or logging at level ERROR.
//
// It prints its progress every 10 s and ends with a summary block and PASS or FAIL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// Limits and constants of the design above.
const (
	maxDuration     = 4 * time.Minute // the 5m latency_ms window must still hold the first event at the count
	minDuration     = 5 * time.Second
	perSeriesBytes  = 32 << 10  // RSS ceiling of one full series, GC headroom included
	fixedAllowance  = 128 << 20 // fetch buffers, HTTP and limiter state, GC headroom
	metricsPerKey   = 2         // latency_ms and cost
	probeDuration   = 2 * time.Second
	probeStartRate  = 50_000
	maxProbes       = 7 // 50k … 3.2M events/s
	keepUpShare     = 0.9
	flatOut         = 1e9 // events/s asked of a flat-out run: beyond any producer
	warmUp          = 10 * time.Second
	drainTimeout    = 2 * time.Minute
	drainStall      = 10 * time.Second // lag 0 and no new event for this long: the rest is lost
	shutdownTimeout = 30 * time.Second
)

// config is what the flags parse into.
type config struct {
	bin            string
	duration       time.Duration
	keys           int
	windowWorkers  int
	allowWorkers   int
	rate           float64 // events/s of the main run; 0 probes for it
	partitions     int
	maxProducerRSS int64 // bytes; the run aborts past it rather than exhaust the machine
	probe          bool  // find the rate with probes instead of running flat out
}

func (c config) validate() error {
	switch {
	case c.duration < minDuration || c.duration > maxDuration:
		return fmt.Errorf("--duration %s: must be in [%s, %s] (the count check reads the 5m latency_ms window, which must still hold the first event)", c.duration, minDuration, maxDuration)
	case c.keys < 1:
		return fmt.Errorf("--keys %d: must be at least 1", c.keys)
	case c.windowWorkers < 0 || c.allowWorkers < 0:
		return errors.New("--window-workers and --allow-workers must not be negative")
	case c.rate < 0:
		return fmt.Errorf("--rate %v: must not be negative", c.rate)
	case c.partitions < 1:
		return fmt.Errorf("--partitions %d: must be at least 1", c.partitions)
	case c.maxProducerRSS <= 0:
		return errors.New("--max-producer-rss-mib must be positive")
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the flags and runs the soak: 0 PASS, 1 FAIL, 2 bad usage.
func run(ctx context.Context, args []string, out, errw io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(errw)
	var c config
	defDuration := 60 * time.Second
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(errw, "soak: SOAK_DURATION=%q: %v\n", v, err)
			return 2
		}
		defDuration = d
	}
	var maxProducerMiB int64
	fs.StringVar(&c.bin, "bin", "", "slide binary to run (default: build ./cmd/slide into a temporary directory)")
	fs.DurationVar(&c.duration, "duration", defDuration, "length of the main produce run, at most 4m (default from SOAK_DURATION)")
	fs.IntVar(&c.keys, "keys", 1000, "distinct keys the producer sends (tenant-1 … tenant-N); series = 2 × keys")
	fs.IntVar(&c.windowWorkers, "window-workers", 4, "concurrent GET /v1/window clients")
	fs.IntVar(&c.allowWorkers, "allow-workers", 4, "concurrent POST /v1/allow clients")
	fs.Float64Var(&c.rate, "rate", 0, "events/s of the main run (0: flat out, as fast as the broker acknowledges)")
	fs.BoolVar(&c.probe, "probe", false, "with --rate 0, find the rate with 2 s probes doubling from 50,000/s instead of running flat out")
	fs.IntVar(&c.partitions, "partitions", 4, "partitions of the topic")
	fs.Int64Var(&maxProducerMiB, "max-producer-rss-mib", 4096, "abort when the producer's RSS passes this (a guard: its queue is bounded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.maxProducerRSS = maxProducerMiB << 20
	if fs.NArg() > 0 {
		fmt.Fprintf(errw, "soak: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(errw, "soak: %v\n", err)
		return 2
	}
	s := &soak{cfg: c, out: out}
	res, err := s.run(ctx)
	s.close()
	if err != nil {
		fmt.Fprintf(out, "FAIL: %v\n", err)
		if s.serve != nil {
			fmt.Fprintf(out, "serve output (tail):\n%s\n", proctest.Tail(s.serve.Output(), 4000))
		}
		return 1
	}
	fails := res.print(out)
	if len(fails) > 0 {
		if s.serve != nil && res.serveLogTail != "" {
			fmt.Fprintf(out, "serve output (tail):\n%s\n", res.serveLogTail)
		}
		return 1
	}
	return 0
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
