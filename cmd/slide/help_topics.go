package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// helpTopic is one group of a subcommand's flags in --help and docs/flags.md: a title and
// the flags it holds, by name or by a prefix ending in "*" (kafka-* is every Kafka client
// flag). A flag goes to the first topic that names it.
type helpTopic struct {
	title string
	flags []string
}

// helpTopics groups the flags of the subcommands with many, in the order a reader needs them;
// a subcommand not listed prints its flags in one list. TestEveryFlagHasATopic fails when a
// flag of serve falls to "other", so a new flag is placed where it belongs.
var helpTopics = map[string][]helpTopic{
	"serve": {
		{"start", []string{"addr", "demo", "demo-*", "log-level", "embedded-kafka-*"}},
		{"events in (Kafka and their formats)", []string{"brokers", "topic", "group", "session-timeout", "dead-letter-topic", "key-partitioner",
			"event-*", "span-*", "max-inflated-bytes", "kafka-*"}},
		{"windows", []string{"slot", "slots", "rings", "sketch", "max-series", "max-series-per-metric", "max-memory", "evict-interval", "max-skew", "exemplars"}},
		{"limiter", []string{"policies", "plans", "plans-*", "limiter-*", "usage-staleness", "redis", "redis-*", "rls-*", "grpc-addr"}},
		{"HTTP API", []string{"auth-*", "tls-*", "client-ca", "max-body-bytes", "max-conns-per-client", "read-header-timeout", "read-max-concurrency", "shutdown-timeout", "shutdown-delay", "export-*", "promql-*"}},
		{"several instances", []string{"advertise-addr", "peer-*", "snapshot-*"}},
	},
	"produce": {
		{"what to send", []string{"rate", "keys", "heavy", "duration", "file", "event-map", "timestamps", "metric", "cost-metric", "seed", "trace-ids", "otlp", "otlp-*", "zipkin"}},
		{"where", []string{"brokers", "topic", "connect-timeout", "kafka-*"}},
	},
	"batch": {
		{"the input", []string{"column", "time-column", "id-column", "group-by", "input-format", "delimiter", "skip-bad"}},
		{"the windows", []string{"size", "span", "agg", "best", "sketch"}},
		{"the output", []string{"format", "series"}},
	},
}

// topicOf is the title of the topic of flag name among topics, or "other".
func topicOf(topics []helpTopic, name string) string {
	for _, t := range topics {
		for _, f := range t.flags {
			if f == name || strings.HasSuffix(f, "*") && strings.HasPrefix(name, strings.TrimSuffix(f, "*")) {
				return t.title
			}
		}
	}
	return "other"
}

// printFlagsByTopic prints fs's flags as printFlags does, under a heading per topic of cmd
// (alphabetical within a topic), or in one list when cmd has no topics.
func printFlagsByTopic(w io.Writer, cmd string, fs *flag.FlagSet) {
	topics, ok := helpTopics[cmd]
	if !ok {
		printFlags(w, fs, nil)
		return
	}
	titles := make([]string, 0, len(topics)+1)
	for _, t := range topics {
		titles = append(titles, t.title)
	}
	for _, title := range append(titles, "other") {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if topicOf(topics, f.Name) == title {
				names = append(names, f.Name)
			}
		})
		if len(names) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n %s:\n", title)
		printFlags(w, fs, names)
	}
}
