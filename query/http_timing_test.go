package query_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// loadConns is the load generator's concurrency: 16 goroutines, each keeping one
// keep-alive connection busy.
const loadConns = 16

// runLoad sends b.N requests built by newReq to srv from loadConns goroutines over a
// Transport with MaxConnsPerHost loadConns, and reports throughput (req/s) and the 99th
// percentile latency (p99_us). Every answer must have status want.
func runLoad(b *testing.B, srv *httptest.Server, want int, newReq func() *http.Request) {
	b.Helper()
	runLoadTLS(b, nil, want, newReq)
}

// runLoadTLS is runLoad with the client's TLS config for https:// requests.
func runLoadTLS(b *testing.B, tlsConf *tls.Config, want int, newReq func() *http.Request) {
	b.Helper()
	tr := &http.Transport{MaxConnsPerHost: loadConns, MaxIdleConnsPerHost: loadConns, DisableCompression: true, TLSClientConfig: tlsConf}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	do := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Do(newReq())
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != want {
			err = &statusError{resp.StatusCode, want}
		}
		return time.Since(start), err
	}
	// Open every connection before timing.
	var wg sync.WaitGroup
	for range loadConns {
		wg.Go(func() {
			if _, err := do(); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	lat := make([][]time.Duration, loadConns)
	var next atomic.Int64
	var failed atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range loadConns {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				d, err := do()
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				lat[g] = append(lat[g], d)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	p99 := all[min(len(all)-1, len(all)*99/100)]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99_us")
}

type statusError struct{ got, want int }

func (e *statusError) Error() string {
	return "status " + http.StatusText(e.got) + ", want " + http.StatusText(e.want)
}

// BenchmarkHTTPWindow: GET /v1/window for the 5-minute p95 of one full series over loopback
// (ours) against GET /healthz on the same server (anchor, the HTTP floor). Goal: ours ≥ 0.8×
// the anchor's req/s.
func BenchmarkHTTPWindow(b *testing.B) {
	e := newEnv(b, nil)
	// Five minutes of one series, 100 events per 10-second slot.
	for ts := t0; ts < t0+5*60_000; ts += 100 {
		e.clock.set(ts)
		if err := e.store.ObserveAt(ts, window.Event{TS: ts, Metric: "latency_ms", Key: "tenant-42", Value: float64(1 + (ts/100)%997)}); err != nil {
			b.Fatal(err)
		}
	}
	windowURL := e.http.URL + "/v1/window?metric=latency_ms&key=tenant-42&window=5m&q=0.95"
	healthURL := e.http.URL + "/healthz"
	get := func(u string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest("GET", u, nil)
			return req
		}
	}
	b.Run("ours", func(b *testing.B) { runLoad(b, e.http, 200, get(windowURL)) })
	b.Run("anchor", func(b *testing.B) { runLoad(b, e.http, 200, get(healthURL)) })
}

// BenchmarkHTTPAllow: POST /v1/allow with one memory policy through the query server
// (ours, behind the route's auth and metrics wrapper) against GET /healthz on the same
// server (anchor). Every request is admitted: the limit is far above the load. Goal: ours
// ≥ 0.8× the anchor's req/s.
func BenchmarkHTTPAllow(b *testing.B) {
	e := newEnv(b, func(c *query.Config) {
		svc, err := limiter.NewService(limiter.Config{
			Policies: []limiter.Policy{{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 1 << 40, RefillPerSecond: 1e6}},
			Clock:    c.Now,
		})
		if err != nil {
			b.Fatal(err)
		}
		c.Allow = limithttp.AllowHandler(svc)
	})
	allowURL, healthURL := e.http.URL+"/v1/allow", e.http.URL+"/healthz"
	body := []byte(`{"policy":"api","key":"tenant-42"}`)
	b.Run("ours", func(b *testing.B) {
		runLoad(b, e.http, 200, func() *http.Request {
			req, _ := http.NewRequest("POST", allowURL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			return req
		})
	})
	b.Run("anchor", func(b *testing.B) {
		runLoad(b, e.http, 200, func() *http.Request {
			req, _ := http.NewRequest("GET", healthURL, nil)
			return req
		})
	})
}
