package cluster

import (
	"encoding/base64"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkClusterSeriesPage: GET /v1/series of one page of 100 series (every metric, from
// a cursor halfway through) from instance A of two on loopback holding 200,000 series
// between them (100,000 keys of latency_ms and of cost), one request at a time. It reports
// ms a page (ms/page) and the bytes of the peer's answers a page (peer_B/page); B/op and
// allocs/op count both instances, which share the process.
func BenchmarkClusterSeriesPage(b *testing.B) {
	two := benchCluster(b, 2, 100_000)
	cursor := base64.RawURLEncoding.EncodeToString([]byte("latency_ms\x00tenant-5"))
	u := two[0].srv.URL + "/v1/series?limit=100&cursor=" + cursor
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, DisableCompression: true}, Timeout: time.Minute}
	page := func() {
		resp, err := client.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(body) < 100*30 {
			b.Fatalf("%d %v: %.200s", resp.StatusCode, err, body)
		}
	}
	page()
	sent := two[1].sent.Load()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		page()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(elapsed.Seconds()*1e3/float64(b.N), "ms/page")
	b.ReportMetric(float64(two[1].sent.Load()-sent)/float64(b.N), "peer_B/page")
}
