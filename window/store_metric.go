package window

// Per-metric series counts: the labelled series of each metric (LabelledSeries) and, under
// StoreConfig.MaxSeriesPerMetric, each metric's series and the new series its cap refused.

import "sync/atomic"

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

// metricSeries is a metric's series and the events its cap refused, under MaxSeriesPerMetric.
type metricSeries struct {
	n       atomic.Int64
	refused atomic.Uint64
}

// admitMetric counts a new series of metric against MaxSeriesPerMetric, or counts its
// refusal and reports false. It is the new-series path's, never an existing series'.
func (s *Store) admitMetric(metric string) bool {
	v, ok := s.perMetric.Load(metric)
	if !ok {
		v, _ = s.perMetric.LoadOrStore(metric, new(metricSeries))
	}
	ms := v.(*metricSeries)
	if ms.n.Add(1) > int64(s.cfg.MaxSeriesPerMetric) {
		ms.n.Add(-1)
		ms.refused.Add(1)
		return false
	}
	return true
}

// noteRemoved uncounts a series of metric that goes, under MaxSeriesPerMetric.
func (s *Store) noteRemoved(metric string) {
	if s.cfg.MaxSeriesPerMetric <= 0 {
		return
	}
	if v, ok := s.perMetric.Load(metric); ok {
		v.(*metricSeries).n.Add(-1)
	}
}

// EachMetricRefused calls fn with each metric of which MaxSeriesPerMetric refused a new
// series, and how many events it refused so (also counted in Stats' Refused), in no order:
// what slide_store_series_refused_total{metric} exports. A metric stays listed once it has
// been refused; metrics never at their cap are not listed.
func (s *Store) EachMetricRefused(fn func(metric string, refused uint64)) {
	s.perMetric.Range(func(k, v any) bool {
		if n := v.(*metricSeries).refused.Load(); n > 0 {
			fn(k.(string), n)
		}
		return true
	})
}
