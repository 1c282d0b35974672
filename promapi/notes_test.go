package promapi

import (
	"net/url"
	"testing"
)

// TestInfosAsPrometheus: the engine's info annotations are answered as Prometheus 3 answers
// them, under "infos" (Grafana shows them), sorted and apart from the warnings. They were
// dropped, so max by (key) (latency_ms), a histogram, answered an empty vector and nothing
// saying why, where Prometheus says it ignored the histogram.
func TestInfosAsPrometheus(t *testing.T) {
	d := newDemo(t, "native:5", 2, 5)
	for _, off := range []bool{false, true} {
		srv := serveDemo(t, d, Config{DisablePushdown: off})
		for _, c := range []struct{ query, want string }{
			{`max by (key) (latency_ms)`, `{"status":"success","data":{"resultType":"vector","result":[]},"infos":["PromQL info: ignored histogram in max aggregation (1:15)"]}`},
			{`histogram_quantile(1.5, sum(rate(latency_ms_max[1m])))`, `{"status":"success","data":{"resultType":"vector","result":[]},"warnings":["PromQL warning: bucket label \"le\" is missing or has a malformed value of \"\" (1:25)","PromQL warning: quantile value should be between 0 and 1, got 1.5 (1:20)"],"infos":["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"latency_ms_max\" (1:34)"]}`},
		} {
			if got := get(t, srv.URL+"/api/v1/query?time=1800000004.5&query="+url.QueryEscape(c.query)); got != c.want {
				t.Errorf("%s (engine only: %v):\n got %s\nwant %s", c.query, off, got, c.want)
			}
		}
	}
}
