package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/limiter/clusterlimit"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// demoPolicies is what `serve --demo` limits with when no --policies file is given.
//
//go:embed demo-policies.yaml
var demoPolicies []byte

// serveConfig is what the serve flags parse into.
type serveConfig struct {
	addr            string
	shutdownTimeout time.Duration
	shutdownDelay   time.Duration
	logLevel        string

	slot          time.Duration
	slots         int
	sketchKind    string
	rings         string
	maxSeries     int
	evictInterval time.Duration
	maxMemory     string // --max-memory: derives the series cap (seriesCap)
	maxSeriesSet  bool   // --max-series was given, on the command line or in the environment
	maxPerMetric  int    // --max-series-per-metric
	exemplars     bool   // --exemplars

	brokers            string
	sessionTimeout     time.Duration
	topic              string
	group              string
	deadLetterTopic    string
	kafkaIsolation     string
	embeddedKafkaAddr  string
	embeddedPartitions int

	policies string
	plans    string // --plans: keys' plans, reloaded on change and SIGHUP (serve_plans.go)
	plansTop string // --plans-topic: keys' plans from a compacted topic (plans_topic.go)
	redis    string
	rls      rlsFlags // --grpc-addr, --rls-config (rls.go)

	authTokenFile   string
	authReads       bool
	peerKeyFile     string
	exportWindows   string
	exportMaxSeries int
	maxBodyBytes    int64

	exportHistograms string // --export-histograms: windows exported as native histograms
	exportExemplars  bool   // --export-exemplars: those histograms carry their slots' exemplars

	readHeaderTimeout time.Duration
	maxConnsPerClient int

	demo     bool
	demoRate float64
	demoKeys int

	conn           connFlags // Kafka and Redis security, HTTPS (connect.go)
	advertiseAddr  string
	peerTimeout    time.Duration
	usageStaleness time.Duration
	keyPartitioner string
	promPushdown   bool         // --promql-pushdown
	promConcurrent int          // --promql-max-concurrency (deprecated: readMax)
	readMax        int          // --read-max-concurrency
	budget         budgetConfig // budget.go

	snapshotInterval   time.Duration
	limiterCheckpoint  time.Duration
	snapshotTopic      string
	snapshotChunkBytes int64

	eventMap string           // --event-map (eventmap.go)
	events   eventFormatFlags // --event-format, --span-key, --span-dimensions (eventformat.go)
}

func (c *serveConfig) register(fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	Var(flag.Value, string, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	BoolVar(*bool, string, bool, string)
	Float64Var(*float64, string, float64, string)
}) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight work gets on SIGTERM")
	fs.DurationVar(&c.shutdownDelay, "shutdown-delay", 0, "how long serve goes on answering after SIGTERM before it closes its listener, /readyz answering 503 and every answer closing its connection meanwhile, so that load balancers and Kubernetes take the instance out and clients move their kept-alive connections without losing a request (0: close at once)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")

	windowVar(fs, &c.slot, "slot", window.DefaultSlot, "slot width of every metric's ring")
	fs.IntVar(&c.slots, "slots", window.DefaultSlots, "slots per ring (retention = slot × slots)")
	fs.StringVar(&c.sketchKind, "sketch", "ddsketch:0.01", "quantile sketch: ddsketch[:ACCURACY], hdr[:SIGFIGS:LOWEST:HIGHEST] or native[:SCHEMA] (Prometheus native-histogram buckets)")
	fs.StringVar(&c.rings, "rings", DefaultRings, "per-metric rings METRIC=SLOT:SLOTS[:SKETCH][+SLOT:SLOTS...],...: coarser tiers after '+', SKETCH none for a sum-only metric (cost reaches 37 days for usage quotas)")
	fs.IntVar(&c.maxSeries, "max-series", 1<<20, "series cap; events of new series beyond it are refused and counted")
	fs.IntVar(&c.maxPerMetric, "max-series-per-metric", 0, "series cap of each metric, so that one noisy label cannot take the store; events of a metric's new series beyond it are refused as series_cap and counted in slide_store_series_refused_total{metric} (0: none but --max-series)")
	fs.BoolVar(&c.exemplars, "exemplars", false, "keep each slot's slowest event that carries a trace (its trace_id and span_id: otlp_* and zipkin_* spans, slide JSON's trace_id and span_id members, an --event-map's trace) as the slot's exemplar, for /api/v1/query_exemplars and Grafana's exemplars; about 1.8 KB more per series that has one (30 slots), counted in --max-memory")
	fs.StringVar(&c.maxMemory, "max-memory", "", "memory for series, e.g. 2GiB: each series weighs what its ring may take busy (1,200 + 170 × slots, 6,300 B at 30; a --rings ring's tier slots 182 B each more: 26,888 B for the default cost ring), and a new series that would take the sum past it is refused as series_cap (2GiB holds 340,870 busy latency series, or 79,867 cost series; logged at start); with --max-series too, both caps hold")
	fs.DurationVar(&c.evictInterval, "evict-interval", 30*time.Second, "how often series with an empty ring are removed")

	fs.StringVar(&c.brokers, "brokers", "", "Kafka bootstrap brokers, comma separated; empty starts the embedded broker")
	fs.StringVar(&c.topic, "topic", ingest.DefaultTopic, "topic of events")
	fs.StringVar(&c.group, "group", ingest.DefaultGroup, "consumer group")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", ingest.DefaultSessionTimeout, "how long the group waits for a crashed instance before handing its partitions to the others (heartbeats are every 1s)")
	fs.StringVar(&c.eventMap, "event-map", "", eventMapUsage)
	fs.StringVar(&c.deadLetterTopic, "dead-letter-topic", "", "topic that receives refused events with their reason (empty: none)")
	fs.StringVar(&c.kafkaIsolation, "kafka-isolation", isolationCommitted, "read_committed: count only committed and non-transactional records, as Kafka Streams, Flink and librdkafka read exactly-once topics (an open transaction holds reading at its first record until it ends; readiness and lag measure to there); read_uncommitted: count aborted transactions' records too, never wait")
	fs.StringVar(&c.embeddedKafkaAddr, "embedded-kafka-addr", ingest.DefaultBrokerAddr, "listen address of the embedded Kafka-protocol broker")
	fs.IntVar(&c.embeddedPartitions, "embedded-kafka-partitions", 4, "partitions of the embedded broker's topic")
	fs.DurationVar(&c.limiterCheckpoint, "limiter-checkpoint-interval", clusterlimit.DefaultCheckpointInterval, "how often the owner of a backend cluster policy's keys writes their state to <topic>.slide-limiter, which a new owner restores (0: off, a new owner starts empty)")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", ingest.DefaultSnapshotInterval, "how often each owned partition's windows are written to the snapshot topic, so a restart or rebalance loads them and replays only the log after (0: off, full replay)")
	fs.StringVar(&c.snapshotTopic, "snapshot-topic", "", "compacted topic of window snapshots (empty: <topic>"+ingest.DefaultSnapshotTopicSuffix+"); created when missing")
	bytesVar(fs, &c.snapshotChunkBytes, "snapshot-chunk-bytes", ingest.DefaultSnapshotChunkBytes, "largest snapshot payload per record; keep it below the snapshot topic's max.message.bytes")
	c.events.register(fs)

	fs.StringVar(&c.policies, "policies", "", "YAML file of rate policies and usage rules for POST /v1/allow")
	fs.StringVar(&c.plans, "plans", "", "YAML file mapping keys (exact or glob) to plans and plans to each policy's and usage rule's numbers; reloaded when it changes and on SIGHUP (a bad reload keeps the old plans)")
	fs.StringVar(&c.plansTop, "plans-topic", "", "compacted Kafka topic of keys' plans (record key: the key, value: a plan --plans lists), read from its start; wins over the file")
	fs.StringVar(&c.redis, "redis", "", "Redis address (host:port) for policies with backend: redis")
	c.rls.register(fs)

	fs.StringVar(&c.authTokenFile, "auth-token-file", "", "file holding the bearer token the write endpoints require (empty: no auth)")
	fs.StringVar(&c.peerKeyFile, "peer-key-file", "", "file holding the group's shared key (at least 32 bytes, the same file on every instance): peer reads and their answers are signed with it (HMAC-SHA256) and refused or not merged unless they verify. Empty: derived from --auth-token-file when set (the token is never sent to peers), else peer reads are unsigned")
	fs.BoolVar(&c.authReads, "auth-reads", false, "also require the token on reads (/v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics, /v1/status, /metrics); /healthz, /readyz and the dashboard page stay open. Needs --auth-token-file")
	fs.StringVar(&c.exportWindows, "export-windows", "", "window aggregates exported on /metrics: METRIC:WINDOW[:AGGS] specs separated by ';', AGGS a comma list of "+window.StatNames+" and quantiles, e.g. 'latency_ms:5m:0.95,0.99;cost:1h:sum'")
	fs.StringVar(&c.exportHistograms, "export-histograms", "", "windows exported on /metrics as Prometheus native histograms: METRIC:WINDOW specs separated by ';', e.g. latency_ms:5m; their rings get the native:5 sketch unless --rings names one")
	fs.BoolVar(&c.exportExemplars, "export-exemplars", false, "the --export-histograms histograms carry the exemplars (--exemplars) of their window's slots, in protobuf scrapes, for a Prometheus 2.50 or later with exemplar storage; a scrape grows ~100 bytes an exemplar, and Prometheus 3.16's parser keeps only the first series' of the family (docs/sre.md)")
	fs.IntVar(&c.exportMaxSeries, "export-max-series", query.DefaultExportMaxSeries, "cap on series exported per scrape (--export-windows and --export-histograms together)")
	bytesVar(fs, &c.maxBodyBytes, "max-body-bytes", query.DefaultMaxBodyBytes, "largest POST /v1/events body; larger gets 413")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", defaultReadHeaderTimeout, "time a connection gets to send its request header (slowloris guard)")
	fs.IntVar(&c.maxConnsPerClient, "max-conns-per-client", defaultMaxConnsPerClient, "open HTTP connections one client IP may hold; more are closed at once (0: unlimited)")

	fs.StringVar(&c.advertiseAddr, "advertise-addr", "", "host:port other instances reach this one's HTTP API at (default: --addr, or this host's name with --addr's port when --addr is a wildcard)")
	fs.DurationVar(&c.peerTimeout, "peer-timeout", cluster.DefaultTimeout, "deadline of a read fanned out to the other instances; an owner slower than this counts as missing")
	fs.DurationVar(&c.usageStaleness, "usage-staleness", cluster.DefaultStaleness, "how old the other instances' aggregates read by usage rules may be (cached) (0: no cache)")
	fs.StringVar(&c.keyPartitioner, "key-partitioner", "", "declare that every producer partitions records by key with murmur2 (Java clients, slide produce): a one-key read then asks only its partition's owner. Empty: ask every owner (exact whatever the producers do)")
	fs.IntVar(&c.readMax, "read-max-concurrency", 0, "reads that scan series running at once, one cap shared by /v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics and the PromQL API's queries and listings, as Prometheus' --query.max-concurrency; more wait in line up to the read timeout (25 s), then answer 503 with Retry-After. 0: twice GOMAXPROCS (4 on 2 cores): a scanning read is CPU-bound, so twice the cores keeps every core busy while some reads wait on a shard lock or a peer, and leaves ingestion, the limiter's decisions and the probes (never queued) their share of the CPU however many clients read at once")
	fs.IntVar(&c.promConcurrent, "promql-max-concurrency", 0, "deprecated: --read-max-concurrency, which caps PromQL queries and the /v1 reads together; given alone, it sets that cap (0: not given)")
	fs.BoolVar(&c.promPushdown, "promql-pushdown", true, "answer histogram_quantile(φ, [sum by|without (…)] rate|increase(M[r])) on /api/v1/query and query_range without Prometheus' engine, equal to its answer and several times cheaper (false: every query goes to the engine)")
	fs.BoolVar(&c.demo, "demo", false, "produce synthetic traffic (latency_ms and cost for tenant-1…N), feed OTLP spans of three services (duration_ms, labelled by "+demoSpanDimensions+" unless --span-dimensions says otherwise, with --exemplars unless it is set) and limit with demo policies")
	fs.Float64Var(&c.demoRate, "demo-rate", 200, "demo requests per second")
	fs.IntVar(&c.demoKeys, "demo-keys", 20, "demo tenants")
	c.budget.register(fs)
}

// storeConfig builds the window store's config from the flags.
func (c *serveConfig) storeConfig() (window.StoreConfig, error) {
	kind, err := sketch.ParseKind(c.sketchKind)
	if err != nil {
		return window.StoreConfig{}, &flagError{"sketch", sketchProblem(err)}
	}
	rings, err := parseMetricRings(c.rings)
	if err != nil {
		return window.StoreConfig{}, &flagError{"rings", err}
	}
	hists, err := query.ParseHistogramSpecs(c.exportHistograms)
	if err != nil {
		return window.StoreConfig{}, fmt.Errorf("--export-histograms: %w", err)
	}
	// A metric exported as native histograms gets bins that are the histogram's buckets
	// (exact export), unless --rings chose its sketch.
	native := map[string]bool{}
	for _, h := range hists {
		native[h.Metric] = true
		if _, ok := rings[h.Metric]; !ok {
			rings[h.Metric] = window.RingConfig{Slot: c.slot, Slots: c.slots}
		}
	}
	for m, rc := range rings {
		if rc.NoSketch && native[m] {
			return window.StoreConfig{}, fmt.Errorf("--export-histograms: metric %s keeps no sketch (--rings %s=%s)", m, m, rc.Spec())
		}
		if rc.Sketch == (sketch.Kind{}) {
			rc.Sketch = kind
			if native[m] {
				rc.Sketch = sketch.Kind{Name: sketch.NameNative, Schema: sketch.DefaultSchema}
			}
			rings[m] = rc
		}
	}
	maxSeries, maxBytes, err := c.seriesCap(rings)
	if err != nil {
		return window.StoreConfig{}, err
	}
	sc := window.StoreConfig{
		Ring:      window.RingConfig{Slot: c.slot, Slots: c.slots, Sketch: kind},
		Metrics:   rings,
		MaxSeries: maxSeries,
		MaxBytes:  maxBytes,

		MaxSeriesPerMetric: c.maxPerMetric,
		Exemplars:          c.exemplars,
	}
	c.budget.applySkew(&sc)
	if err := sc.Validate(); err != nil {
		return sc, err
	}
	return sc, nil
}

func cmdServe(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("serve", s.out)
	var c serveConfig
	c.register(fs)
	c.conn.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c.maxSeriesSet = flagGiven(fs, "max-series")
	if c.demo && !flagGiven(fs, "span-dimensions") {
		c.events.spanDim = demoSpanDimensions // the demo's spans show their route and code
	}
	if c.demo && !flagGiven(fs, "exemplars") {
		c.exemplars = true // the demo's spans link their latency panels to their traces
	}
	if err := c.validate(fs); err != nil {
		return err
	}
	if err := c.checkHTTP(); err != nil {
		return usagef(fs, "%v", err)
	}
	if err := c.conn.check(c.brokers); err != nil {
		return err
	}
	if err := c.budget.check(); err != nil {
		return usagef(fs, "%v", err)
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.logLevel)) // checked by validate
	log := newLogger(s.err, level)
	setMemLimit(log)
	if c.plans == "" && c.conn.https.cert == "" && c.rls.config == "" {
		keepOnHUP(ctx, log, "SIGHUP: nothing reloads on it without --plans, --tls-cert or --rls-config; --policies and the other flags are read at start (restart to apply them)")
	}
	if c.rls.config != "" && c.rls.grpcAddr != "" {
		c.rls.reloadOnHUP(ctx, log)
	}
	return envNamed(fs, serve(ctx, c, s, log))
}

// serve builds the engine, serves until ctx ends, then closes in reverse order.
func serve(ctx context.Context, c serveConfig, s stdio, log *slog.Logger) error {
	// "stopped" is the last line once serving began: deferred first, it runs after the
	// consumer has left its group (wg.Wait below) and the broker and limiter are closed.
	serving := false
	defer func() {
		if serving {
			log.Info("stopped")
		}
	}()
	var peerKey []byte
	if c.peerKeyFile != "" {
		var err error
		if peerKey, err = readPeerKey(c.peerKeyFile); err != nil {
			return fmt.Errorf("--peer-key-file: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	sc, err := c.storeConfig()
	if err != nil {
		return err
	}
	if c.maxMemory != "" {
		log.Info("series capped by --max-memory: each weighs what its ring may take busy", "max_memory", c.maxMemory, "max_bytes", sc.MaxBytes, "bytes_per_busy_series", c.busySeriesBytes(sc.Metrics), "max_series", sc.MaxSeries)
	}
	store, err := window.NewStore(sc)
	if err != nil {
		return err
	}
	registerStoreMetrics(reg, store, c.maxPerMetric > 0)

	// Limiter: policies and usage rules from one file; the demo has its own. Built before
	// anything starts, so a bad policy file fails at once with nothing to tear down.
	reader := &clusterReader{} // usage rules read through the cluster, built below
	allow, closeLimiter, err := c.limiter(store, reg, log, reader)
	if err != nil {
		return err
	}
	defer closeLimiter()
	// --event-map or --event-format: the reader of Kafka records and POST /v1/events bodies,
	// checked before anything starts too.
	evFormat, err := c.recordFormat()
	if err != nil {
		return err
	}
	evIdentity, err := c.eventsIdentity()
	if err != nil {
		return err
	}

	// Kafka: the embedded broker unless --brokers names a cluster.
	var brokers []string
	var broker *ingest.Broker
	if c.brokers == "" {
		broker, err = ingest.StartBroker(ctx, ingest.BrokerConfig{
			Addr: c.embeddedKafkaAddr, Topic: c.topic, Partitions: c.embeddedPartitions, Logger: log,
		})
		if err != nil {
			return bindError("embedded-kafka-addr", c.embeddedKafkaAddr, fmt.Errorf("starting the embedded Kafka broker: %w", err))
		}
		defer broker.Close()
		brokers = broker.Addrs()
		log.Info("embedded Kafka broker", "addr", strings.Join(brokers, ","), "topic", c.topic, "partitions", c.embeddedPartitions)
	} else {
		brokers = strings.Split(c.brokers, ",")
	}
	if err := c.conn.connectKafka(brokers, log); err != nil {
		return err
	}
	var plansReady func() error // the plans topic's first reading, with --plans-topic
	if c.plansTop != "" {
		if c.plans == "" || c.rls.svc == nil {
			return errors.New("--plans-topic: needs --plans (the plans its records name)")
		}
		plansReady = followPlansTopic(ctx, brokers, c.conn.kafkaDialer, c.plansTop, c.rls.svc, log)
	}
	metrics := append([]string{}, store.Metrics()...)
	for m := range sc.Metrics {
		metrics = append(metrics, m)
	}
	token := ""
	if c.authTokenFile != "" {
		if token, err = query.ReadTokenFile(c.authTokenFile); err != nil {
			return fmt.Errorf("--auth-token-file: %w", err)
		}
	}
	// The listener comes first: the address this instance advertises to the group needs its
	// port (--addr 127.0.0.1:0 picks one).
	ln, err := c.listen(reg)
	if err != nil {
		return err
	}
	listening := true
	defer func() {
		if listening {
			_ = ln.Close()
		}
	}()
	advertise, err := advertiseAddr(c.advertiseAddr, ln.Addr().String())
	if err != nil {
		return err
	}
	if err := c.conn.prepareHTTPS(); err != nil {
		return err
	}
	peerTLS, err := c.conn.peerTLS()
	if err != nil {
		return err
	}
	var cl *cluster.Cluster
	var consumer *ingest.Consumer
	cl, err = cluster.New(cluster.Config{
		Store: store, Brokers: brokers, Topic: c.topic, Group: c.group, Advertise: advertise, Token: token, PeerKey: peerKey,
		Timeout: c.peerTimeout, Staleness: c.clusterStaleness(), KeyPartitioner: c.keyPartitioner, Logger: log, Registerer: reg,
		Dialer: c.conn.kafkaDialer, TLS: peerTLS,
		Local: func() []int32 { return restoredPartitions(consumer) }, Generation: func() int32 { return consumer.Generation() },
		Restored: func() bool { return consumer != nil && consumer.Ready() },
	})
	if err != nil {
		return err
	}
	consumer, err = ingest.New(ingest.Config{
		Brokers: brokers, Topic: c.topic, Group: c.group, DeadLetterTopic: c.deadLetterTopic, SessionTimeout: c.sessionTimeout,
		Restore: ingest.RestoreSpan(store, metrics...), Logger: log, Registerer: reg,
		MemberData: cluster.MemberData(advertise), Dialer: c.conn.kafkaDialer, MaxInflatedBytes: c.budget.maxInflatedBytes,
		Format: evFormat, ReadUncommitted: c.kafkaIsolation == isolationUncommitted,
		Snapshots: ingest.SnapshotConfig{Interval: c.snapshotInterval, Topic: c.snapshotTopic, ChunkBytes: int(c.snapshotChunkBytes),
			MaxBytes: c.snapshotMaxBytes(sc), Events: evIdentity},
	}, store, ingest.WithGenerationHook(func(gen int32, assigned []int32) {
		cl.OnGeneration(gen, assigned)
		if reader.limits != nil {
			reader.limits.OnGeneration(gen, assigned) // after cl's: keys route here only once they are ours
		}
	}))
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	reader.c, reader.group.Cluster = cl, cl
	if reader.limits != nil {
		if err := reader.limits.SetCheckpoints(clusterlimit.CheckpointConfig{Interval: c.limiterCheckpoint, Brokers: brokers,
			Topic: c.topic, Group: c.group, Dialer: c.conn.kafkaDialer}); err != nil {
			return err
		}
	}
	specs, err := query.ParseExportSpecs(c.exportWindows)
	if err != nil {
		return fmt.Errorf("--export-windows: %w", err)
	}
	hists, err := query.ParseHistogramSpecs(c.exportHistograms) // checked by storeConfig
	if err != nil {
		return fmt.Errorf("--export-histograms: %w", err)
	}
	// POST /v1/events: straight into this instance's store, with the decoder and reasons of
	// Kafka records (query.Config.Events says what such events are not), OTLP protobuf and
	// slide's NDJSON by their Content-Type too.
	events, eventsByType, err := c.events.intakes(store, evFormat)
	if err != nil {
		return err
	}
	traces, err := c.events.spanIntakes(store, traceFormats) // POST /v1/traces: OTLP/HTTP
	if err != nil {
		return err
	}
	zipkin, err := c.events.spanIntakes(store, zipkinFormats) // POST /api/v2/spans: Zipkin's API
	if err != nil {
		return err
	}
	logs, err := c.logsIntakes(store) // POST /v1/logs: OTLP/HTTP logs through --event-map
	if err != nil {
		return err
	}
	// Only the first restore holds traffic back. Partitions a later rebalance assigns
	// restore while the instance stays in its Service: the reads over them answer 503 or
	// partial=allow's flag (cluster.Config.Restored), the others answer as before, and
	// cluster policies' keys of a partition whose limiter state is restoring follow
	// on_backend_error, as they do at every other instance that forwards them here.
	// Pulling every instance that gained partitions, as a scale-up or a rolling update
	// does to all at once, emptied the Service.
	var limitsReady func() error
	if reader.limits != nil {
		limitsReady = reader.limits.Ready
	}
	ready := readiness(
		gate{check: c.conn.checks.failing},
		gate{check: limitsReady, untilReady: true},
		gate{check: plansReady},
		gate{check: func() error {
			if !consumer.WasReady() {
				p, _ := json.Marshal(consumer.Progress())
				return fmt.Errorf("restoring windows from Kafka: %s", p)
			}
			return nil
		}},
		gate{check: func() error {
			if !cl.Known() {
				return errors.New("learning the consumer group's members and partitions")
			}
			return nil
		}},
	)
	// GET|POST /api/v1/…: PromQL on Prometheus' engine over every instance's rings (the
	// cluster's slot read); a partition no instance served answers 503, or with
	// partial=allow a warning.
	// The engine's own metrics stay unregistered: prometheus_engine_query_duration_histogram_seconds
	// fails promtool check metrics, and the route's requests are counted as route="promapi".
	reads, err := c.readGate(reg, log)
	if err != nil {
		return err
	}
	pc := c.promConfig(store, ready, cl, log)
	pc.Gate = reads // one cap on the reads that scan, for both APIs
	prom, err := promapi.New(pc)
	if err != nil {
		return err
	}
	var quota http.Handler
	if c.rls.svc != nil && allow != nil {
		quota = limithttp.QuotaHandler(c.rls.svc)
	}
	qs, err := query.New(query.Config{
		Store: store, Cluster: cl, Events: events, EventsByType: eventsByType, Traces: traces, Logs: logs, Zipkin: zipkin, Allow: allow, Quota: quota, PromAPI: prom.Handler(), AuthToken: token, AuthReads: c.authReads,
		MaxBodyBytes: c.maxBodyBytes, Export: specs, ExportHistograms: hists, ExportExemplars: c.exportExemplars, ExportMaxSeries: c.exportMaxSeries,
		Registerer: reg, Gatherer: reg, Logger: log, Reads: reads,
		Backends:  c.conn.checks.states,
		Progress:  func() any { return consumer.Progress() },
		Restoring: consumer.Restoring,
		RestoringLimits: func() []int32 {
			if reader.limits == nil {
				return nil
			}
			return reader.limits.Restoring()
		},
		Ready: ready,
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle(cluster.PeerPath, cl.PeerHandler())
	if reader.limits != nil {
		mux.Handle(clusterlimit.Path, reader.limits.Handler())
	}
	mux.Handle("/", qs.Handler())
	drain := &drain{delay: c.shutdownDelay}
	srv := newHTTPServer(drain.handler(mux), c.readHeaderTimeout, log)
	grpcSrv, err := c.rls.listen(token, reg, log)
	if err != nil {
		return err
	}
	listening = false // serveUntilDone closes it

	// Background work ends when work is cancelled, after the HTTP server has drained.
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	httpLn, err := c.conn.listener(work, ln, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	var wg sync.WaitGroup
	c.conn.startChecks(work, &wg, log)
	reg.MustRegister(c.conn.checks) // slide_backend_up
	errc := make(chan error, 3)
	wg.Go(func() {
		if err := consumer.Run(work); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("kafka consumer: %w", err)
		}
	})
	wg.Go(func() { evictLoop(work, store, c.evictInterval) })
	grpcSrv.run(work, &wg, errc, c.shutdownTimeout)
	wg.Go(func() { _ = cl.Run(work) })
	if reader.limits != nil {
		wg.Go(func() { reader.limits.Run(work) })
	}
	if c.demo {
		wg.Go(func() {
			if err := runDemo(work, c, brokers, log); err != nil {
				errc <- fmt.Errorf("demo traffic: %w", err)
			}
		})
		wg.Go(func() { runDemoSpans(work, traces["application/x-protobuf"], log) })
	}
	log.Info("slide serving", "addr", ln.Addr().String(), "version", version)
	if c.demo {
		wg.Go(func() { printBannerWhenReady(work, s.out, ln.Addr().String(), consumer.Ready) })
	}
	serving = true
	err = serveUntilDone(ctx, srv, httpLn, drain, c.shutdownTimeout, errc, log)
	if reader.limits != nil {
		// The API has drained: write the final checkpoint of the keys owned here before the
		// consumer leaves the group, so their next owner loses nothing.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.shutdownTimeout)
		reader.limits.Close(cctx)
		cancel()
	}
	stopWork() // stop fetching, finish the batch, commit, leave the group; stop the demo
	wg.Wait()
	return err
}

// clusterStaleness is --usage-staleness as cluster.Config takes it: the flag's 0 is "no
// cache", which the config spells negative (its zero value is the default, 1 s).
func (c *serveConfig) clusterStaleness() time.Duration {
	if c.usageStaleness == 0 {
		return -1
	}
	return c.usageStaleness
}
