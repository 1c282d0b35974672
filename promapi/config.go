package promapi

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slide-metrics/slide/readgate"
	"github.com/slide-metrics/slide/window"
)

// Defaults of Config.
const (
	DefaultMaxSamples     = 50_000_000 // Prometheus' --query.max-samples default
	DefaultTimeout        = 2 * time.Minute
	DefaultMaxSeries      = 100_000
	DefaultMaxLabelValues = 10_000
	DefaultLookbackDelta  = 5 * time.Minute
	DefaultMaxConcurrent  = 20      // Prometheus' --query.max-concurrency default
	DefaultMaxExemplars   = 100_000 // Prometheus' --storage.exemplars.exemplars-limit default
)

// ErrConfig wraps every error of Config.Validate.
var ErrConfig = errors.New("promapi: bad config")

// Config is what New needs. Zero fields take the defaults.
type Config struct {
	// Store holds the rings queries read. Required.
	Store *window.Store
	// Now is the clock queries read at; default time.Now.
	Now func() time.Time
	// MaxSamples is the engine's cap on samples a query holds at once (the engine's
	// MaxSamples); default DefaultMaxSamples.
	MaxSamples int
	// Timeout bounds a query's evaluation; a request's timeout= may only shorten it;
	// default DefaultTimeout.
	Timeout time.Duration
	// MaxSeries caps the series one query's selectors read, all together (the engine's
	// per-query series limit and the Queryable's); default DefaultMaxSeries.
	MaxSeries int
	// MaxLabelValues caps what /api/v1/labels, /api/v1/label/NAME/values and
	// /api/v1/series list (a smaller limit= is honoured), with a warning when they cut;
	// default DefaultMaxLabelValues.
	MaxLabelValues int
	// MaxExemplars caps the exemplars one /api/v1/query_exemplars answers, with a warning
	// when it cuts; default DefaultMaxExemplars (what Prometheus keeps at all by default).
	MaxExemplars int
	// LookbackDelta is the engine's lookback for instant vectors; default 5m, Prometheus'.
	LookbackDelta time.Duration
	// MaxConcurrent caps the queries and listings evaluated at once, as Prometheus'
	// --query.max-concurrency does: each may hold up to MaxSamples and a core, so more wait
	// for a slot, up to Timeout, and then answer errorType "timeout". Default
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// Gate, when set, is the cap on concurrent reads this API shares with the server's other
	// reads (slide serve shares one with its /v1 reads: --read-max-concurrency), and
	// MaxConcurrent is not used. A query or listing waits for a slot as above; a wait that
	// reaches the timeout answers errorType "timeout" with Retry-After, naming the gate's
	// setting. Nil: a gate of MaxConcurrent of this API's own.
	Gate *readgate.Gate
	// Ready, when set, is asked before every request: an error answers 503 unavailable in
	// Prometheus' shape, "not ready: …" (slide serve: while windows are being restored).
	Ready func() error
	// Remote lists the partitions this instance does not hold (a cluster member's share of
	// the others); nil or empty: it holds every partition. When it lists any, a query would
	// read part of the data: it answers 503 unless the request says partial=allow, and then
	// carries a warning naming the missing partitions.
	Remote func() []int32
	// Cluster, when set, is how queries read every partition (cluster.Cluster): each
	// selector's series come from this instance's store and its peers', and Remote is not
	// asked. A partition no instance served answers 503 unavailable naming it, or with
	// partial=allow a warning.
	Cluster Cluster
	// DisablePushdown sends every query to the engine: without it, the quantile shape
	// histogram_quantile(φ, [sum by|without (…)] rate|increase(M[r])) over a slide metric's
	// histogram is answered without the engine, equal to its answer (see the package doc).
	DisablePushdown bool
	// Registerer takes the engine's metrics (prometheus_engine_*); nil registers nothing.
	Registerer prometheus.Registerer
	// Logger logs failed queries; nil discards.
	Logger *slog.Logger
}

// Validate reports a config New would refuse.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: no store", ErrConfig)
	case c.MaxSamples < 0:
		return fmt.Errorf("%w: max samples %d: must not be negative", ErrConfig, c.MaxSamples)
	case c.Timeout < 0:
		return fmt.Errorf("%w: timeout %s: must not be negative", ErrConfig, c.Timeout)
	case c.MaxSeries < 0:
		return fmt.Errorf("%w: max series %d: must not be negative", ErrConfig, c.MaxSeries)
	case c.MaxLabelValues < 0:
		return fmt.Errorf("%w: max label values %d: must not be negative", ErrConfig, c.MaxLabelValues)
	case c.MaxExemplars < 0:
		return fmt.Errorf("%w: max exemplars %d: must not be negative", ErrConfig, c.MaxExemplars)
	case c.LookbackDelta < 0:
		return fmt.Errorf("%w: lookback delta %s: must not be negative", ErrConfig, c.LookbackDelta)
	case c.MaxConcurrent < 0:
		return fmt.Errorf("%w: max concurrent %d: must not be negative", ErrConfig, c.MaxConcurrent)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxSamples == 0 {
		c.MaxSamples = DefaultMaxSamples
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxSeries == 0 {
		c.MaxSeries = DefaultMaxSeries
	}
	if c.MaxLabelValues == 0 {
		c.MaxLabelValues = DefaultMaxLabelValues
	}
	if c.MaxExemplars == 0 {
		c.MaxExemplars = DefaultMaxExemplars
	}
	if c.LookbackDelta == 0 {
		c.LookbackDelta = DefaultLookbackDelta
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
