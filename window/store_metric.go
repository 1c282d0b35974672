package window

// Per-metric series counts: the labelled series of each metric (LabelledSeries), and each
// metric's live series and the new series StoreConfig.MaxSeriesPerMetric refused, which
// Metrics and MetricSeries list without walking the series.

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
)

// labelledCount is a metric's LabelledSeries.
type labelledCount struct{ atomic.Int64 }

// LabelledSeries is the number of live series of metric that have labels besides key.
// While it is 0, the series of a key are that one series: ReadSelected reads it with one
// lookup when its selector names one key (Selector.ExactKey).
func (s *Store) LabelledSeries(metric string) int {
	if v, ok := s.labelled.Load(metric); ok {
		return int(v.(*labelledCount).Load())
	}
	return 0
}

// noteLabelled adds d to metric's LabelledSeries; the store calls it when it creates or
// removes a series with labels.
func (s *Store) noteLabelled(metric string, d int64) {
	v, ok := s.labelled.Load(metric)
	if !ok {
		v, _ = s.labelled.LoadOrStore(metric, new(labelledCount))
	}
	v.(*labelledCount).Add(d)
}

// metricSeries is a metric's live series and the new series MaxSeriesPerMetric refused.
type metricSeries struct {
	n       int64
	refused uint64
	weight  int64 // a series' bytes when busy (TieredSeriesBytes of the metric's ring), for MaxBytes
}

// admitMetric counts a new series of metric, or, at MaxSeriesPerMetric (counting its
// refusal) or past MaxBytes, reports false. It is the new-series path's, never an existing
// series'.
func (s *Store) admitMetric(metric string) bool {
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	ms := s.perMetric[metric]
	if ms == nil {
		ms = &metricSeries{weight: int64(TieredSeriesBytes(*s.ringConfigOf(metric)))}
		if s.cfg.Exemplars {
			ms.weight += int64(ExemplarBytes(*s.ringConfigOf(metric)))
		}
		s.perMetric[metric] = ms
	}
	if s.cfg.MaxSeriesPerMetric > 0 && ms.n >= int64(s.cfg.MaxSeriesPerMetric) {
		ms.refused++
		return false
	}
	if s.cfg.MaxBytes > 0 && s.busyBytes+ms.weight > s.cfg.MaxBytes {
		if ms.n == 0 && ms.refused == 0 {
			delete(s.perMetric, metric) // as noteRemoved forgets it
		}
		return false
	}
	ms.n++
	s.busyBytes += ms.weight
	return true
}

// noteRemoved uncounts a series of metric that goes. A metric without series and never
// refused is forgotten, so that metric names sent once do not pile up.
func (s *Store) noteRemoved(metric string) {
	s.metricsMu.Lock()
	if ms := s.perMetric[metric]; ms != nil {
		s.busyBytes -= ms.weight
		if ms.n--; ms.n <= 0 && ms.refused == 0 {
			delete(s.perMetric, metric)
		}
	}
	s.metricsMu.Unlock()
}

// BusyBytes is what the store's series may take when busy, each at TieredSeriesBytes of its
// ring: the sum MaxBytes bounds.
func (s *Store) BusyBytes() int64 {
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	return s.busyBytes
}

// Caps returns the store's series cap (MaxSeries, its default when unset) and its byte
// budget (MaxBytes, 0: none): what Len and BusyBytes are held against.
func (s *Store) Caps() (maxSeries int, maxBytes int64) { return s.cfg.MaxSeries, s.cfg.MaxBytes }

// SeriesCap names the cap a new series meets (CapFor).
type SeriesCap uint8

// The caps of a store, in the order a new series meets them.
const (
	CapNone   SeriesCap = iota // a new series would be admitted
	CapSeries                  // MaxSeries: the store holds that many series
	CapMetric                  // MaxSeriesPerMetric: the metric holds that many
	CapBytes                   // MaxBytes: the series' busy weight would take BusyBytes past it
)

// CapFor says which cap a new series of metric would meet now, in the order ObserveAt
// checks them, with its limit (series, or bytes for CapBytes) and, for CapBytes, the
// series' weight; CapNone when it would be admitted. It explains a refusal after the fact,
// so series that came or went since may make it CapNone.
func (s *Store) CapFor(metric string) (which SeriesCap, limit, weight int64) {
	if s.count.Load() >= int64(s.cfg.MaxSeries) {
		return CapSeries, int64(s.cfg.MaxSeries), 0
	}
	s.metricsMu.Lock()
	defer s.metricsMu.Unlock()
	ms := s.perMetric[metric]
	if ms != nil && s.cfg.MaxSeriesPerMetric > 0 && ms.n >= int64(s.cfg.MaxSeriesPerMetric) {
		return CapMetric, int64(s.cfg.MaxSeriesPerMetric), 0
	}
	if s.cfg.MaxBytes <= 0 {
		return CapNone, 0, 0
	}
	if ms != nil {
		weight = ms.weight
	} else {
		weight = int64(TieredSeriesBytes(*s.ringConfigOf(metric)))
		if s.cfg.Exemplars {
			weight += int64(ExemplarBytes(*s.ringConfigOf(metric)))
		}
	}
	if s.busyBytes+weight > s.cfg.MaxBytes {
		return CapBytes, s.cfg.MaxBytes, weight
	}
	return CapNone, 0, 0
}

// EachMetricRefused calls fn with each metric of which MaxSeriesPerMetric refused a new
// series, and how many events it refused so (also counted in Stats' Refused), in no order:
// what slide_store_series_refused_total{metric} exports. A metric stays listed once it has
// been refused; metrics never at their cap are not listed.
func (s *Store) EachMetricRefused(fn func(metric string, refused uint64)) {
	type refusal struct {
		metric string
		n      uint64
	}
	var rs []refusal
	s.metricsMu.Lock()
	for m, ms := range s.perMetric {
		if ms.refused > 0 {
			rs = append(rs, refusal{m, ms.refused})
		}
	}
	s.metricsMu.Unlock()
	for _, r := range rs {
		fn(r.metric, r.n)
	}
}

// MetricCount is one metric of MetricSeries and how many live series it has.
type MetricCount struct {
	Metric string
	Series int
}

// MetricSeries lists every metric with live series and its series count, sorted by
// metric, from the counts the store keeps as series come and go: O(metrics·log metrics),
// whatever the number of series. ctx is checked once.
func (s *Store) MetricSeries(ctx context.Context) ([]MetricCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.metricsMu.Lock()
	out := make([]MetricCount, 0, len(s.perMetric))
	for m, ms := range s.perMetric {
		if ms.n > 0 {
			out = append(out, MetricCount{Metric: m, Series: int(ms.n)})
		}
	}
	s.metricsMu.Unlock()
	slices.SortFunc(out, func(a, b MetricCount) int { return strings.Compare(a.Metric, b.Metric) })
	return out, nil
}

// Metrics lists the metrics that have at least one series, sorted: like MetricSeries, from
// the store's counts, not a walk over its series (a PromQL query asks it once).
func (s *Store) Metrics() []string {
	s.metricsMu.Lock()
	out := make([]string, 0, len(s.perMetric))
	for m, ms := range s.perMetric {
		if ms.n > 0 {
			out = append(out, m)
		}
	}
	s.metricsMu.Unlock()
	slices.Sort(out)
	return out
}
