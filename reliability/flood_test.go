package reliability_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slide-metrics/slide/ingest"
)

// Cardinality flood: 5M events, each of a new key, against --max-series 10000. The store
// stops at the cap, every refusal is counted, memory stays within the cap's budget, and the
// series that existed before keep answering equal to the oracle, new events included.
func TestCardinalityFlood(t *testing.T) {
	const (
		maxSeries = 10_000
		flood     = 5_000_000
		perRecord = 1000 // NDJSON lines per Kafka record: the flood is cheap to produce
	)
	_, brokers := brokerProc(t)
	s := startSlide(t, "slide", brokers, "flood", "--max-series", strconv.Itoa(maxSeries), "--log-level", "warn")
	eventually(t, 20*time.Second, "slide never owned the partitions", func() bool { return s.caughtUp(t) || len(s.partitions(t)) == 4 })

	// Existing series: 100 keys with traffic before, during and after the flood.
	o := newOracle()
	tr := newTraffic(t, brokers, o, 100, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); tr.run(t, ctx, time.Hour, 5) }()
	eventually(t, 20*time.Second, "the first events never arrived", func() bool { return s.metric(t, "slide_ingest_series") == 100 })
	baseline, err := s.RSS()
	if err != nil {
		t.Fatal(err)
	}

	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: []string{brokers}, BatchSize: 10}) // a batch stays under the broker's 1 MiB message limit
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	sampleRSS := func() {
		if r, err := s.RSS(); err == nil {
			peak = max(peak, r)
		}
	}
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for rec := 0; rec < flood/perRecord; rec++ {
		buf := make([]byte, 0, perRecord*64)
		for i := rec * perRecord; i < (rec+1)*perRecord; i++ {
			buf = append(buf, `{"ts":`...)
			buf = append(buf, ts...)
			buf = append(buf, `,"metric":"latency_ms","key":"flood-`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `","value":1}`+"\n"...)
		}
		if err := p.Send(ctx, []byte("flood-"+strconv.Itoa(rec)), buf); err != nil {
			t.Fatal(err)
		}
		if rec%500 == 0 {
			sampleRSS()
		}
	}
	if err := p.Close(); err != nil || p.Stats().Failed != 0 {
		t.Fatalf("producing the flood: %v, %+v", err, p.Stats())
	}
	eventually(t, 2*time.Minute, "slide did not get through the flood", func() bool {
		sampleRSS()
		return s.caughtUp(t)
	})
	cancel()
	<-done
	tr.close(t)
	eventually(t, 30*time.Second, "slide did not catch up", func() bool { return s.caughtUp(t) })
	sampleRSS()

	series := s.metric(t, "slide_ingest_series")
	refused := s.metric(t, "slide_ingest_series_refused_total")
	rejected := s.metric(t, "slide_ingest_rejected_total", `reason="series_cap"`)
	if series != maxSeries {
		t.Errorf("%v series live, want the cap %d", series, maxSeries)
	}
	if want := float64(flood - (maxSeries - 100)); refused != want || rejected != want {
		t.Errorf("refused %v (store) and %v (series_cap), want %v each", refused, rejected, want)
	}
	checkAll(t, o, "5m", s)
	// The cap's memory: every admitted series full.
	budget := memoryBudget(baseline, maxSeries)
	if peak > budget {
		t.Errorf("peak RSS %d MiB over the budget %d MiB", peak>>20, budget>>20)
	}
	t.Logf("flood: %d new keys against --max-series %d: %.0f series live, %.0f refused and counted; RSS %d MiB before, peak %d MiB (budget %d MiB); the 100 existing keys (%d events) equal the oracle",
		flood, maxSeries, series, refused, baseline>>20, peak>>20, budget>>20, o.count())
}
