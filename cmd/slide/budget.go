package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/window"
)

// budgetConfig holds the serve flags that bound what hostile or unlucky input can cost
// (issue #18), apart from serve.go so its wiring stays a few lines.
type budgetConfig struct {
	maxInflatedBytes int64
	limiterMaxBytes  int64
	maxSkew          time.Duration
}

func (b *budgetConfig) register(fs interface {
	DurationVar(*time.Duration, string, time.Duration, string)
	Var(flag.Value, string, string)
}) {
	bytesVar(fs, &b.maxInflatedBytes, "max-inflated-bytes", ingest.DefaultMaxInflatedBytes,
		"most one compressed Kafka record batch may inflate to; a batch beyond it (a compression bomb) is refused as too_large and dead-lettered as a pointer")
	bytesVar(fs, &b.limiterMaxBytes, "limiter-max-bytes", limiter.DefaultMaxBytes,
		"memory budget of each in-process limiter policy's keys, in bytes; when it holds only live state, new keys are decided by the policy's on_backend_error")
	fs.DurationVar(&b.maxSkew, "max-skew", 0,
		"how far an event may be ahead of now, how far a record's timestamp may disagree with this instance's clock before events are judged against the clock, and how far another instance's read time may (at least 1s; further off its peer read is refused) (0: one slot of each metric's ring)")
}

func (b *budgetConfig) check() error {
	switch {
	case b.maxInflatedBytes < 0:
		return fmt.Errorf("--max-inflated-bytes %d: must not be negative", b.maxInflatedBytes)
	case b.limiterMaxBytes < 0:
		return fmt.Errorf("--limiter-max-bytes %d: must not be negative", b.limiterMaxBytes)
	case b.maxSkew < 0:
		return fmt.Errorf("--max-skew %v: must not be negative", b.maxSkew)
	}
	return nil
}

// applySkew sets --max-skew on the default ring and every per-metric ring.
func (b *budgetConfig) applySkew(sc *window.StoreConfig) {
	if b.maxSkew == 0 {
		return
	}
	sc.Ring.Skew = b.maxSkew
	for m, rc := range sc.Metrics {
		rc.Skew = b.maxSkew
		sc.Metrics[m] = rc
	}
}
