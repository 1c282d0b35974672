package promapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
)

// The side by side of issue #28's Speed section: one hour of 1,000 series (250 keys × 4
// routes, 3 latencies a series every 10 s) held by slide (a ring of 10 s × 360 slots, as
// --rings latency_ms=10s:360) and by a real Prometheus 2.42 (Debian's), backfilled with
// `promtool tsdb create-blocks-from openmetrics` from the same events: a classic histogram
// (10 buckets from 10 ms to +Inf), _count and _sum, one sample every 10 s, as a scrape every
// 10 s of a client_golang histogram would have left. 2.42 cannot backfill native
// histograms, so its quantile reads the classic buckets; its rate reads the same counts.
const (
	rangeKeys   = 250
	rangeRoutes = 4
	rangePer    = 3 // latencies a series and slot
	rangeSlots  = 360
)

var rangeLE = []float64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000}

// rangeData fills store with the hour of slots ending at now (a slot boundary: the slot
// in progress is empty) and writes the same events as OpenMetrics text to w: each series'
// buckets, count and sum at every slot end, and zero at the retention's start (the
// counters' creation, where slide's series start).
func rangeData(tb testing.TB, store *window.Store, now int64, w io.Writer) {
	bw := bufio.NewWriterSize(w, 1<<20)
	fmt.Fprintln(bw, "# HELP latency_ms Latencies.\n# TYPE latency_ms histogram")
	rng := rand.New(rand.NewPCG(28, 1))
	cur := window.FloorDiv(now, 10_000)
	lo := cur - rangeSlots + 1
	buckets := make([]uint64, len(rangeLE))
	for k := range rangeKeys {
		key := fmt.Sprintf("k%03d", k)
		for r := range rangeRoutes {
			route := "/r" + strconv.Itoa(r)
			series, err := window.AppendSeries(nil, key, []window.Label{{Name: "route", Value: route}})
			if err != nil {
				tb.Fatal(err)
			}
			clear(buckets)
			var count uint64
			var sum float64
			emit := func(ts int64) {
				lbl := fmt.Sprintf(`key="%s",route="%s"`, key, route)
				sec := strconv.FormatFloat(float64(ts)/1000, 'f', 3, 64)
				for i, le := range rangeLE {
					fmt.Fprintf(bw, "latency_ms_bucket{%s,le=\"%g\"} %d %s\n", lbl, le, buckets[i], sec)
				}
				fmt.Fprintf(bw, "latency_ms_bucket{%s,le=\"+Inf\"} %d %s\n", lbl, count, sec)
				fmt.Fprintf(bw, "latency_ms_count{%s} %d %s\n", lbl, count, sec)
				fmt.Fprintf(bw, "latency_ms_sum{%s} %s %s\n", lbl, strconv.FormatFloat(sum, 'g', -1, 64), sec)
			}
			emit(lo * 10_000)
			for i := lo; i < cur; i++ {
				for range rangePer {
					v := math.Round(math.Exp(math.Log(80)+0.8*rng.NormFloat64())*1000) / 1000
					ts := i*10_000 + rng.Int64N(10_000)
					at := i*10_000 + 9_999 // as they arrive: slots pack behind
					if err := store.ObserveAt(at, window.Event{TS: ts, Metric: "latency_ms", Key: string(series), Value: v, Count: 1}); err != nil {
						tb.Fatal(err)
					}
					count++
					sum += v
					for j, le := range rangeLE {
						if v <= le {
							buckets[j]++
						}
					}
				}
				emit((i + 1) * 10_000)
			}
		}
	}
	fmt.Fprintln(bw, "# EOF")
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// rangeValues reads a matrix answer into "key@t" → value.
func rangeValues(tb testing.TB, body []byte) map[string]float64 {
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		for _, p := range s.Values {
			v, err := strconv.ParseFloat(fmt.Sprint(p[1]), 64)
			if err != nil {
				tb.Fatal(err)
			}
			out[fmt.Sprintf("%s@%v", s.Metric["key"], p[0])] = v
		}
	}
	return out
}

// BenchmarkQueryRangeVsPrometheus: a one-hour query_range at 10 s steps over the 1,000
// series, sum by (key) of the count's rate and histogram_quantile(0.95) by key, asked over
// HTTP by one client of slide's API (ours, in process on a loopback listener) and of a
// Prometheus 2.42 holding the same hour (anchor, its own process). One op is both queries.
// The goal (#28) is ours ≤ 1× anchor.
func BenchmarkQueryRangeVsPrometheus(b *testing.B) {
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		b.Fatal("prometheus is not installed: run `make deps` (as root it runs apt-get install prometheus)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		b.Fatal("promtool is not installed: run `make deps` (as root it runs apt-get install prometheus)")
	}
	now := window.FloorDiv(time.Now().UnixMilli(), 10_000) * 10_000
	store, err := window.NewStore(window.StoreConfig{Now: func() int64 { return now },
		Metrics: map[string]window.RingConfig{"latency_ms": {Slot: 10 * time.Second, Slots: rangeSlots}}})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	om := filepath.Join(dir, "hour.om")
	f, err := os.Create(om)
	if err != nil {
		b.Fatal(err)
	}
	rangeData(b, store, now, f)
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", om, data).CombinedOutput(); err != nil {
		b.Fatalf("promtool tsdb create-blocks-from openmetrics: %v\n%s", err, proctest.Tail(string(out), 20))
	}
	_ = os.Remove(om)
	addr, err := proctest.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	proctest.Start(b, "prometheus", prom, "--config.file="+cfg, "--storage.tsdb.path="+data,
		"--storage.tsdb.retention.time=30d", "--web.listen-address="+addr)
	anchorBase := "http://" + addr
	if err := proctest.WaitStatus(context.Background(), anchorBase+"/-/ready", 200, 60*time.Second); err != nil {
		b.Fatal(err)
	}
	api, err := New(Config{Store: store, Now: func() time.Time { return time.UnixMilli(now) }})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	b.Cleanup(srv.Close)

	end := now
	rng := url.Values{"start": {strconv.FormatFloat(float64(end-time.Hour.Milliseconds())/1000, 'f', 3, 64)},
		"end": {strconv.FormatFloat(float64(end)/1000, 'f', 3, 64)}, "step": {"10"}}
	client := &http.Client{Timeout: 5 * time.Minute} // one client for both, keeping its connections
	ask := func(base, q string) []byte {
		v := url.Values{"query": {q}}
		for k, x := range rng {
			v[k] = x
		}
		res, err := client.Get(base + "/api/v1/query_range?" + v.Encode())
		if err != nil {
			b.Fatalf("%s %s: %v", base, q, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d %v %.300s", base, q, res.StatusCode, err, body)
		}
		return body
	}
	queries := map[string][2]string{
		"ours":   {`sum by (key) (rate(latency_ms_count[1m]))`, `histogram_quantile(0.95, sum by (key) (rate(latency_ms[1m])))`},
		"anchor": {`sum by (key) (rate(latency_ms_count[1m]))`, `histogram_quantile(0.95, sum by (key, le) (rate(latency_ms_bucket[1m])))`},
	}
	bases := map[string]string{"ours": srv.URL, "anchor": anchorBase}
	// Both hold the same counts at the same instants: the rates agree point by point (the
	// first step after the hour's start has one sample, no rate).
	o, a := rangeValues(b, ask(srv.URL, queries["ours"][0])), rangeValues(b, ask(anchorBase, queries["anchor"][0]))
	if len(o) != rangeKeys*(rangeSlots-1) || len(a) != len(o) {
		b.Fatalf("points: ours %d, anchor %d, want %d", len(o), len(a), rangeKeys*(rangeSlots-1))
	}
	for k, v := range o {
		if w, ok := a[k]; !ok || math.Abs(v-w) > 1e-9*math.Abs(w) {
			b.Fatalf("%s: ours %v, anchor %v", k, v, w)
		}
	}
	for _, name := range []string{"ours", "anchor"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, q := range queries[name] {
					ask(bases[name], q)
				}
			}
		})
	}
}
