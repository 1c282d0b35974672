package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// helpText is what `slide CMD --help` prints above the flags.
type helpText struct {
	synopsis    string // after "usage: "
	description string // one paragraph
	examples    []string
}

// helpTexts holds the help of every subcommand, keyed by its name as newFlagSet gets it.
var helpTexts = map[string]helpText{
	"serve": {
		synopsis: "slide serve [flags]",
		description: `Runs ingest, windows, the limiter and the HTTP API until SIGTERM. It reads events from Kafka
(an embedded broker unless --brokers names a cluster) into per-key rings of slots, answers
window queries on /v1/window, /v1/top, /v1/series and /v1/metrics and PromQL on /api/v1/ (a
Prometheus data source), makes admission decisions on POST /v1/allow with the policies of
--policies, and exports Prometheus metrics on /metrics.
On SIGTERM it drains HTTP, commits offsets, leaves the consumer group and closes.`,
		examples: []string{
			"slide serve --demo                                  # embedded broker, demo traffic and policies",
			"slide serve --addr 127.0.0.1:8081 --embedded-kafka-addr 127.0.0.1:19092",
			"slide serve --brokers kafka-1:9092 --policies policies.yaml --redis redis:6379",
			"SLIDE_ADDR=:8081 slide serve                         # every flag also as SLIDE_<FLAG>",
			"slide serve --brokers kafka-1:9092 --topic envoy-access --event-map envoy   # Envoy Gateway's access log",
		},
	},
	"batch": {
		synopsis: "slide batch [flags] FILE|-",
		description: `Streams a CSV (with a header row), NDJSON or Parquet file once (gzip or zstd compressed ones
too, found by their magic bytes), in memory O(window), and prints the best sliding window, e.g.
{"agg":"sum","size":1000,"n":100000,"best":500500,"start":0,"end":999,"start_line":2,"end_line":1001}.
start/end are the 0-based inclusive data-row indices of the best window (the first one on
ties), start_line/end_line their file lines; time windows add span_ms, start_ts/end_ts (unix
ms) and start_time/end_time (RFC 3339). Count window of K rows: --size K. Time window
(ts − span, ts] ending at every row: --span 60s (rows sorted by --time-column). --agg
sum,max,p95 computes several aggregates in one pass; --group-by COLUMN the best window of every
group. With --series - the windows go to stdout and the results to stderr.`,
		examples: []string{
			"slide batch --size 1000 --column amount --id-column order_id testdata/orders_regions.csv",
			"slide batch --size 1000 --column amount --group-by region --format table testdata/orders_regions.parquet",
			"gzip -c testdata/orders_regions.csv | slide batch --span 5m --agg count,p95 --column amount -",
			"slide batch --size 3 --agg max --series - testdata/article_latency.csv",
		},
	},
	"backtest": {
		synopsis: "slide backtest --policies FILE [flags] REQUESTS|-",
		description: `Replays a recorded request log (NDJSON, or CSV with a header: ts, key, optional cost and
policy; ts in unix ms or RFC 3339, sorted by time) through the limiter algorithms of slide
serve, with each request's time as now, and prints per policy the allowed and denied counts,
the most denied keys and the denial timeline. A request without a policy is decided by every
policy and rule of the file, each on its own. Metric events in the log (lines with metric and
value, as POST /v1/events takes them) feed the windows that usage rules read, in rings given
as to slide serve (--slot, --slots, --rings).`,
		examples: []string{
			"slide backtest --policies policies.yaml requests.csv",
			"slide backtest --policies policies.yaml --format json --bucket 10s requests.ndjson",
			"slide backtest --policies policies.yaml --event-map nginx access.log   # each line a request",
		},
	},
	"produce": {
		synopsis: "slide produce [flags]",
		description: `Sends events to Kafka: generated load (lognormal latencies and costs for tenant-1…N, a few keys
heavy and slow) for --duration, or with --file an NDJSON file replayed record by record.
Records are keyed by event key, so a series lives in one partition. It waits when 100,000
records are unacknowledged, so a --rate beyond what the broker takes runs flat out in
bounded memory, and prints what it sent.`,
		examples: []string{
			"slide produce --rate 50000 --keys 1000 --duration 10s",
			"slide produce --file events.ndjson --timestamps event   # replay history at its own times",
			"slide produce --brokers 127.0.0.1:19092 --duration 0      # until interrupted",
		},
	},
	"broker": {
		synopsis: "slide broker [flags]",
		description: `Runs the embedded Kafka-protocol broker (franz-go's kfake) as a process of its own, for several
slide serve in one consumer group on one machine, or for killing and restarting slide while
the log survives. It keeps the log in memory: for tests and demos, not production. It prints
"broker listening on HOST:PORT" on stdout once it accepts connections.`,
		examples: []string{
			"slide broker --addr 127.0.0.1:19092 --partitions 4",
			"slide serve --brokers 127.0.0.1:19092 --addr :8081 &",
		},
	},
	"version": {
		synopsis:    "slide version",
		description: "Prints the version: the git description `make build` stamps, or dev.",
		examples:    []string{"slide version"},
	},
	"query window": {
		synopsis: "slide query window --metric M --key K [flags]",
		description: `Prints one series' aggregate over a window: count, sum, avg, min, max, rate per second and
quantiles. A --key holding '*' merges every matching series and says how many. --window
defaults to the metric's retention; --json prints the API's answer as it came.`,
		examples: []string{
			"slide query window --metric latency_ms --key tenant-1 --window 5m",
			"slide query window --metric latency_ms --key 'tenant-*' --window 1m --q p50,p99.9",
		},
	},
	"query range": {
		synopsis: "slide query range --metric M --key K [flags]",
		description: `Prints a series' history from its ring: the window of --window ending at the current slot and
at every --step before it, as far back as the retention holds, one row a point, with a
sparkline and bars of the --plot column. Both default to one slot: every slot of the
retention. A --key holding '*' merges every matching series.`,
		examples: []string{
			"slide query range --metric latency_ms --key tenant-1",
			"slide query range --metric latency_ms --key 'tenant-*' --window 1m --step 30s --plot p99",
		},
	},
	"query top": {
		synopsis: "slide query top --metric M [flags]",
		description: `Prints the --k series of a metric with the largest --by (count, sum, avg, min, max, rate or a
percentile such as p95) over a window, one row each. --key narrows the series to a glob.`,
		examples: []string{
			"slide query top --metric latency_ms --by p95 --k 5",
			"slide query top --metric cost --by sum --window 1h --key 'tenant-1*'",
		},
	},
	"query series": {
		synopsis: "slide query series [flags]",
		description: `Lists series (metric and key), sorted, a page at a time; the last line gives the cursor of the
next page, and --all follows every page.`,
		examples: []string{
			"slide query series --metric latency_ms --prefix tenant-1 --limit 3",
			"slide query series --all",
		},
	},
	"query metrics": {
		synopsis:    "slide query metrics [flags]",
		description: `Lists every metric with live series: how many, and its ring (slot width, slots, retention).`,
		examples:    []string{"slide query metrics", "slide query metrics --addr http://10.0.0.5:8080 --json"},
	},
	"query quota": {
		synopsis: "slide query quota --policy P --key K [flags]",
		description: `How much of a key's quota under a policy or usage rule is left (GET /v1/quota): its plan,
limit, used, remaining and when it is whole again, and a row per level for a policy with
levels. A peek: nothing is charged.`,
		examples: []string{
			"slide query quota --policy tenant-quota --key tenant-1",
			"slide query quota --policy login --key alice --json",
		},
	},
}

// printHelp writes the help of subcommand name: synopsis, description, examples, then
// every flag with its default.
func printHelp(w io.Writer, name string, fs *flag.FlagSet) {
	h, ok := helpTexts[name]
	if !ok {
		h.synopsis = "slide " + name + " [flags]"
	}
	fmt.Fprintf(w, "usage: %s\n", h.synopsis)
	if h.description != "" {
		fmt.Fprintf(w, "\n%s\n", h.description)
	}
	if len(h.examples) > 0 {
		fmt.Fprint(w, "\nexamples:\n")
		for _, e := range h.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	// The example names a flag of this page: --max-series where there is one, else the first
	// with a dash, which shows the dash becoming an underscore.
	eg := fs.Lookup("max-series")
	fs.VisitAll(func(f *flag.Flag) {
		if eg == nil || !strings.Contains(eg.Name, "-") && strings.Contains(f.Name, "-") {
			eg = f
		}
	})
	if eg == nil {
		return
	}
	fmt.Fprintf(w, "\nflags (each can also be set as SLIDE_<FLAG>, e.g. --%s as %s):\n", eg.Name, envNameOf(fs, eg.Name))
	printFlagsByTopic(w, name, fs)
}

// printFlags is flag.PrintDefaults with --name spelling, for the flags in names (every flag
// when names is nil). A usage that states its default itself ("(default: ...)") does not get
// the flag package's "(default ...)" as well.
func printFlags(w io.Writer, fs *flag.FlagSet, names []string) {
	fs.VisitAll(func(f *flag.Flag) {
		if names != nil && !slices.Contains(names, f.Name) {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		if _, ok := f.Value.(windowFlag); ok && typ == "value" {
			typ = "duration" // as the flag package names a DurationVar
		}
		if _, ok := f.Value.(bytesFlag); ok && typ == "value" {
			typ = "size"
		}
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if def := f.DefValue; !isZeroDefault(f) && !strings.Contains(usage, "(default") {
			if typ == "string" {
				def = fmt.Sprintf("%q", def)
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}
