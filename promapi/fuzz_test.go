package promapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzAPI sends arbitrary paths and query strings (what a client controls) to the API over
// a small demo store: every answer is one JSON object, "success" with 200 or "error" with
// the status of its errorType, never a panic or a body that does not parse.
func FuzzAPI(f *testing.F) {
	for _, s := range []string{
		"query?query=1%2B1",
		"query?query=histogram_quantile(0.95,sum+by+(key)(rate(latency_ms[5m])))&time=1800000004.5",
		"query?query=latency_ms_count&time=2027-01-15T08:00:00Z&timeout=1s",
		"query?query=sum(&time=x",
		"query_range?query=rate(latency_ms_count[1m])&start=1799999700&end=1800000004&step=10",
		"query_range?query=up&start=1&end=0&step=0",
		"query_range?query=latency_ms_max&start=-1e300&end=1e300&step=1e-9",
		"labels?match[]=latency_ms{route=~\"/p.*\"}",
		"label/key/values?match[]=errors_count&limit=1",
		"label/U__a_2e_b/values",
		"series?match[]={key=\"k0aa\"}&match[]=latency_ms_sum",
		"series",
		"metadata?metric=latency_ms&limit=-1",
		"query_exemplars?query=latency_ms",
		"query_exemplars?query=sum(&start=2&end=1",
		"format_query?query=sum(rate(latency_ms[5m]))by(key)>0",
		"parse_query?query=-sum_over_time(x[5m%2B1m]@start())[10m:1m]>bool+on(a)group_left(b)(y@1)",
		"status/buildinfo",
		"query?query=count_over_time(latency_ms_max[5m:1s])&lookback_delta=1m",
		"query_range?query=histogram_quantile(-1,sum+without(route)(increase(latency_ms[17s])))&start=1799999700&end=1800000004&step=7",
		"query_range?query=histogram_quantile(0.5,rate(latency_ms[1m]))&start=-9007199254740991&end=9007199254740991&step=900719925474099",
		"query?query=histogram_quantile(NaN,sum+by(route)(rate(latency_ms{key=~\"k.*\"}[100y])))&time=1800000004.5",
	} {
		f.Add(s)
	}
	d := newDemo(f, "native:5", 2, 2)
	a, err := New(Config{Store: d.store, Now: d.now_, Timeout: 500 * time.Millisecond, MaxSamples: 1_000_000})
	if err != nil {
		f.Fatal(err)
	}
	h := a.Handler()
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsAny(s, " #\x00\r\n") || !strings.HasPrefix("/api/v1/"+s, "/api/v1/") {
			return // not a request line a client can send
		}
		req, err := http.NewRequest(http.MethodGet, "http://x/api/v1/"+s, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect {
			return // the mux cleaning a path (/api/v1/. to /api/v1): no API answer
		}
		var body struct {
			Status    string
			ErrorType string
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %d, not JSON: %v: %.300s", s, rec.Code, err, rec.Body.String())
		}
		switch {
		case rec.Code == 200 && body.Status == "success":
		case body.Status == "error" && errStatus[body.ErrorType] == rec.Code:
		default:
			t.Fatalf("%s: %d %.300s", s, rec.Code, rec.Body.String())
		}
	})
}
