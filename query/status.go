package query

import (
	"cmp"
	"encoding/json"
	"math"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/slide-metrics/slide/jsonenc"
)

// handleStatus serves GET /v1/status: what the dashboard shows about the engine itself,
// read from the server's own metrics (Config.Gatherer) and hooks, and answered while
// windows are being restored (it is how one watches the restore):
//
//	{"ready":false,"not_ready":"restoring windows from Kafka: ...","restoring_partitions":[3],"progress":{...},
//	 "ingest":{"lag_seconds":0.4,"lag_records":120,"series":40,"partitions":{"live":3,"restoring":1}},
//	 "limiter":[{"policy":"api","result":"allowed","count":12},...]}
//
// restoring_partitions (with Config.Restoring) lists the partitions being restored while
// the instance is ready ([] when none), restoring_limits (with Config.RestoringLimits) those
// whose limiter state is; progress is Config.Progress's value (null without one); lag_seconds is the largest
// slide_ingest_lag_seconds over partitions, lag_records the sum of slide_ingest_lag;
// limiter is slide_limiter_decisions_total by policy and result. Families the process does
// not have are absent. Its cost is one gather of the registry, exported windows included.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if _, err := parseParams(r.URL.RawQuery); err != nil {
		s.writeErr(w, r, err)
		return
	}
	b := []byte(`{"ready":`)
	var notReady error
	if s.cfg.Ready != nil {
		notReady = s.cfg.Ready()
	}
	if notReady == nil {
		b = append(b, `true,"not_ready":null`...)
	} else {
		b = append(b, `false,"not_ready":`...)
		b = jsonenc.AppendString(b, notReady.Error())
	}
	if s.cfg.Restoring != nil {
		b = appendPartitions(append(b, `,"restoring_partitions":`...), s.cfg.Restoring())
	}
	if s.cfg.RestoringLimits != nil {
		b = appendPartitions(append(b, `,"restoring_limits":`...), s.cfg.RestoringLimits())
	}
	b = append(b, `,"progress":`...)
	if s.cfg.Progress != nil {
		p, err := json.Marshal(s.cfg.Progress())
		if err != nil {
			p = []byte("null")
		}
		b = append(b, p...)
	} else {
		b = append(b, "null"...)
	}
	var families map[string]*dto.MetricFamily
	if s.cfg.Gatherer != nil {
		mfs, _ := s.cfg.Gatherer.Gather() // partial results are still worth showing
		families = make(map[string]*dto.MetricFamily, len(mfs))
		for _, mf := range mfs {
			families[mf.GetName()] = mf
		}
	}
	b = append(b, `,"ingest":{`...)
	first := true
	if mf := families["slide_ingest_lag_seconds"]; mf != nil {
		lag := 0.0
		for _, m := range mf.GetMetric() {
			lag = math.Max(lag, m.GetGauge().GetValue())
		}
		b = appendKey(b, "lag_seconds", first)
		b = jsonenc.AppendFloat(b, lag)
		first = false
	}
	if mf := families["slide_ingest_lag"]; mf != nil {
		b = appendKey(b, "lag_records", first)
		b = jsonenc.AppendFloat(b, sumValues(mf))
		first = false
	}
	if mf := families["slide_ingest_series"]; mf != nil {
		b = appendKey(b, "series", first)
		b = jsonenc.AppendFloat(b, sumValues(mf))
		first = false
	}
	if mf := families["slide_ingest_partitions"]; mf != nil {
		b = appendKey(b, "partitions", first)
		b = append(b, '{')
		for i, m := range mf.GetMetric() {
			b = appendKey(b, label(m, "state"), i == 0)
			b = jsonenc.AppendFloat(b, m.GetGauge().GetValue())
		}
		b = append(b, '}')
	}
	b = append(b, `},"limiter":[`...)
	if mf := families["slide_limiter_decisions_total"]; mf != nil {
		ms := slices.Clone(mf.GetMetric())
		slices.SortFunc(ms, func(x, y *dto.Metric) int {
			return cmp.Or(cmp.Compare(label(x, "policy"), label(y, "policy")), cmp.Compare(label(x, "result"), label(y, "result")))
		})
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"policy":`...)
			b = jsonenc.AppendString(b, label(m, "policy"))
			b = append(b, `,"result":`...)
			b = jsonenc.AppendString(b, label(m, "result"))
			b = append(b, `,"count":`...)
			b = jsonenc.AppendFloat(b, m.GetCounter().GetValue())
			b = append(b, '}')
		}
	}
	b = append(b, "]}\n"...)
	writeJSON(w, http.StatusOK, b)
}

// sumValues adds the gauge or counter values of every series of a family.
func sumValues(mf *dto.MetricFamily) float64 {
	t := 0.0
	for _, m := range mf.GetMetric() {
		t += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
	}
	return t
}

// label is the value of m's label name, "" when absent.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
