package main

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/internal/logrepeat"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/clusterlimit"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"

	goredis "github.com/redis/go-redis/v9"
)

// The cluster reads usage rules with match: across instances (the groups op carries the
// matchers), so a rule's reader is a usage.SelectReader.
var _ usage.SelectReader = (*cluster.Cluster)(nil)

// limiter builds the POST /v1/allow handler, or nil when there are no policies or rules.
func (c *serveConfig) limiter(store *window.Store, reg prometheus.Registerer, log *slog.Logger, reader *clusterReader) (http.Handler, func(), error) {
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
	// An --rls-config of blocks and exemptions alone maps to no policy: no limiter
	// service, but Envoy's limit overrides still count in --redis.
	rlsOnly := len(policies) == 0 && len(rules) == 0
	if rlsOnly {
		if c.plans != "" {
			return nil, func() {}, fmt.Errorf("--plans: needs --policies (or --rls-config): a plan sets the numbers of policies and rules")
		}
		if c.rls.cfg == nil {
			return nil, func() {}, nil
		}
	}
	checkers, err := usage.NewCheckers(store, rules)
	if err != nil {
		return nil, func() {}, fmt.Errorf("usage rules: %w", err)
	}
	usage.SetReader(checkers, reader)
	cfg := limiter.Config{Policies: policies, Checkers: checkers, Registerer: reg, Logger: log,
		Memory: limiter.MemoryConfig{MaxBytes: c.budget.limiterMaxBytes}}
	var owned []limiter.Policy
	for _, p := range policies {
		if p.Backend == limiter.BackendCluster {
			owned = append(owned, p)
		}
	}
	if len(owned) > 0 {
		// Each key decided by the owner of its partition (limiter/clusterlimit); the cluster
		// is built after the limiter, so the backend reaches it through reader.
		if reader.limits, err = clusterlimit.New(clusterlimit.Config{Group: &reader.group, Policies: owned, Logger: log,
			Memory: cfg.Memory, Registerer: reg}); err != nil {
			return nil, func() {}, err
		}
		cfg.Cluster = reader.limits
	}
	closeFn := func() {}
	// go-redis logs each failed dial to stderr; through slog, at most one a second.
	goredis.SetLogger(redisLogger{log: log, every: rate.NewLimiter(1, 1), rep: logrepeat.New(time.Minute)})
	// Exported whatever the backend, as the limiter's other metrics are: 0 without a
	// Redis Cluster (alerts and the docs' table name it on every instance).
	onRedirect := redirectCounter(reg)
	client, err := c.conn.connectRedis(c.redis)
	if err != nil {
		return nil, func() {}, err
	}
	if client != nil {
		closeFn = func() { _ = client.Close() }
		backend, err := redislimit.New(client, redislimit.Config{OnRedirect: onRedirect})
		if err != nil {
			closeFn()
			return nil, func() {}, fmt.Errorf("--redis: %w", err)
		}
		cfg.Redis = backend
	}
	c.rls.redis = cfg.Redis // limit overrides count there too
	if rlsOnly {
		return nil, closeFn, nil
	}
	svc, err := limiter.NewService(cfg)
	if err != nil {
		closeFn()
		return nil, func() {}, err
	}
	if c.plans != "" {
		if err := svc.LoadPlans(c.plans); err != nil {
			closeFn()
			return nil, func() {}, fmt.Errorf("--plans: %w", err)
		}
		ctx, stop := context.WithCancel(context.Background())
		watchPlans(ctx, svc, c.plans, log)
		closeRedis := closeFn
		closeFn = func() { stop(); closeRedis() }
	}
	c.rls.svc = svc
	return limithttp.AllowHandler(svc), closeFn, nil
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
// listener's port); c is set before anything is served. It carries the backend of the
// policies with backend cluster too (nil without one), which reaches the cluster through
// group, set with c.
type clusterReader struct {
	c      *cluster.Cluster
	group  lateGroup
	limits *clusterlimit.Backend
}

// lateGroup is the cluster as clusterlimit sees it, set once the cluster is built.
type lateGroup struct{ *cluster.Cluster }

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
// at warn level, rate-limited, the same line at most once a minute (logrepeat: a Redis that
// is down fails every dial alike): the limiter's metrics count every failed decision already.
type redisLogger struct {
	log   *slog.Logger
	every *rate.Limiter
	rep   *logrepeat.Log
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := "redis: " + strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	if ok, held := l.rep.AllowIf(msg, l.every.Allow); ok {
		l.log.Warn(msg, l.rep.Attrs(held)...)
	}
}

// redirectCounter exports slide_limiter_redis_redirects_total{kind}: the MOVED and ASK replies
// of Redis Cluster nodes the backend followed, each kind at 0 from the start (so that an alert
// on increase() sees the first). A steady rate is a slot migration (ask) or a failover (moved)
// in progress; a decision that met one still counted once (limiter/redislimit's redirect.go).
func redirectCounter(reg prometheus.Registerer) func(kind string) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slide_limiter_redis_redirects_total",
		Help: "MOVED and ASK replies of Redis Cluster nodes that the limiter followed to the node they named, by kind (moved: a failover or a finished slot migration; ask: a slot being migrated).",
	}, []string{"kind"})
	ask, moved := c.WithLabelValues("ask"), c.WithLabelValues("moved")
	reg.MustRegister(c)
	return func(kind string) {
		if kind == "ask" {
			ask.Inc()
		} else {
			moved.Inc()
		}
	}
}
