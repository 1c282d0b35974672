// Package readgate caps the reads a server runs at once, as Prometheus'
// --query.max-concurrency caps its queries: a read that scans many series (a glob or a
// match= over 100,000 series, a long range, a PromQL query) can burn a core for its whole
// timeout, so N clients sending such reads at once would take every core from ingestion
// and the limiter on the same process. With a gate, at most Max run; the others wait in
// line until a slot frees or their context ends, and a wait that reaches the read's
// deadline is refused (ErrBusy), counted, and answered 503 with Retry-After by the caller.
//
// One gate is shared by every route that scans (slide serve: the /v1 reads and the
// Prometheus API), so the cap is the process's, not one per API. Cheap routes (probes,
// /metrics, the limiter's decisions) never pass through it.
package readgate

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrBusy is wrapped by Start's error when the read's deadline passed while it waited:
// every slot stayed busy with other reads. Its message names Config.Setting.
var ErrBusy = errors.New("readgate: every read slot busy")

// Config is what New needs.
type Config struct {
	// Max is how many reads run at once; at least 1.
	Max int
	// Setting names what sets Max (slide serve: "--read-max-concurrency"), so that a refused
	// read's message says what to raise.
	Setting string
	// Registerer takes the gate's metrics (slide_http_reads_*); nil registers none.
	Registerer prometheus.Registerer
}

// Gate admits at most Config.Max reads at once. Safe for concurrent use; build it with
// New. Start costs a channel send when a slot is free.
type Gate struct {
	slots   chan struct{}
	setting string
	running prometheus.Gauge
	queued  prometheus.Gauge
	refused prometheus.Counter
}

// New builds a gate and registers its metrics, all at 0 from the start (increase() reads
// nothing from a series' first sample, so a counter made by its first refusal would go
// unalerted).
func New(cfg Config) (*Gate, error) {
	if cfg.Max < 1 {
		return nil, fmt.Errorf("readgate: max %d: must be at least 1", cfg.Max)
	}
	if cfg.Setting == "" {
		cfg.Setting = "the gate's Max"
	}
	g := &Gate{
		slots:   make(chan struct{}, cfg.Max),
		setting: cfg.Setting,
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slide_http_reads_running",
			Help: "Reads that scan series (/v1/window, /v1/range, /v1/top, /v1/series, /v1/metrics, PromQL queries and listings) running now, at most slide_http_reads_max.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slide_http_reads_queued",
			Help: "Reads waiting for one of the slide_http_reads_max read slots.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slide_http_reads_refused_total",
			Help: "Reads answered 503 because they waited their whole timeout for a read slot, every one busy (raise --read-max-concurrency, or find the costly reads).",
		}),
	}
	if cfg.Registerer != nil {
		limit := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slide_http_reads_max",
			Help: "Reads that scan series allowed to run at once (--read-max-concurrency); more wait.",
		})
		limit.Set(float64(cfg.Max))
		for _, c := range []prometheus.Collector{g.running, g.queued, g.refused, limit} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("registering read gate metrics: %w", err)
			}
		}
	}
	return g, nil
}

// Max is how many reads run at once.
func (g *Gate) Max() int { return cap(g.slots) }

// Setting names what sets Max (Config.Setting), for messages.
func (g *Gate) Setting() string { return g.setting }

// Start waits for a slot until ctx ends and returns what gives it back (call it once,
// when the read ends). A wait ended by ctx's deadline returns an error wrapping ErrBusy
// (counted as refused); by its cancellation (the client left), ctx's error.
func (g *Gate) Start(ctx context.Context) (done func(), err error) {
	select {
	case g.slots <- struct{}{}:
		g.running.Inc()
		return g.done, nil
	default:
	}
	g.queued.Inc()
	defer g.queued.Dec()
	select {
	case g.slots <- struct{}{}:
		g.running.Inc()
		return g.done, nil
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		g.refused.Inc()
		return nil, fmt.Errorf("%w: all %d read slots stayed busy with other reads until this read's timeout; retry later, or raise %s", ErrBusy, cap(g.slots), g.setting)
	}
}

func (g *Gate) done() {
	g.running.Dec()
	<-g.slots
}
