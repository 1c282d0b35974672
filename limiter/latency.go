package limiter

import (
	"math"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyVec is slide_limiter_backend_duration_seconds, a histogram by backend (redis,
// cluster), as prometheus.HistogramVec exposes it, with an Observe that has no word every
// core writes: prometheus.Histogram adds each observation to one count (with its hot
// index) that all the callers share, so under load every observation moves that cache
// line between cores. Here an observation goes to one of a few shards, picked at random
// (per-thread state: no shared write), and a scrape sums them. A forwarded decision
// observes its wait, and the shared count was a few percent of its CPU (#30).
//
// A scrape sums the shards without stopping observations: the count is the sum of the
// buckets it read (never out of step with them), the sum may hold an observation the
// buckets do not yet, or the reverse.
type latencyVec struct {
	desc           *prometheus.Desc
	buckets        []float64
	redis, cluster latencyHist
}

// latencyShards is how many shards a latencyHist spreads its observations over: enough
// that a few cores seldom pick the same one.
const latencyShards = 8

// latencyBuckets are the histogram's upper bounds, in seconds (+Inf implied).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}

// latencyHist is the histogram of one backend.
type latencyHist struct {
	vec     *latencyVec
	label   string
	created atomic.Int64 // unix ns of the first observation; 0: none yet (no series)
	shards  [latencyShards]latencyShard
}

// latencyShard is one shard of a latencyHist, a cache line of its own (two, with the
// adjacent-line prefetcher's pair).
type latencyShard struct {
	counts [12]atomic.Uint64 // by bucket, not cumulative: latencyBuckets then +Inf
	sum    atomic.Uint64     // float64 bits
	_      [128 - 13*8]byte
}

func newLatencyVec() *latencyVec {
	v := &latencyVec{
		desc: prometheus.NewDesc(MetricBackendSeconds,
			"Duration of one backend call (all the Redis, or all the cluster, policies of a request), in seconds.",
			[]string{"backend"}, nil),
		buckets: latencyBuckets,
	}
	v.redis.vec, v.redis.label = v, "redis"
	v.cluster.vec, v.cluster.label = v, "cluster"
	return v
}

// Observe adds one observation of s seconds.
func (h *latencyHist) Observe(s float64) {
	sh := &h.shards[rand.Uint32()%latencyShards]
	sh.counts[sort.SearchFloat64s(latencyBuckets, s)].Add(1) // the first bound ≥ s, as prometheus's
	for {
		old := sh.sum.Load()
		if sh.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+s)) {
			break
		}
	}
	if h.created.Load() == 0 {
		h.created.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// Describe is prometheus.Collector's.
func (v *latencyVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect is prometheus.Collector's: the series of each backend observed yet.
func (v *latencyVec) Collect(ch chan<- prometheus.Metric) {
	for _, h := range []*latencyHist{&v.redis, &v.cluster} {
		if created := h.created.Load(); created != 0 {
			ch <- h.metric(time.Unix(0, created))
		}
	}
}

// metric is h summed over its shards.
func (h *latencyHist) metric(created time.Time) prometheus.Metric {
	var counts [12]uint64
	var sum float64
	for i := range h.shards {
		sh := &h.shards[i]
		for b := range counts {
			counts[b] += sh.counts[b].Load()
		}
		sum += math.Float64frombits(sh.sum.Load())
	}
	cumulative := make(map[float64]uint64, len(h.vec.buckets))
	var n uint64
	for b, le := range h.vec.buckets {
		n += counts[b]
		cumulative[le] = n
	}
	n += counts[len(h.vec.buckets)]
	return prometheus.MustNewConstHistogramWithCreatedTimestamp(h.vec.desc, n, sum, cumulative, created, h.label)
}
