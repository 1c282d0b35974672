package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/window"
)

// produceConfig is what the produce flags parse into.
type produceConfig struct {
	brokers, topic, file string
	rate                 float64
	rateSet              bool
	keys, heavy          int
	duration             time.Duration
	metric, costMetric   string
	seed                 uint64
	traceIDs             bool // --trace-ids: the latency events carry random trace and span ids
	connectTimeout       time.Duration
	brokerList           []string
	timestamps           string
	otlp                 bool       // --otlp: OpenTelemetry spans (produce_otlp.go)
	zipkin               bool       // --zipkin: the same spans as Zipkin's JSON
	eventMap             string     // --event-map: how --file's lines are keyed
	kafka                kafkaFlags // TLS and SASL (connect.go)
}

// cmdProduce is `slide produce`: a load generator (lognormal latencies and costs for keys
// tenant-1…N, a few heavy and slow) or, with --file, a replayer of NDJSON events. Records
// are keyed by event key, so each series stays in one partition. It prints what it sent.
func cmdProduce(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("produce", s.out)
	var c produceConfig
	fs.StringVar(&c.brokers, "brokers", ingest.DefaultBrokerAddr, "Kafka bootstrap brokers, comma-separated; the default is where slide serve's embedded broker listens")
	fs.StringVar(&c.topic, "topic", ingest.DefaultTopic, "topic to write to")
	fs.Float64Var(&c.rate, "rate", ingest.DefaultDemoRate, "events per second (default 1000); with --file the replay pace, and a replay without --rate is not paced")
	fs.IntVar(&c.keys, "keys", ingest.DefaultDemoKeys, "distinct keys, tenant-1 … tenant-N")
	fs.IntVar(&c.heavy, "heavy", ingest.DefaultDemoHeavy, "heavy, slow keys among them; half the requests are theirs (0 for none)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to generate; 0 runs until interrupted")
	fs.StringVar(&c.file, "file", "", "NDJSON file to replay, one record per line, instead of generating ('-' reads stdin)")
	fs.StringVar(&c.metric, "metric", ingest.DefaultDemoMetric, "name of the latency metric")
	fs.StringVar(&c.costMetric, "cost-metric", ingest.DefaultDemoCostMetric, "name of the cost metric")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed: the same seed sends the same events")
	fs.BoolVar(&c.traceIDs, "trace-ids", false, "give each latency event a random trace_id and span_id, for slide serve --exemplars (about 80 bytes more a latency event; the seed's events are otherwise the same)")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the brokers before giving up")
	fs.StringVar(&c.timestamps, "timestamps", "now", "record timestamps with --file: now (the time of sending) or event (each event's ts, for replaying history)")
	fs.StringVar(&c.eventMap, "event-map", "", "with --file: read its lines through an event map (envoy, nginx or a YAML `FILE`, as slide serve --event-map), so that each record is keyed by its event's key (its series stays in one partition) and --timestamps event stamps it with its event's time")
	fs.BoolVar(&c.otlp, "otlp", false, "write OpenTelemetry spans of three services (otlp_proto records of 50 spans, --rate spans per second) instead of slide's events: read them with slide serve --event-format otlp_proto --span-dimensions http.route,http.response.status_code")
	fs.BoolVar(&c.zipkin, "zipkin", false, "write the spans of --otlp as Zipkin's v2 JSON (zipkin_json records of 50 spans, the status code as the tag http.status_code): read them with slide serve --event-format zipkin_json and the same --span-dimensions")
	c.kafka.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if err := checkNumbers(fs, zeroMeans{"heavy": "none", "duration": "until interrupted"}, "rate", "keys", "connect-timeout"); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { c.rateSet = c.rateSet || f.Name == "rate" })
	for _, b := range strings.Split(c.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.brokerList = append(c.brokerList, b)
		}
	}
	switch {
	case len(c.brokerList) == 0:
		return flagErrorf(fs, "brokers", "no broker address")
	case c.topic == "":
		return flagErrorf(fs, "topic", "empty")
	case c.timestamps != "now" && c.timestamps != "event":
		return flagErrorf(fs, "timestamps", "want now or event")
	case c.otlp && c.file != "":
		return flagErrorf(fs, "otlp", "generates spans: not with --file")
	case c.zipkin && (c.file != "" || c.otlp):
		return flagErrorf(fs, "zipkin", "generates spans as Zipkin's JSON: not with --file or --otlp")
	case c.eventMap != "" && c.file == "":
		return flagErrorf(fs, "event-map", "keys the lines of --file: give --file")
	}
	var lk lineKeyer
	if c.file != "" {
		var err error
		if lk, err = produceKeyer(c.eventMap); err != nil {
			return usagef(fs, "%v", err)
		}
	}
	var g *ingest.DemoGen
	if c.file == "" {
		heavy := c.heavy
		if heavy == 0 {
			heavy = -1 // the flag's 0 means none; Demo's zero means the default
		}
		var err error
		g, err = ingest.NewDemoGen(ingest.Demo{Keys: c.keys, Rate: c.rate, Heavy: heavy, Metric: c.metric, CostMetric: c.costMetric, Seed: c.seed, Traces: c.traceIDs})
		if err != nil {
			return usagef(fs, "generator flags: %v", err)
		}
	}
	dialer, _, err := c.kafka.dialer(os.LookupEnv)
	if err != nil {
		return err
	}
	if c.kafka.set() {
		// TLS or SASL: a refused certificate or password is not "nobody answers".
		cctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
		err = ingest.CheckBrokers(cctx, c.brokerList, dialer)
		cancel()
	} else {
		err = checkBrokers(ctx, c.brokerList, c.connectTimeout, dialer)
	}
	if err != nil {
		return err
	}
	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: c.brokerList, Topic: c.topic, Dialer: dialer})
	if err != nil {
		return err
	}
	if c.otlp || c.zipkin {
		return produceOTLP(ctx, c, p, s)
	}
	if g == nil {
		return produceFile(ctx, c, p, s, lk)
	}
	return produceGenerated(ctx, c, g, p, s)
}

// checkBrokers fails fast, with a clear message, when no broker answers: the asynchronous
// producer would otherwise retry for a long time before reporting anything.
func checkBrokers(ctx context.Context, brokers []string, timeout time.Duration, base *kafka.Dialer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := *base // the TLS and SASL settings, with this timeout
	d.Timeout = timeout
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			conn.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no broker of %s answers (is `slide serve` running, or is --brokers right?): %w",
		strings.Join(brokers, ","), errors.Join(errs...))
}

func produceGenerated(ctx context.Context, c produceConfig, g *ingest.DemoGen, p *ingest.Producer, s stdio) error {
	runCtx := ctx
	if c.duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	start := time.Now()
	// Sends use ctx, not runCtx: the last batch of the duration must not fail for being late.
	_, runErr := g.Run(runCtx, func(evs []window.Event) error { return p.SendEvents(ctx, evs) })
	closeErr := p.Close()
	elapsed := time.Since(start)
	st := p.Stats()
	d := g.Demo()
	fmt.Fprintf(s.out, "sent %d events (%d requests, %d keys, %d heavy) to %s on %s in %s: %.0f events/s, %s\n",
		st.Sent, st.Sent/2, d.Keys, d.Heavy, c.topic, c.brokers, elapsed.Round(time.Millisecond),
		float64(st.Sent)/elapsed.Seconds(), produceBytes(st.Bytes))
	return produceResult(st, runErr, closeErr)
}

// maxProduceLine bounds a line of produce --file, newline included: about Kafka's default
// largest record (message.max.bytes), which one event is far below.
const maxProduceLine = 1 << 20

// lineKeyer keys the lines of --file.
type lineKeyer struct {
	// key is a line's event key and time, or the reason its first event is refused.
	key func(line []byte) (key string, ts int64, r event.Reason)
	// explain says why key refused line (the decoder's detail), for the first such line.
	explain func(line []byte) string
}

// produceKeyer returns what keys a line of --file: its event's key and time by slide's JSON,
// or by the event map spec names (the first of its metrics that the line gives).
func produceKeyer(spec string) (lineKeyer, error) {
	if spec == "" {
		dec, err := event.NewDecoder(event.Config{})
		if err != nil {
			return lineKeyer{}, err
		}
		return lineKeyer{func(line []byte) (string, int64, event.Reason) {
			ev, reason := dec.Decode(line, 0)
			// ev.Key is the store's series string (key and labels): the record's key is the key.
			return window.SeriesKeyOf(ev.Key), ev.TS, reason
		}, dec.Explain}, nil
	}
	m, err := loadEventMap(spec)
	if err != nil {
		return lineKeyer{}, err
	}
	md, err := event.NewMapDecoder(m, event.Config{})
	if err != nil {
		return lineKeyer{}, fmt.Errorf("--event-map: %w", err)
	}
	return lineKeyer{func(line []byte) (key string, ts int64, first event.Reason) {
		first = event.ReasonInvalidJSON // no event at all
		seen, ok := false, false
		md.DecodeLines(line, 0, func(_ []byte, ev window.Event, r event.Reason) {
			if !seen {
				first, seen = r, true
			}
			if !ok && r == event.ReasonNone {
				key, ts, ok = window.SeriesKeyOf(ev.Key), ev.TS, true
			}
		})
		if ok {
			return key, ts, event.ReasonNone
		}
		return "", 0, first
	}, md.Explain}, nil
}

func produceFile(ctx context.Context, c produceConfig, p *ingest.Producer, s stdio, lk lineKeyer) error {
	var in io.Reader = s.in
	name := "stdin"
	if c.file != "-" {
		f, err := os.Open(c.file)
		if err != nil {
			return fmt.Errorf("opening --file: %w", err)
		}
		defer f.Close()
		in, name = f, c.file
	}
	r := bufio.NewReaderSize(in, maxProduceLine)
	start := time.Now()
	var records, undecodable, lines, nonBlank int64
	var firstBad string          // "line N: why" of the first line refused
	var firstReason event.Reason // and its reason
	var readErr error
	for ctx.Err() == nil {
		slice, err := r.ReadSlice('\n') // a line longer than the buffer is refused, not buffered
		lines++
		if errors.Is(err, bufio.ErrBufferFull) {
			readErr = fmt.Errorf("reading %s: line %d: longer than %d bytes (Kafka's default largest record is 1 MB)", name, lines, maxProduceLine)
			break
		}
		line := bytes.Clone(bytes.TrimRight(slice, "\r\n")) // the producer keeps it until sent
		if len(bytes.TrimSpace(line)) > 0 {
			nonBlank++
			var key []byte
			var ts time.Time // zero: the time of sending
			if k, evTS, r := lk.key(line); r == event.ReasonNone {
				key = []byte(k)
				if c.timestamps == "event" && evTS != 0 {
					ts = time.UnixMilli(evTS)
				}
			} else {
				undecodable++ // sent anyway, unkeyed: the consumer counts and dead-letters it
				if firstBad == "" {
					firstBad, firstReason = fmt.Sprintf("line %d: %s", lines, lk.explain(line)), r
				}
			}
			if err := p.SendAt(ctx, key, line, ts); err != nil {
				readErr = err
				break
			}
			records++
			if c.rateSet {
				producePace(ctx, start, records, c.rate)
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("reading %s: %w", name, err)
			}
			break
		}
	}
	closeErr := p.Close()
	elapsed := time.Since(start)
	st := p.Stats()
	fmt.Fprintf(s.out, "sent %d records (%s) from %s to %s on %s in %s: %.0f records/s",
		st.Sent, produceBytes(st.Bytes), name, c.topic, c.brokers, elapsed.Round(time.Millisecond), float64(st.Sent)/elapsed.Seconds())
	switch {
	case undecodable > 0 && c.eventMap != "":
		n := int64(undecodable)
		fmt.Fprintf(s.out, "; %d %s the event map refuses %s sent unkeyed (%s)", n, plural(n, "line", "lines"), plural(n, "was", "were"), firstBad)
	case undecodable == nonBlank && (firstReason == event.ReasonMissingField || firstReason == event.ReasonInvalidJSON):
		// Lines without slide's fields are likely another shape of JSON: say what reads them.
		fmt.Fprintf(s.out, "; none of its %d lines is a slide event (%s): they were sent unkeyed (an access log? --event-map envoy, nginx or a map file keys them)", undecodable, firstBad)
	case undecodable == nonBlank && undecodable > 0:
		fmt.Fprintf(s.out, "; none of its %d lines is a valid slide event (%s): they were sent unkeyed", undecodable, firstBad)
	case undecodable > 0:
		n := int64(undecodable)
		fmt.Fprintf(s.out, "; %d %s sent unkeyed (%s)", n, plural(n, "line is not a valid event and was", "lines are not valid events and were"), firstBad)
	}
	fmt.Fprintln(s.out)
	return produceResult(st, readErr, closeErr)
}

// producePace sleeps until n records at rate per second are due since start.
func producePace(ctx context.Context, start time.Time, n int64, rate float64) {
	ahead := time.Duration(float64(n)/rate*float64(time.Second)) - time.Since(start)
	if ahead < 10*time.Millisecond {
		return // sleep in chunks: a timer per record would cap the rate
	}
	t := time.NewTimer(ahead)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func produceResult(st ingest.ProducerStats, errs ...error) error {
	if st.Failed > 0 {
		errs = append(errs, fmt.Errorf("%d records failed: %w", st.Failed, st.LastErr))
	}
	return errors.Join(errs...)
}

func produceBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
