package main

import (
	"flag"
	"log/slog"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/sketch"
)

// serveZero: the numeric serve flags for which 0 means something; serveMustBePositive:
// those for which 0 is as wrong as a negative value (a zero would otherwise fall back to a
// default without a word). A new numeric flag not listed is refused only when negative.
var (
	serveZero           = zeroMeans{"max-conns-per-client": "no cap", "max-series-per-metric": "no cap per metric", "usage-staleness": "no cache", "shutdown-delay": "close at once", "read-max-concurrency": "twice GOMAXPROCS", "promql-max-concurrency": "not given"}
	serveMustBePositive = []string{
		"shutdown-timeout", "slot", "slots", "max-series", "evict-interval", "session-timeout",
		"embedded-kafka-partitions", "export-max-series", "max-body-bytes", "read-header-timeout",
		"demo-rate", "demo-keys", "peer-timeout", "snapshot-chunk-bytes", "max-inflated-bytes", "limiter-max-bytes",
	}
)

// Values of --kafka-isolation, the Kafka consumers' names of isolation.level.
const (
	isolationCommitted   = "read_committed"
	isolationUncommitted = "read_uncommitted"
)

// validate checks the parsed serve flags before anything starts, naming each bad value as
// it was given (--slots 0, SLIDE_RINGS=...). It runs after parsing, apart from register,
// so flags can be added without touching it; checkHTTP and the engine's own config checks
// run as well.
func (c *serveConfig) validate(fs *flag.FlagSet) error {
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := checkNumbers(fs, serveZero, serveMustBePositive...); err != nil {
		return err
	}
	if strings.Contains(c.addr, "://") { // SLIDE_ADDR exported for slide query, say
		return flagErrorf(fs, "addr", "serve listens on host:port such as 127.0.0.1:8080; a URL is slide query's address (its variable is SLIDE_URL)")
	}
	if c.kafkaIsolation != isolationCommitted && c.kafkaIsolation != isolationUncommitted {
		return flagErrorf(fs, "kafka-isolation", "want %s or %s", isolationCommitted, isolationUncommitted)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return flagErrorf(fs, "log-level", "want debug, info, warn or error")
	}
	if _, err := c.storeConfig(); err != nil {
		return asFlagError(fs, err)
	}
	if _, err := query.ParseExportSpecs(c.exportWindows); err != nil {
		return flagErrorf(fs, "export-windows", "%v", err)
	}
	if c.exportExemplars && (!c.exemplars || c.exportHistograms == "") {
		return flagErrorf(fs, "export-exemplars", "exports the exemplars of the --export-histograms histograms, which --exemplars keeps: give both")
	}
	if _, ok := logsFormats[c.events.format]; ok {
		if c.eventMap == "" {
			return asFlagError(fs, errLogsWithoutMap)
		}
		return nil
	}
	if _, err := c.events.newFormat(0); err != nil {
		return asFlagError(fs, err)
	}
	if c.eventMap != "" && c.events.format != formatSlide {
		return flagErrorf(fs, "event-format", "%s: --event-map reads JSON lines of its own shape, not spans", c.events.format)
	}
	return nil
}

// sketchProblem rewords a sketch.ParseKind error for a flag: without the package's own
// "sketch: invalid kind: parsing ..." prefix (the flag and its value are named already),
// with the forms it accepts.
func sketchProblem(err error) error {
	msg := strings.TrimPrefix(err.Error(), sketch.ErrKind.Error()+": ")
	if rest, ok := strings.CutPrefix(msg, "parsing "); ok {
		if q, qerr := strconv.QuotedPrefix(rest); qerr == nil {
			msg = strings.TrimPrefix(rest[len(q):], ": ")
		}
	}
	return &sketchError{msg + "; want ddsketch[:ACCURACY], hdr[:SIGFIGS:LOWEST:HIGHEST] or native[:SCHEMA]", err}
}

type sketchError struct {
	msg string
	err error
}

func (e *sketchError) Error() string { return e.msg }
func (e *sketchError) Unwrap() error { return e.err }
