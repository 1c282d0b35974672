// This file is over 600 lines: serve's wiring grew with the cluster, TLS, RLS and snapshot
// flags this round; moving the limiter and demo wiring to files of their own is open in
// issue #10.

package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"

	goredis "github.com/redis/go-redis/v9"
)

// demoPolicies is what `serve --demo` limits with when no --policies file is given.
//
//go:embed demo-policies.yaml
var demoPolicies []byte

// serveConfig is what the serve flags parse into.
type serveConfig struct {
	addr            string
	shutdownTimeout time.Duration
	logLevel        string

	slot          time.Duration
	slots         int
	sketchKind    string
	rings         string
	maxSeries     int
	evictInterval time.Duration
	maxMemory     string // --max-memory: derives the series cap (seriesCap)
	maxSeriesSet  bool   // --max-series was given, on the command line or in the environment

	brokers            string
	sessionTimeout     time.Duration
	topic              string
	group              string
	deadLetterTopic    string
	embeddedKafkaAddr  string
	embeddedPartitions int

	policies string
	redis    string
	rls      rlsFlags // --grpc-addr, --rls-config (rls.go)

	authTokenFile   string
	authReads       bool
	exportWindows   string
	exportMaxSeries int
	maxBodyBytes    int64

	exportHistograms string // --export-histograms: windows exported as native histograms

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
	budget         budgetConfig // budget.go

	snapshotInterval   time.Duration
	snapshotTopic      string
	snapshotChunkBytes int
}

func (c *serveConfig) register(fs interface {
	StringVar(*string, string, string, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	IntVar(*int, string, int, string)
	Int64Var(*int64, string, int64, string)
	BoolVar(*bool, string, bool, string)
	Float64Var(*float64, string, float64, string)
}) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight work gets on SIGTERM")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")

	fs.DurationVar(&c.slot, "slot", window.DefaultSlot, "slot width of every metric's ring")
	fs.IntVar(&c.slots, "slots", window.DefaultSlots, "slots per ring (retention = slot × slots)")
	fs.StringVar(&c.sketchKind, "sketch", "ddsketch:0.01", "quantile sketch: ddsketch[:ACCURACY], hdr[:SIGFIGS:LOWEST:HIGHEST] or native[:SCHEMA] (Prometheus native-histogram buckets)")
	fs.StringVar(&c.rings, "rings", "cost=1m:60", "per-metric rings METRIC=SLOT:SLOTS[:SKETCH],... (cost keeps an hour for usage quotas)")
	fs.IntVar(&c.maxSeries, "max-series", 1<<20, "series cap; events of new series beyond it are refused and counted")
	fs.StringVar(&c.maxMemory, "max-memory", "", "memory for series, e.g. 2GiB: sets the series cap to it ÷ the bytes of a busy series (1,200 + 170 × --slots, 6,300 B at 30 slots); with --max-series too, the smaller cap wins")
	fs.DurationVar(&c.evictInterval, "evict-interval", 30*time.Second, "how often series with an empty ring are removed")

	fs.StringVar(&c.brokers, "brokers", "", "Kafka bootstrap brokers, comma separated; empty starts the embedded broker")
	fs.StringVar(&c.topic, "topic", ingest.DefaultTopic, "topic of events")
	fs.StringVar(&c.group, "group", ingest.DefaultGroup, "consumer group")
	fs.DurationVar(&c.sessionTimeout, "session-timeout", ingest.DefaultSessionTimeout, "how long the group waits for a crashed instance before handing its partitions to the others (heartbeats are every 1s)")
	fs.StringVar(&c.deadLetterTopic, "dead-letter-topic", "", "topic that receives refused events with their reason (empty: none)")
	fs.StringVar(&c.embeddedKafkaAddr, "embedded-kafka-addr", ingest.DefaultBrokerAddr, "listen address of the embedded Kafka-protocol broker")
	fs.IntVar(&c.embeddedPartitions, "embedded-kafka-partitions", 4, "partitions of the embedded broker's topic")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", ingest.DefaultSnapshotInterval, "how often each owned partition's windows are written to the snapshot topic, so a restart or rebalance loads them and replays only the log after (0: off, full replay)")
	fs.StringVar(&c.snapshotTopic, "snapshot-topic", "", "compacted topic of window snapshots (empty: <topic>"+ingest.DefaultSnapshotTopicSuffix+"); created when missing")
	fs.IntVar(&c.snapshotChunkBytes, "snapshot-chunk-bytes", ingest.DefaultSnapshotChunkBytes, "largest snapshot payload per record; keep it below the snapshot topic's max.message.bytes")

	fs.StringVar(&c.policies, "policies", "", "YAML file of rate policies and usage rules for POST /v1/allow")
	fs.StringVar(&c.redis, "redis", "", "Redis address (host:port) for policies with backend: redis")
	c.rls.register(fs)

	fs.StringVar(&c.authTokenFile, "auth-token-file", "", "file holding the bearer token the write endpoints require (empty: no auth)")
	fs.BoolVar(&c.authReads, "auth-reads", false, "also require the token on reads (/v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics, /v1/status, /metrics); /healthz, /readyz and the dashboard page stay open. Needs --auth-token-file")
	fs.StringVar(&c.exportWindows, "export-windows", "", "window aggregates exported on /metrics: METRIC:WINDOW[:AGGS] specs separated by ';', AGGS a comma list of count, sum, avg, min, max, rate and quantiles, e.g. 'latency_ms:5m:0.95,0.99;cost:1h:sum'")
	fs.StringVar(&c.exportHistograms, "export-histograms", "", "windows exported on /metrics as Prometheus native histograms: METRIC:WINDOW specs separated by ';', e.g. latency_ms:5m; their rings get the native:5 sketch unless --rings names one")
	fs.IntVar(&c.exportMaxSeries, "export-max-series", query.DefaultExportMaxSeries, "cap on series exported per scrape (--export-windows and --export-histograms together)")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", query.DefaultMaxBodyBytes, "largest POST /v1/events body; larger gets 413")
	fs.DurationVar(&c.readHeaderTimeout, "read-header-timeout", defaultReadHeaderTimeout, "time a connection gets to send its request header (slowloris guard)")
	fs.IntVar(&c.maxConnsPerClient, "max-conns-per-client", defaultMaxConnsPerClient, "open HTTP connections one client IP may hold; more are closed at once (0: unlimited)")

	fs.StringVar(&c.advertiseAddr, "advertise-addr", "", "host:port other instances reach this one's HTTP API at (default: --addr, or this host's name with --addr's port when --addr is a wildcard)")
	fs.DurationVar(&c.peerTimeout, "peer-timeout", cluster.DefaultTimeout, "deadline of a read fanned out to the other instances; an owner slower than this counts as missing")
	fs.DurationVar(&c.usageStaleness, "usage-staleness", cluster.DefaultStaleness, "how old the other instances' aggregates read by usage rules may be (cached); negative: no cache")
	fs.StringVar(&c.keyPartitioner, "key-partitioner", "", "declare that every producer partitions records by key with murmur2 (Java clients, slide produce): a one-key read then asks only its partition's owner. Empty: ask every owner (exact whatever the producers do)")
	fs.BoolVar(&c.demo, "demo", false, "produce synthetic traffic (latency_ms and cost for tenant-1…N) and limit with demo policies")
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
		if rc.Sketch == (sketch.Kind{}) {
			rc.Sketch = kind
			if native[m] {
				rc.Sketch = sketch.Kind{Name: sketch.NameNative, Schema: sketch.DefaultSchema}
			}
			rings[m] = rc
		}
	}
	maxSeries, err := c.seriesCap()
	if err != nil {
		return window.StoreConfig{}, err
	}
	sc := window.StoreConfig{
		Ring:      window.RingConfig{Slot: c.slot, Slots: c.slots, Sketch: kind},
		Metrics:   rings,
		MaxSeries: maxSeries,
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
	log := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
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
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	sc, err := c.storeConfig()
	if err != nil {
		return err
	}
	store, err := window.NewStore(sc)
	if err != nil {
		return err
	}
	registerStoreMetrics(reg, store)

	// Limiter: policies and usage rules from one file; the demo has its own. Built before
	// anything starts, so a bad policy file fails at once with nothing to tear down.
	reader := &clusterReader{} // usage rules read through the cluster, built below
	allow, closeLimiter, err := c.limiter(store, reg, log, reader)
	if err != nil {
		return err
	}
	defer closeLimiter()

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
		Store: store, Brokers: brokers, Topic: c.topic, Group: c.group, Advertise: advertise, Token: token,
		Timeout: c.peerTimeout, Staleness: c.usageStaleness, KeyPartitioner: c.keyPartitioner, Logger: log, Registerer: reg,
		Dialer: c.conn.kafkaDialer, TLS: peerTLS,
		Local: func() []int32 { return restoredPartitions(consumer) }, Generation: func() int32 { return consumer.Generation() },
	})
	if err != nil {
		return err
	}
	consumer, err = ingest.New(ingest.Config{
		Brokers: brokers, Topic: c.topic, Group: c.group, DeadLetterTopic: c.deadLetterTopic, SessionTimeout: c.sessionTimeout,
		Restore: ingest.RestoreSpan(store, metrics...), Logger: log, Registerer: reg,
		MemberData: cluster.MemberData(advertise), Dialer: c.conn.kafkaDialer, MaxInflatedBytes: c.budget.maxInflatedBytes,
		Snapshots: ingest.SnapshotConfig{Interval: c.snapshotInterval, Topic: c.snapshotTopic, ChunkBytes: c.snapshotChunkBytes},
	}, store, ingest.WithGenerationHook(cl.OnGeneration))
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	reader.c = cl
	specs, err := query.ParseExportSpecs(c.exportWindows)
	if err != nil {
		return fmt.Errorf("--export-windows: %w", err)
	}
	hists, err := query.ParseHistogramSpecs(c.exportHistograms) // checked by storeConfig
	if err != nil {
		return fmt.Errorf("--export-histograms: %w", err)
	}
	qs, err := query.New(query.Config{
		Store: store, Cluster: cl, Events: newEventSink(store), Allow: allow, AuthToken: token, AuthReads: c.authReads,
		MaxBodyBytes: c.maxBodyBytes, Export: specs, ExportHistograms: hists, ExportMaxSeries: c.exportMaxSeries,
		Registerer: reg, Gatherer: reg, Logger: log,
		Backends: c.conn.checks.states,
		Progress: func() any { return consumer.Progress() },
		Ready: func() error {
			if err := c.conn.checks.failing(); err != nil {
				return err
			}
			if consumer.Ready() && cl.Known() {
				return nil
			}
			if consumer.Ready() {
				return errors.New("learning the consumer group's members and partitions")
			}
			p, _ := json.Marshal(consumer.Progress())
			return fmt.Errorf("restoring windows from Kafka: %s", p)
		},
	})
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle(cluster.PeerPath, cl.PeerHandler())
	mux.Handle("/", qs.Handler())
	srv := newHTTPServer(mux, c.readHeaderTimeout, log)
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
	errc := make(chan error, 3)
	wg.Go(func() {
		if err := consumer.Run(work); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("kafka consumer: %w", err)
		}
	})
	wg.Go(func() { evictLoop(work, store, c.evictInterval) })
	grpcSrv.run(work, &wg, errc, c.shutdownTimeout)
	wg.Go(func() { _ = cl.Run(work) })
	if c.demo {
		wg.Go(func() {
			if err := runDemo(work, c, brokers, log); err != nil {
				errc <- fmt.Errorf("demo traffic: %w", err)
			}
		})
	}
	log.Info("slide serving", "addr", ln.Addr().String(), "version", version)
	if c.demo {
		wg.Go(func() { printBannerWhenReady(work, s.out, ln.Addr().String(), consumer.Ready) })
	}
	serving = true
	err = serveUntilDone(ctx, srv, httpLn, c.shutdownTimeout, errc, log)
	stopWork() // stop fetching, finish the batch, commit, leave the group; stop the demo
	wg.Wait()
	return err
}

// limiter builds the POST /v1/allow handler, or nil when there are no policies or rules.
func (c *serveConfig) limiter(store *window.Store, reg prometheus.Registerer, log *slog.Logger, reader usage.Reader) (http.Handler, func(), error) {
	var (
		policies []limiter.Policy
		rules    []usage.Rule
		err      error
	)
	switch {
	case c.policies != "":
		if policies, rules, err = usage.LoadFile(c.policies); err != nil {
			return nil, func() {}, fmt.Errorf("--policies: %w", err)
		}
	case c.demo:
		if policies, rules, err = usage.ParseFile(demoPolicies, "demo-policies.yaml"); err != nil {
			return nil, func() {}, fmt.Errorf("demo policies: %w", err)
		}
	}
	rp, rr, err := c.rls.policies(c.redis) // Envoy's rate limit service decides through the same service
	if err != nil {
		return nil, func() {}, err
	}
	policies, rules = append(policies, rp...), append(rules, rr...)
	if len(policies) == 0 && len(rules) == 0 {
		return nil, func() {}, nil
	}
	checkers, err := usage.NewCheckers(store, rules)
	if err != nil {
		return nil, func() {}, fmt.Errorf("usage rules: %w", err)
	}
	if reader != nil {
		usage.SetReader(checkers, reader)
	}
	cfg := limiter.Config{Policies: policies, Checkers: checkers, Registerer: reg, Logger: log,
		Memory: limiter.MemoryConfig{MaxBytes: c.budget.limiterMaxBytes}}
	closeFn := func() {}
	// go-redis logs each failed dial to stderr; through slog, at most one a second.
	goredis.SetLogger(redisLogger{log: log, every: rate.NewLimiter(1, 1)})
	client, err := c.conn.connectRedis(c.redis)
	if err != nil {
		return nil, func() {}, err
	}
	if client != nil {
		closeFn = func() { _ = client.Close() }
		backend, err := redislimit.New(client, redislimit.Config{})
		if err != nil {
			closeFn()
			return nil, func() {}, fmt.Errorf("--redis: %w", err)
		}
		cfg.Redis = backend
	}
	svc, err := limiter.NewService(cfg)
	if err != nil {
		closeFn()
		return nil, func() {}, err
	}
	c.rls.svc = svc
	return svc.AllowHandler(), closeFn, nil
}

// advertiseAddr is the address this instance tells the group its HTTP API is at: flag
// when set, else the listener's address, with this host's name when it listens on a
// wildcard (":8081", "0.0.0.0:8081").
func advertiseAddr(flag, listening string) (string, error) {
	if flag != "" {
		if err := cluster.CheckAdvertise(flag); err != nil {
			return "", fmt.Errorf("--advertise-addr: %w", err)
		}
		return flag, nil
	}
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		name, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("--addr %s is a wildcard and the host has no name (%v): set --advertise-addr", listening, err)
		}
		host = name
	}
	return net.JoinHostPort(host, port), nil
}

// clusterReader hands usage rules the cluster, which is built after them (it needs the
// listener's port); c is set before anything is served.
type clusterReader struct{ c *cluster.Cluster }

func (r *clusterReader) Local() bool { return r.c == nil || r.c.Local() }

func (r *clusterReader) Read(ctx context.Context, now int64, metric, series string, win time.Duration, qs []float64) (window.Agg, int64, []int32, error) {
	return r.c.Read(ctx, now, metric, series, win, qs)
}

func (r *clusterReader) Unavailable(caller string) { r.c.Unavailable(caller) }

// restoredPartitions are the partitions consumer has restored and serves.
func restoredPartitions(consumer *ingest.Consumer) []int32 {
	if consumer == nil {
		return nil
	}
	var out []int32
	for _, p := range consumer.Progress().Partitions {
		if p.Restored {
			out = append(out, p.Partition)
		}
	}
	return out
}

// redisLogger carries go-redis's own messages (failed dials during an outage) into slog
// at warn level, rate-limited: the limiter's metrics count every failed decision already.
type redisLogger struct {
	log   *slog.Logger
	every *rate.Limiter
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if l.every.Allow() {
		l.log.Warn("redis: " + strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
	}
}

// newEventSink records POST /v1/events bodies straight into this instance's store, with the
// same decoder and reasons as Kafka records. Such events are not in the log: a restart loses
// them and, with several instances, they land on the instance that received them. Producers
// that need durability or partitioning write to the topic instead.
func newEventSink(store *window.Store) query.EventSink {
	pool := sync.Pool{New: func() any {
		d, _ := ingest.NewDecoder(ingest.DecoderConfig{}) // defaults are valid
		return d
	}}
	return query.EventSinkFunc(func(_ context.Context, body []byte, now int64) (query.EventsResult, error) {
		d := pool.Get().(*ingest.Decoder)
		defer pool.Put(d)
		res := query.EventsResult{Rejected: map[string]int{}}
		d.DecodeLines(body, now, func(_ []byte, ev window.Event, r ingest.Reason) {
			if r == ingest.ReasonNone {
				ev.Partition = -1 // not from Kafka: never dropped on a partition's revocation
				r = ingest.ReasonOf(store.ObserveAt(now, ev))
			}
			if r == ingest.ReasonNone {
				res.Accepted++
			} else {
				res.Rejected[r.String()]++
			}
		})
		return res, nil
	})
}

func evictLoop(ctx context.Context, store *window.Store, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			store.Evict(now.UnixMilli())
		}
	}
}

// registerStoreMetrics exports the store's refusal counters.
func registerStoreMetrics(reg prometheus.Registerer, store *window.Store) {
	counter := func(name, help string, f func(window.StoreStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(store.Stats())) })
	}
	reg.MustRegister(
		counter("slide_store_evicted_series_total", "Idle series removed from the window store.", func(s window.StoreStats) uint64 { return s.Evicted }),
	)
}

// Defaults of the HTTP guards against slow and greedy clients.
const (
	defaultReadHeaderTimeout = 5 * time.Second
	defaultMaxConnsPerClient = 256
)

// checkHTTP refuses HTTP flags that cannot work, before anything starts.
func (c *serveConfig) checkHTTP() error {
	switch {
	case c.authReads && c.authTokenFile == "":
		return errors.New("--auth-reads needs --auth-token-file: there is no token to require on reads")
	case c.readHeaderTimeout <= 0:
		return fmt.Errorf("--read-header-timeout %s: must be positive", c.readHeaderTimeout)
	case c.maxConnsPerClient < 0:
		return fmt.Errorf("--max-conns-per-client %d: must be 0 (unlimited) or more", c.maxConnsPerClient)
	}
	return nil
}

// listen opens the HTTP listener with the per-client connection cap, whose metrics
// (slide_http_conns_open, slide_http_conns_refused_total) go to reg.
func (c *serveConfig) listen(reg prometheus.Registerer) (*query.ClientLimitListener, error) {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, bindError("addr", c.addr, fmt.Errorf("listening on %s: %w", c.addr, err))
	}
	l := query.LimitPerClient(ln, c.maxConnsPerClient)
	if err := reg.Register(l); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("registering listener metrics: %w", err)
	}
	return l, nil
}

// newHTTPServer sets timeouts on every server: a slow client cannot hold a connection
// forever. readHeaderTimeout bounds the wait for a request header, counted from the accept
// (from the first byte for a keep-alive connection's later requests), so a slowloris
// trickling one byte at a time is cut off then; the body and the answer get 30 s each, an
// idle keep-alive connection 120 s.
func newHTTPServer(h http.Handler, readHeaderTimeout time.Duration, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serveUntilDone serves on ln until ctx ends (SIGTERM) or background work fails, then shuts
// down gracefully: the listener closes at once and in-flight requests get up to grace.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, background <-chan error, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var failed error
	select {
	case err := <-errc:
		return fmt.Errorf("serving HTTP: %w", err)
	case failed = <-background:
		log.Error("stopping", "err", failed)
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(failed, fmt.Errorf("shutting down HTTP: %w", err))
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(failed, fmt.Errorf("serving HTTP: %w", err))
	}
	log.Info("HTTP stopped; stopping ingest")
	return failed
}

// runDemo produces synthetic traffic to the topic until ctx ends.
func runDemo(ctx context.Context, c serveConfig, brokers []string, log *slog.Logger) error {
	gen, err := ingest.NewDemoGen(ingest.Demo{Keys: c.demoKeys, Rate: c.demoRate})
	if err != nil {
		return err
	}
	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: brokers, Topic: c.topic, Dialer: c.conn.kafkaDialer})
	if err != nil {
		return err
	}
	defer p.Close()
	log.Info("demo traffic", "rate", c.demoRate, "keys", c.demoKeys)
	_, err = gen.Run(ctx, func(evs []window.Event) error { return p.SendEvents(ctx, evs) })
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

func printDemoHelp(w io.Writer, addr string) {
	base := "http://" + addr
	fmt.Fprintf(w, `
slide is running with demo traffic (tenant-1 … tenant-3 are the heavy, slow ones).

  dashboard   %[1]s/
  metrics     %[1]s/metrics
  ready       %[1]s/readyz

Try, from another terminal:

  curl -s '%[1]s/v1/window?metric=latency_ms&key=tenant-1&window=5m&q=0.5,0.95,0.99'
  curl -s -i -X POST %[1]s/v1/allow -d '{"policy":"api","key":"tenant-1","cost":1}'
  ./bin/slide query top --addr %[1]s --metric latency_ms --by p95 --k 5

`, base)
}
