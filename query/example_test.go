package query_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// A server over a store, asked for the last minute of one series. The clock is fixed so
// the answer is too: 4 events in [07:59:40, 08:00:40), a rate over the 50 s elapsed, the
// median within 1% of 87.5 and q=1 the exact max.
func ExampleNew() {
	store, _ := window.NewStore(window.StoreConfig{})
	now := time.Date(2025, 11, 30, 8, 0, 30, 0, time.UTC)
	for i, v := range []float64{80, 95, 120, 87.5} {
		ts := now.Add(-time.Duration(i) * 7 * time.Second).UnixMilli()
		store.ObserveAt(now.UnixMilli(), window.Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: v})
	}
	srv, err := query.New(query.Config{Store: store, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	for _, path := range []string{
		"/v1/window?metric=latency_ms&key=tenant-42&window=1m&q=0.5,1",
		"/v1/window?metric=latency_ms&key=tenant-42&window=15s",
	} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", strings.ReplaceAll(string(body), `,"`, `, "`))
	}
	// Output:
	// 200 {"metric":"latency_ms", "key":"tenant-42", "window":"1m", "from":1764489580000, "to":1764489640000, "series":1, "count":4, "sum":382.5, "avg":95.625, "min":80, "max":120, "rate_per_s":0.08, "elapsed_s":50, "quantiles":{"0.5":86.95907464544571, "1":120}}
	// 400 {"error":{"code":"bad_parameter", "message":"parameter \"window\": 15s is not a multiple of the slot width 10s of metric \"latency_ms\"", "param":"window"}}
}

// The --export-windows syntax: specs separated by ';', metric:window[:aggregates].
func ExampleParseExportSpecs() {
	specs, err := query.ParseExportSpecs("latency_ms:5m:p95,p99,max;cost:1h:sum")
	if err != nil {
		panic(err)
	}
	for _, s := range specs {
		fmt.Println(s)
	}
	_, err = query.ParseExportSpecs("latency_ms:5m:median")
	fmt.Println(err)
	// Output:
	// latency_ms:5m:0.95,0.99,max
	// cost:1h:sum
	// bad export spec "latency_ms:5m:median": aggregate "median" is not count, sum, avg, min, max, rate or a quantile such as 0.95 (want metric:window[:aggregates], e.g. latency_ms:5m:0.95,0.99)
}
