package promapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/slide-metrics/slide/window"
)

// exemplarResult is one series of a query_exemplars answer.
type exemplarResult struct {
	lset labels.Labels
	ex   []window.Exemplar
}

// queryExemplars is /api/v1/query_exemplars: the exemplars (window.Store.VisitExemplars,
// slide serve --exemplars: each slot's slowest span) of the series any selector of the
// query selects, with times in [start, end], as Prometheus answers it: one entry a series,
// {"seriesLabels":{…},"exemplars":[{"labels":{"trace_id":…,"span_id":…},"value":…,
// "timestamp":…}]}, sorted by the series' labels. The series that carry them are a slide
// metric's histogram M and its peak M_max (a slot's exemplar is the span behind its max);
// M_count and M_sum carry none, as a classic histogram's _count and _sum carry none.
// Through a cluster, every instance's (Cluster.VisitExemplars), a missing partition as any
// read's. At most Config.MaxExemplars exemplars, with a warning when it cuts. Start, end and
// query are checked as Prometheus checks them (400 bad_data).
func (a *API) queryExemplars(r *http.Request) ([]byte, notes, *apiError) {
	// listed reads start and end as a listing does: an absent bound is Prometheus' MinTime
	// or MaxTime, so only two given bounds can be out of order.
	q, aerr := a.listed(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	mint, maxt := q.mint, q.maxt
	if mint > maxt {
		return nil, notes{}, &apiError{errBadData, errors.New("end timestamp must not be before start timestamp")}
	}
	if aerr := checkQueryText(r.Form.Get("query")); aerr != nil {
		return nil, notes{}, aerr
	}
	expr, err := a.parser.ParseExpr(r.Form.Get("query"))
	if err != nil {
		return nil, notes{}, &apiError{errBadData, err}
	}
	_, ctx, done, aerr := a.bounds(r)
	if aerr != nil {
		return nil, notes{}, aerr
	}
	defer done()
	seen := map[string]bool{}
	var out []exemplarResult
	var warn []string
	total, limit := 0, a.cfg.MaxExemplars
	for _, ms := range parser.ExtractSelectors(expr) {
		err := q.eachExemplars(ctx, ms, func(lset labels.Labels, ex []window.Exemplar) bool {
			k := lset.String()
			if seen[k] {
				return true // another selector's series too: listed once, as Prometheus lists it
			}
			var in []window.Exemplar
			for _, e := range ex {
				if e.TS >= mint && e.TS <= maxt {
					in = append(in, e)
				}
			}
			if total+len(in) > limit {
				in = in[:limit-total]
				warn = []string{fmt.Sprintf("exemplars truncated at %d (promapi MaxExemplars): narrow the selectors or the range", limit)}
			}
			if len(in) > 0 {
				seen[k] = true
				total += len(in)
				out = append(out, exemplarResult{lset: lset, ex: in})
			}
			return warn == nil
		})
		if err != nil {
			return nil, notes{}, execError(err)
		}
		if warn != nil {
			break
		}
	}
	slices.SortFunc(out, func(x, y exemplarResult) int { return labels.Compare(x.lset, y.lset) })
	return appendExemplarResults(nil, out), notes{warn: warn}, nil
}

// eachExemplars calls fn with each series that ms select among the names that carry
// exemplars (a metric's histogram and its _max), with its label set and exemplars (fn must
// copy what it keeps of ex), until fn returns false.
func (q *querier) eachExemplars(ctx context.Context, ms []*labels.Matcher, fn func(lset labels.Labels, ex []window.Exemplar) bool) error {
	s, err := q.selectionOf(ctx, ms)
	if err != nil || s.none {
		return err
	}
	stop := stopper(ctx)
	lb := labels.NewScratchBuilder(8)
	for i, m := range s.metrics {
		if !s.kinds[i][kindHistogram] && !s.kinds[i][kindMax] {
			continue
		}
		stopped := false
		err := q.visitExemplars(ctx, m, &s, stop, func(series string, ex []window.Exemplar) bool {
			for _, k := range []kind{kindHistogram, kindMax} {
				if s.kinds[i][k] && !fn(labelsOf(&lb, m+kindSuffix[k], series), ex) {
					stopped = true
					return false
				}
			}
			return true
		})
		if stopped {
			return err
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// visitExemplars is window.Store.VisitExemplars at the querier's clock, through the
// cluster when the Queryable has one (as visit reads the slots).
func (q *querier) visitExemplars(ctx context.Context, metric string, s *selection, stop func() bool, fn func(series string, ex []window.Exemplar) bool) error {
	c := q.q.cluster
	if c == nil {
		q.q.store.VisitExemplars(q.wall, metric, s.sel, nil, stop, fn)
		return nil
	}
	missing, err := c.VisitExemplars(ctx, q.wall, metric, s.ms, fn)
	if err != nil {
		return err
	}
	return noteMissing(ctx, missing)
}

// appendExemplarResults writes the answer's data as Prometheus' codec writes an
// []exemplar.QueryResult: each exemplar's labels trace_id and span_id (lower-case hex, as
// the OpenTelemetry SDKs and Prometheus' OTLP receiver write them; span_id left out when
// the span had none), its value as a string and its time in seconds.
func appendExemplarResults(b []byte, rs []exemplarResult) []byte {
	b = append(b, '[')
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"seriesLabels":`...)
		b = appendLabels(b, r.lset)
		b = append(b, `,"exemplars":[`...)
		for j, e := range r.ex {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"labels":{`...)
			if e.SpanID != [8]byte{} {
				b = append(b, `"span_id":"`...)
				b = hex.AppendEncode(b, e.SpanID[:])
				b = append(b, `",`...)
			}
			b = append(b, `"trace_id":"`...)
			b = hex.AppendEncode(b, e.TraceID[:])
			b = append(b, `"},"value":`...)
			b = appendValue(b, e.Value)
			b = append(b, `,"timestamp":`...)
			b = appendTimestamp(b, e.TS)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, ']')
}
