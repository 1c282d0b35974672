package cluster

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkClusterOneHop: GET /v1/window (5m, p95) of one key, one request at a time over
// one keep-alive connection, from instance A of two on loopback that declare murmur2 and
// sign every peer request and answer with a group key (as production with --peer-key-file):
// ours reads a key instance B owns (one hop: A asks B alone), anchor a key A holds (no
// hop). Each reports the p50 and p99 of its per-read latencies (p50_us, p99_us). Goal
// (#30): ours p99 ≤ 2× the anchor's + 1 ms.
func BenchmarkClusterOneHop(b *testing.B) {
	key := bytes.Repeat([]byte("k"), MinPeerKeyBytes)
	two := benchClusterWith(b, 2, 1000, func(c *Config) { c.KeyPartitioner = "murmur2"; c.PeerKey = key })
	remote, local := "", ""
	for k := 0; remote == "" || local == ""; k++ {
		key := "tenant-" + strconv.Itoa(k)
		if int(partitionOf(key))%2 == 0 {
			local = cmpOr(local, key)
		} else {
			remote = cmpOr(remote, key)
		}
	}
	path := two[0].srv.URL + "/v1/window?metric=latency_ms&window=5m&q=0.95&key="
	b.Run("ours", func(b *testing.B) { sequential(b, path+remote, two[1]) })
	b.Run("anchor", func(b *testing.B) { sequential(b, path+local, two[1]) })
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sequential GETs u b.N times, one at a time over one keep-alive connection, and reports
// the median and 99th percentile of the reads' latencies (p50_us, p99_us), the peer
// requests peer received per read (hops/op) and the connections it accepted while timed
// (peer_conns: 0 when every hop rides a kept-alive connection).
func sequential(b *testing.B, u string, peer *instance) {
	b.Helper()
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		b.Fatal(err)
	}
	do := func() time.Duration {
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, %v: %s", resp.StatusCode, err, body)
		}
		return time.Since(start)
	}
	for range 50 { // warm the connections (client → A, A → B) and the pools
		do()
	}
	lat := make([]time.Duration, 0, b.N)
	asked, conns := peer.asked.Load(), peer.conns.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		lat = append(lat, do())
	}
	b.StopTimer()
	b.ReportMetric(float64(peer.asked.Load()-asked)/float64(b.N), "hops/op")
	b.ReportMetric(float64(peer.conns.Load()-conns), "peer_conns")
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*q))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.5), "p50_us")
	b.ReportMetric(at(0.99), "p99_us")
}
