package query_test

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/window"
)

// FuzzQueryParams sends an arbitrary raw query string to every read route through the real
// handler chain (method check, readiness, parameter parsing, the store) and checks that the
// answer is 200, 400 or 404, never 500 and never a panic; that every body is JSON; and that
// a 400 is bad_parameter naming the parameter in "param" and in its message. The seed
// corpus is testdata/fuzz/FuzzQueryParams.
func FuzzQueryParams(f *testing.F) {
	f.Add("metric=latency_ms&key=tenant-1&window=5m&q=0.5,0.95,0.99")
	f.Add("metric=latency_ms&by=p95&k=3&key=tenant-*")
	f.Add("metric=latency_ms&limit=1&cursor=bGF0ZW5jeV9tcwB0ZW5hbnQtMQ")
	f.Add("metric=latency_ms&key=tenant-*&window=1m&step=30s&q=p99")
	f.Add(`metric=latency_ms&match=route="/pay",code=~"5.."&by=code&window=1m`)
	f.Add(`metric=latency_ms&key=tenant-1&match=code!~"2.*"&by=key,route&step=30s`)
	f.Add(`metric=latency_ms&match=__name__="x"&by=code,code`)
	f.Add(`metric=latency_ms&match=code=~"(",route=""&prefix=t`)
	e := newEnv(f, nil)
	e.seed(
		event{ts: t0, key: "tenant-1", metric: "latency_ms", value: 87.5},
		event{ts: t0 - 60_000, key: "tenant-2", metric: "latency_ms", value: 912, count: 3},
		event{ts: t0, key: "a\x00b", metric: "latency_ms", value: 1},
		event{ts: t0, key: "tenant-1", metric: "cost", value: 2},
	)
	// A labelled series, by the store's own door.
	series, err := window.AppendSeries(nil, "tenant-1", []window.Label{{Name: "code", Value: "503"}, {Name: "route", Value: "/pay"}})
	if err != nil {
		f.Fatal(err)
	}
	if err := e.store.ObserveAt(t0, window.Event{TS: t0, Metric: "latency_ms", Key: string(series), Value: 900}); err != nil {
		f.Fatal(err)
	}
	h := e.srv.Handler()
	routes := []string{"/v1/window", "/v1/range", "/v1/top", "/v1/series", "/v1/metrics", "/v1/status"}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, path := range routes {
			req := httptest.NewRequest("GET", path, nil)
			req.URL.RawQuery = raw
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if !json.Valid(body) {
				t.Fatalf("GET %s?%q = %d with a body that is not JSON: %q", path, raw, rec.Code, body)
			}
			var a errorAnswer
			switch rec.Code {
			case 200:
				continue
			case 400:
				if err := json.Unmarshal(body, &a); err != nil || a.Error.Code != string(httperr.BadParameter) || a.Error.Param == "" ||
					!strings.Contains(a.Error.Message, "parameter "+strconv.Quote(a.Error.Param)) {
					t.Fatalf("GET %s?%q = 400 %s: want bad_parameter naming the parameter", path, raw, body)
				}
			case 404:
				if err := json.Unmarshal(body, &a); err != nil || a.Error.Code != string(httperr.NotFound) {
					t.Fatalf("GET %s?%q = 404 %s: want not_found", path, raw, body)
				}
			default:
				t.Fatalf("GET %s?%q = %d %s: want 200, 400 or 404", path, raw, rec.Code, body)
			}
		}
	})
}
