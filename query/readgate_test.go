package query_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/readgate"
)

// TestReadsWaitForASlot: with one read slot (slide serve --read-max-concurrency 1), a
// scanning read held as it begins keeps the slot; a second /v1 read and a
// PromQL query (the gate is shared) wait for it, and after their timeout answer 503 with
// Retry-After naming the flag, while /healthz, /metrics and a limiter decision answer at
// once; the gauge and the counter show it. Without the gate every one of N costly reads
// ran at once, each up to 25 s of a core, and ingestion and the limiter starved.
func TestReadsWaitForASlot(t *testing.T) {
	e := allowEnv(t, func(c *query.Config) {
		g, err := readgate.New(readgate.Config{Max: 1, Setting: "--read-max-concurrency", Registerer: c.Registerer})
		if err != nil {
			t.Fatal(err)
		}
		// The timeout bounds the wait: short, so the waiting reads are refused soon. The
		// held read cannot end before they are, whatever the clock does.
		c.Reads, c.ReadTimeout = g, 100*time.Millisecond
		p, err := promapi.New(promapi.Config{Store: c.Store, Now: c.Now, Gate: g, Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.PromAPI = p.Handler()
	})
	for _, k := range []string{"tenant-1", "tenant-2", "tenant-3"} {
		e.seed(event{ts: t0, key: k, metric: "latency_ms", value: 5})
	}
	held, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool // only the first read holds: the others pass
	query.SetReadHook(e.srv, func() {
		if first.CompareAndSwap(false, true) {
			close(held)
			<-release
		}
	})
	firstDone := make(chan error, 1)
	go func() {
		res, err := http.Get(e.http.URL + "/v1/window?metric=latency_ms&key=tenant-*")
		if err == nil {
			res.Body.Close()
		}
		firstDone <- err
	}()
	<-held // the first read has the slot, and keeps it until release
	metric := func(name string) string {
		_, b, _ := e.do("GET", "/metrics", nil)
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				return f[1]
			}
		}
		return "absent"
	}
	if code, b, _ := e.do("GET", "/healthz", nil); code != 200 {
		t.Errorf("/healthz while the reads are busy: %d %s", code, b)
	}
	if code, a, _ := e.allow(`{"policies":["per-tenant","tenant-quota"],"key":"tenant-9"}`); code != 200 || !a.Allowed {
		t.Errorf("a limiter decision while the reads are busy: %d %+v", code, a)
	}
	if r := metric("slide_http_reads_running"); r != "1" {
		t.Errorf("slide_http_reads_running %s with one read held, want 1", r)
	}
	for _, path := range []string{"/v1/top?metric=latency_ms", "/api/v1/query?query=sum(latency_ms_count)"} {
		code, b, h := e.do("GET", path, nil)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") != "1" || !strings.Contains(string(b), "--read-max-concurrency") {
			t.Errorf("%s with the only slot held: %d %s (Retry-After %q), want 503 with Retry-After naming the flag", path, code, b, h.Get("Retry-After"))
		}
	}
	if r := metric("slide_http_reads_refused_total"); r != "2" {
		t.Errorf("slide_http_reads_refused_total %s after two reads waited too long, want 2", r)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if code, b, _ := e.do("GET", "/v1/top?metric=latency_ms", nil); code != 200 {
		t.Errorf("/v1/top once the slot is free: %d %s", code, b)
	}
	if r := metric("slide_http_reads_running"); r != "0" {
		t.Errorf("slide_http_reads_running %s after every read ended, want 0", r)
	}
}
