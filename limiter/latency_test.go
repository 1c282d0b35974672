package limiter

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestLatencyVecExposesWhatAHistogramVecDoes: the sharded latency histogram gathers as
// prometheus's HistogramVec with the same buckets, fed the same observations (bounds
// included: a bucket counts what is ≤ its bound), count, sum and every bucket, and the
// backend never observed has no series.
func TestLatencyVecExposesWhatAHistogramVecDoes(t *testing.T) {
	ours := newLatencyVec()
	theirs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricBackendSeconds, Help: "h", Buckets: latencyBuckets}, []string{"backend"})
	obs := []float64{0, 1e-5, .0001, .00010001, .00025, .0007, .001, .003, .005, .02, .05, .09, .1, .25, .2500001, 3, 1e3}
	for i := range 40 { // spread over the shards
		for _, s := range obs {
			ours.cluster.Observe(s * float64(i%3))
			theirs.WithLabelValues("cluster").Observe(s * float64(i%3))
		}
	}
	got, want := gatherOne(t, ours), gatherOne(t, theirs)
	if len(got) != 1 || len(want) != 1 || got[0].GetLabel()[0].GetValue() != "cluster" {
		t.Fatalf("series: got %v, want %v", got, want)
	}
	g, w := got[0].GetHistogram(), want[0].GetHistogram()
	if g.GetSampleCount() != w.GetSampleCount() || math.Abs(g.GetSampleSum()-w.GetSampleSum()) > 1e-9*w.GetSampleSum() { // summed in another order
		t.Errorf("count %d sum %v, want %d and %v", g.GetSampleCount(), g.GetSampleSum(), w.GetSampleCount(), w.GetSampleSum())
	}
	if len(g.GetBucket()) != len(w.GetBucket()) {
		t.Fatalf("%d buckets, want %d", len(g.GetBucket()), len(w.GetBucket()))
	}
	for i, b := range w.GetBucket() {
		if gb := g.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
			t.Errorf("bucket le=%v: %d, want le=%v: %d", gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
}

func gatherOne(t *testing.T, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != MetricBackendSeconds || mfs[0].GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("gathered %v", mfs)
	}
	return mfs[0].GetMetric()
}
