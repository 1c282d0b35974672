package query

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slide-metrics/slide/sketch"
	"github.com/slide-metrics/slide/window"
)

// HistogramSpec exports the window of every series of one metric as a Prometheus native
// histogram, slide_window_values{metric,key,window}, read from the store at scrape time
// (--export-histograms "latency_ms:5m").
//
// When the metric's ring uses a native sketch kind ("native:5", which slide serve gives
// such metrics by default) its bins are the histogram's buckets, so the export is exact:
// histogram_quantile in Prometheus sees the same buckets a client_golang native histogram
// observing the raw values would have. Any other kind is re-bucketed into schema 5: each
// bin's representative value goes into the native bucket holding it, so a quantile's error
// is the sketch's own (1% for ddsketch:0.01) plus one schema-5 bucket (2.2%), about 3.2%
// before Prometheus' interpolation inside the bucket.
type HistogramSpec struct {
	Metric string
	Window time.Duration
}

// ParseHistogramSpecs reads --export-histograms: metric:window specs separated by ';' (or
// ','), e.g. "latency_ms:5m;cost:1h". An empty string is no spec. Whether the window fits
// the metric's ring is checked by New.
func ParseHistogramSpecs(s string) ([]HistogramSpec, error) {
	var out []HistogramSpec
	for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == ';' || r == ',' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, ':')
		if i < 0 {
			return nil, fmt.Errorf("%w %q: missing window (want metric:window, e.g. latency_ms:5m)", ErrExportSpec, part)
		}
		metric, win := strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		d, err := time.ParseDuration(win)
		if metric == "" || err != nil || d <= 0 {
			return nil, fmt.Errorf("%w %q: want metric:window with a positive window such as 5m", ErrExportSpec, part)
		}
		out = append(out, HistogramSpec{Metric: metric, Window: d})
	}
	return out, nil
}

// String formats the spec as ParseHistogramSpecs reads it.
func (h HistogramSpec) String() string { return h.Metric + ":" + formatDuration(h.Window) }

func (h HistogramSpec) validate(rc window.RingConfig) error {
	return ExportSpec{Metric: h.Metric, Window: h.Window, aggs: []aggSel{{kind: aggCount}}}.validate(rc)
}

// nativeMetric is one exported window as a native histogram; Write hands out the
// histogram built at collection time.
type nativeMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	h      *dto.Histogram
}

func (m *nativeMetric) Desc() *prometheus.Desc { return m.desc }

func (m *nativeMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	out.Histogram = m.h
	return nil
}

// spanBuilder turns ascending (bucket, count) pairs into native-histogram spans and deltas.
// Gaps of up to two empty buckets are filled with zero counts instead of opening a span,
// as client_golang does: a span costs more than two deltas.
type spanBuilder struct {
	spans  []*dto.BucketSpan
	deltas []int64
	last   int   // last bucket emitted
	prev   int64 // its count
	// pending bucket: re-bucketed bins can land several in one bucket
	key     int
	count   uint64
	pending bool
}

func (b *spanBuilder) add(key int, count uint64) {
	if b.pending && key == b.key {
		b.count += count
		return
	}
	b.flush()
	b.key, b.count, b.pending = key, count, true
}

func (b *spanBuilder) flush() {
	if !b.pending {
		return
	}
	b.pending = false
	if len(b.spans) == 0 || b.key-b.last-1 > 2 {
		off := int32(b.key)
		if len(b.spans) > 0 {
			off = int32(b.key - b.last - 1)
		}
		b.spans = append(b.spans, &dto.BucketSpan{Offset: &off, Length: new(uint32)})
	} else {
		for range b.key - b.last - 1 {
			b.deltas = append(b.deltas, -b.prev)
			b.prev = 0
			*b.spans[len(b.spans)-1].Length++
		}
	}
	b.deltas = append(b.deltas, int64(b.count)-b.prev)
	b.prev, b.last = int64(b.count), b.key
	*b.spans[len(b.spans)-1].Length++
}

// histogramSource is what one spec's bins need to become native buckets.
type histogramSource struct {
	ix     sketch.Indexer
	schema int32
	exact  bool
	keyer  sketch.NativeKeyer
}

func newHistogramSource(rc window.RingConfig) histogramSource {
	ix, _ := rc.Sketch.Indexer() // validated by the store
	src := histogramSource{ix: ix}
	if s, ok := sketch.NativeSchema(ix); ok {
		src.schema, src.exact = int32(s), true
	} else {
		src.schema, src.keyer = sketch.DefaultSchema, sketch.NewNativeKeyer(sketch.DefaultSchema)
	}
	return src
}

// histogram builds the native histogram of one window's bins.
func (src *histogramSource) histogram(a window.Agg, bins *sketch.Bins) *dto.Histogram {
	side := func(neg bool) ([]*dto.BucketSpan, []int64) {
		var b spanBuilder
		if src.exact {
			bins.EachBin(neg, b.add)
		} else {
			bins.EachBin(neg, func(i int, c uint64) { b.add(src.keyer.Key(src.ix.Value(i)), c) })
		}
		b.flush()
		return b.spans, b.deltas
	}
	count, sum, zero := a.Count, a.Sum, bins.ZeroCount()
	zt := src.ix.MinIndexableValue()
	schema := src.schema
	h := &dto.Histogram{SampleCount: &count, SampleSum: &sum, Schema: &schema, ZeroThreshold: &zt, ZeroCount: &zero}
	h.PositiveSpan, h.PositiveDelta = side(false)
	h.NegativeSpan, h.NegativeDelta = side(true)
	return h
}

// collectHistograms sends the native histograms of Config.ExportHistograms, taking series
// from budget, and returns how many it skipped for want of budget.
func (c *exportCollector) collectHistograms(ch chan<- prometheus.Metric, now int64, budget *int) int {
	skipped := 0
	var scratch sketch.Bins
	for _, spec := range c.s.cfg.ExportHistograms {
		src := newHistogramSource(c.s.store.RingConfig(spec.Metric))
		win := formatDuration(spec.Window)
		for _, key := range c.s.store.Keys(spec.Metric, "") {
			if *budget == 0 {
				skipped++
				continue
			}
			var h *dto.Histogram
			err := c.s.store.VisitWindowAt(now, spec.Metric, key, spec.Window, &scratch, func(a window.Agg, bins *sketch.Bins) {
				h = src.histogram(a, bins) // copied out under the lock, sent after it
			})
			if errors.Is(err, window.ErrNotFound) || h == nil {
				continue // evicted since Keys; the window was checked by New
			}
			*budget--
			ch <- &nativeMetric{desc: c.histogram, labels: prometheus.MakeLabelPairs(c.histogram, []string{spec.Metric, key, win}), h: h}
		}
	}
	return skipped
}
