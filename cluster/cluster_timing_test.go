package cluster

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// benchPartitions is the topic of the benchmarks: 8 partitions over 3 instances.
const benchPartitions = 8

// instance is one slide as serve.go wires it: a store, a Cluster, the query server with
// the cluster injected and the peer route beside it, on a loopback listener.
type instance struct {
	store *window.Store
	cl    *Cluster
	srv   *httptest.Server
	asked atomic.Int64 // peer requests this instance received
	conns atomic.Int64 // connections its server accepted
	sent  atomic.Int64 // bytes of the answers its peer route wrote
}

// countingWriter counts the bytes written through it into n.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	w.n.Add(int64(len(b)))
	return w.ResponseWriter.Write(b)
}

// partitionOf places keys as the Java client and slide produce do (murmur2).
func partitionOf(key string) int32 { return murmur2Partition(key, benchPartitions) }

var quotaRule = usage.Rule{Name: "quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1e12}

// benchCluster starts n instances splitting 8 partitions round robin (n = 1 owns them all
// and reads locally, as one slide does) and feeds each the events of its partitions: keys
// series of latency_ms with 20 events each over the last 5 minutes, and one cost event per key.
func benchCluster(b testing.TB, n, keys int, partitioner ...string) []*instance {
	b.Helper()
	return benchClusterWith(b, n, keys, func(c *Config) { c.KeyPartitioner = strings.Join(partitioner, "") })
}

// benchClusterWith is benchCluster with every instance's Config adjusted by mod.
func benchClusterWith(b testing.TB, n, keys int, mod func(*Config)) []*instance {
	b.Helper()
	ins := make([]*instance, n)
	owner := map[int32]string{}
	for i := range ins {
		st, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}}})
		if err != nil {
			b.Fatal(err)
		}
		in := &instance{store: st}
		var h atomic.Pointer[http.Handler]
		in.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == PeerPath {
				in.asked.Add(1)
				w = countingWriter{w, &in.sent}
			}
			(*h.Load()).ServeHTTP(w, r)
		}))
		in.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				in.conns.Add(1)
			}
		}
		in.srv.Start()
		b.Cleanup(in.srv.Close)
		addr := strings.TrimPrefix(in.srv.URL, "http://")
		var mine []int32
		for p := int32(0); p < benchPartitions; p++ {
			if int(p)%n == i {
				mine = append(mine, p)
				owner[p] = addr
			}
		}
		// A generous deadline: on a loaded machine a slow answer must count, not fail.
		cfg := Config{Store: st, Brokers: []string{"127.0.0.1:1"}, Advertise: addr, Timeout: 30 * time.Second, Local: func() []int32 { return mine }}
		mod(&cfg)
		in.cl, err = New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		checkers, err := usage.NewCheckers(st, []usage.Rule{quotaRule})
		if err != nil {
			b.Fatal(err)
		}
		usage.SetReader(checkers, in.cl)
		svc, err := limiter.NewService(limiter.Config{Checkers: checkers})
		if err != nil {
			b.Fatal(err)
		}
		qs, err := query.New(query.Config{Store: st, Cluster: in.cl, Allow: limithttp.AllowHandler(svc)})
		if err != nil {
			b.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(PeerPath, in.cl.PeerHandler())
		mux.Handle("/", qs.Handler())
		var hh http.Handler = mux
		h.Store(&hh)
		ins[i] = in
	}
	view := &View{Partitions: benchPartitions, Owner: owner, Members: n}
	now := time.Now().UnixMilli()
	for _, in := range ins {
		in.cl.view.Store(view)
		in.cl.OnGeneration(1, in.cl.cfg.Local()) // Local() from the view: true for one instance
	}
	for k := range keys {
		key := "tenant-" + strconv.Itoa(k)
		p := partitionOf(key)
		st := ins[int(p)%n].store
		for j := range 20 {
			ts := now - int64(j)*14_000
			if err := st.ObserveAt(now, window.Event{TS: ts, Metric: "latency_ms", Key: key, Value: float64(1 + (k*20+j)%997), Feed: window.FeedOf(p)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.ObserveAt(now, window.Event{TS: now, Metric: "cost", Key: key, Value: 1, Feed: window.FeedOf(p)}); err != nil {
			b.Fatal(err)
		}
	}
	return ins
}

// nonOwned is a key of the benchmark none of whose events instance 0 holds.
func nonOwned(b *testing.B, n int) string {
	for k := 0; ; k++ {
		key := "tenant-" + strconv.Itoa(k)
		if int(partitionOf(key))%n != 0 {
			return key
		}
	}
}

// load sends b.N requests from 16 goroutines over keep-alive connections and reports req/s
// and the 99th percentile latency (p99_us).
func load(b *testing.B, want int, newReq func() *http.Request) {
	b.Helper()
	const conns = 16
	tr := &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	do := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Do(newReq())
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != want {
			b.Errorf("status %d, want %d: %s", resp.StatusCode, want, body)
		}
		return time.Since(start), err
	}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() { _, _ = do() })
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	lat := make([][]time.Duration, conns)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range conns {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				d, err := do()
				if err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], d)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Nanoseconds())/1e3, "p99_us")
}

func get(u string) func() *http.Request {
	return func() *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }
}

// BenchmarkClusterWindow: GET /v1/window (5m, p95) of one key from an instance that holds
// none of it, three instances on loopback (ours: fanned out to both owners; ours_routed:
// with --key-partitioner murmur2, to the key's owner only), against the same read on one
// instance that holds every partition (anchor). Goal: ≥ 0.4× the anchor's req/s, p99 ≤ 2×
// + 1 ms.
func BenchmarkClusterWindow(b *testing.B) {
	three, routed, one := benchCluster(b, 3, 1000), benchCluster(b, 3, 1000, "murmur2"), benchCluster(b, 1, 1000)
	key := nonOwned(b, 3)
	path := "/v1/window?metric=latency_ms&window=5m&q=0.95&key=" + key
	b.Run("ours", func(b *testing.B) { load(b, 200, get(three[0].srv.URL+path)) })
	b.Run("ours_routed", func(b *testing.B) { load(b, 200, get(routed[0].srv.URL+path)) })
	b.Run("anchor", func(b *testing.B) { load(b, 200, get(one[0].srv.URL+path)) })
}

// BenchmarkClusterGlob: GET /v1/window of a glob over 10,000 series spread over three
// instances (ours) against one instance holding them all (anchor). Goal: ours ≥ 0.5×.
func BenchmarkClusterGlob(b *testing.B) {
	three, one := benchCluster(b, 3, 10_000), benchCluster(b, 1, 10_000)
	path := "/v1/window?metric=latency_ms&window=5m&q=0.95&key=tenant-*"
	b.Run("ours", func(b *testing.B) { load(b, 200, get(three[0].srv.URL+path)) })
	b.Run("anchor", func(b *testing.B) { load(b, 200, get(one[0].srv.URL+path)) })
}

// BenchmarkClusterAllow: POST /v1/allow with a usage rule for a key whose usage another
// instance holds (ours: this instance's part fresh, the peers' from the one-second cache)
// against the same decision on one instance holding every partition (anchor). Goal: ours
// ≥ 0.8× the anchor's req/s.
func BenchmarkClusterAllow(b *testing.B) {
	three, one := benchCluster(b, 3, 1000), benchCluster(b, 1, 1000)
	body := []byte(`{"policy":"quota","key":"` + nonOwned(b, 3) + `"}`)
	post := func(u string) func() *http.Request {
		return func() *http.Request {
			r, _ := http.NewRequest("POST", u, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
	}
	b.Run("ours", func(b *testing.B) { load(b, 200, post(three[0].srv.URL+"/v1/allow")) })
	b.Run("anchor", func(b *testing.B) { load(b, 200, post(one[0].srv.URL+"/v1/allow")) })
}
