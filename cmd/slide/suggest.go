package main

import (
	"flag"
	"strings"

	"github.com/slide-metrics/slide/internal/suggest"
)

// flagAliases are the names other tools give a flag of ours, by what we call it: a user who
// types --port means --addr. They are suggested only where the flag set has the target.
var flagAliases = map[string]string{
	"port": "addr", "listen": "addr", "bind": "addr", "host": "addr", "http-addr": "addr",
	"listen-address": "addr", "web.listen-address": "addr", "url": "addr",
	"broker": "brokers", "bootstrap-servers": "brokers", "bootstrap-server": "brokers", "kafka": "brokers",
	"policy": "policies", "policy-file": "policies", "config": "policies",
	"group-id": "group", "consumer-group": "group",
	"token": "auth-token-file", "auth-token": "auth-token-file",
	"value": "column", "field": "column", "value-column": "column", "window": "size",
	"partitioner": "key-partitioner", "partitioner.class": "key-partitioner", // librdkafka's and the Java client's names
}

// didYouMean returns " (did you mean --X?)" for an unknown flag name that is another tool's
// name for one of fs's flags, or within a small edit distance of one (--polices, --slot), or
// "" when nothing is close: a guess that is far off helps less than the --help pointer.
func didYouMean(fs *flag.FlagSet, name string) string {
	name = strings.TrimLeft(name, "-")
	if to, ok := flagAliases[strings.ToLower(name)]; ok && fs.Lookup(to) != nil {
		return " (did you mean --" + to + "?)"
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if ordered, near := suggest.Closest(name, names); near > 0 {
		return " (did you mean --" + ordered[0] + "?)"
	}
	return ""
}

// meantCommand returns " (did you mean X?)" for an unknown command near one of names, or ""
// when nothing is close.
func meantCommand(name string, names ...string) string {
	if ordered, near := suggest.Closest(name, names); near > 0 {
		return " (did you mean " + ordered[0] + "?)"
	}
	return ""
}
