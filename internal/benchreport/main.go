// Command benchreport turns `go test -bench` output into the tables of BENCHMARKS.md: every
// performance goal of the project is a ratio between our benchmark and an anchor measured in
// the same run, so the report pairs them and says whether each goal holds.
//
//	go test -run '^$' -bench . -benchmem ./... | go run ./internal/benchreport -extra extra.md > BENCHMARKS.md
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// goal compares a metric of two benchmarks as ours ÷ anchor, in the metric's own unit: for a
// cost (ns/op, bytes) lower is better and the goal is ratio ≤ bound; for a rate (req/s,
// events/s) higher is better and the goal is ratio ≥ bound.
type goal struct {
	issue, what    string
	ours, anchor   string  // benchmark names without the -GOMAXPROCS suffix
	unit           string  // "ns/op" (default), "B/op", or a custom b.ReportMetric unit
	higherIsBetter bool    // rate-like unit
	bound          float64 // the goal on ours ÷ anchor; 0 = just report it
	want           string  // the goal as the issue words it
	// fixed, when not 0, is the anchor as a number in the unit instead of a benchmark (anchor
	// is then empty): an absolute goal such as "≥ 1,000 MB/s" is ours ÷ fixed against bound 1.
	fixed float64
	// plus, for a cost, is an allowance in the unit on top of bound × anchor: "p99 ≤ 2× the
	// local read's + 1 ms" is bound 2, plus 1000 (p99_us). The ratio shown stays ours ÷ anchor.
	plus float64
}

var goals = []goal{
	{issue: "#2", what: "ingest into the store, existing series (count, sum, max, DDSketch)", ours: "BenchmarkObserve/ours", anchor: "BenchmarkObserve/anchor", bound: 3, want: "≤ 3× ddsketch.Add"},
	{issue: "#2", what: "5-minute p95 read, one series, through the store", ours: "BenchmarkWindowP95Store/ours", anchor: "BenchmarkWindowP95Store/anchor", bound: 0.1, want: "≥ 10× faster than merging 30 sketches"},
	{issue: "#2", what: "bytes per latency series, 30 full slots × 1,000 values", ours: "BenchmarkSeriesMemory/ours", anchor: "BenchmarkSeriesMemory/anchor", unit: "B/series", bound: 0.25, want: "≤ 0.25× 30 sketches-go sketches"},
	{issue: "#2", what: "sliding max, 10M values, k=1000", ours: "BenchmarkSlidingMax/ours", anchor: "BenchmarkSlidingMax/anchor", unit: "ns/elem", bound: 2, want: "≤ 2× a plain sum loop"},
	{issue: "#2", what: "sliding max vs the naive O(n·k) scan, k=1000", ours: "BenchmarkSlidingMax/ours", anchor: "BenchmarkSlidingMax/naive", unit: "ns/elem", bound: 0, want: "report the speed-up"},
	{issue: "#3", what: "memory token bucket decision", ours: "BenchmarkTokenBucketMemory/ours", anchor: "BenchmarkTokenBucketMemory/anchor", bound: 1, want: "no slower than x/time/rate AllowN"},
	{issue: "#3", what: "Redis decisions/s, 16 goroutines, one round trip each", ours: "BenchmarkRedisDecision/ours", anchor: "BenchmarkRedisDecision/anchor", unit: "decisions/s", higherIsBetter: true, bound: 1, want: "≥ redis_rate Allow"},
	{issue: "#3", what: "Redis decisions/s, both auto-pipelined", ours: "BenchmarkRedisDecision/ours_autopipelined", anchor: "BenchmarkRedisDecision/anchor_autopipelined", unit: "decisions/s", higherIsBetter: true, bound: 0, want: "stated"},
	{issue: "#3", what: "Redis decisions/s, ours pipelined 16 per call vs redis_rate", ours: "BenchmarkRedisDecision/ours_pipelined", anchor: "BenchmarkRedisDecision/anchor", unit: "decisions/s", higherIsBetter: true, bound: 0, want: "stated"},
	{issue: "#3", what: "hot key at 10× its limit: Redis calls per denied request", ours: "BenchmarkHotKey/with_deny_cache", anchor: "BenchmarkHotKey/without_deny_cache", unit: "redis_calls/denied", bound: 0.1, want: "≥ 10× fewer with the deny cache"},
	{issue: "#4", what: "end-to-end events/s, embedded broker → windows", ours: "BenchmarkEndToEnd/ours", anchor: "BenchmarkEndToEnd/anchor", unit: "events/s", higherIsBetter: true, bound: 0.6, want: "≥ 0.6× a bare kafka-go fetch loop"},
	{issue: "#19", what: "end-to-end events/s, embedded broker → windows (the consumer's own cost: join, restore search, decode, observe, bookkeeping)", ours: "BenchmarkEndToEnd/ours", anchor: "BenchmarkEndToEnd/anchor", unit: "events/s", higherIsBetter: true, bound: 0.95, want: "≥ 0.95× a bare kafka-go fetch loop"},
	{issue: "#19", what: "end-to-end CPU per op, the whole process (the embedded broker's share included)", ours: "BenchmarkEndToEnd/ours", anchor: "BenchmarkEndToEnd/anchor", unit: "cpu_ms/op", bound: 0, want: "stated: on a loaded machine the events/s ratio follows it"},
	{issue: "#4", what: "event decoding", ours: "BenchmarkDecode/ours", anchor: "BenchmarkDecode/anchor", bound: 0.2, want: "≥ 5× encoding/json, 0 allocs"},
	{issue: "#5", what: "/v1/window 5m p95 over loopback, 16 connections", ours: "BenchmarkHTTPWindow/ours", anchor: "BenchmarkHTTPWindow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.8, want: "≥ 0.8× /healthz"},
	{issue: "#5", what: "/v1/allow (memory policy) over loopback, 16 connections", ours: "BenchmarkHTTPAllow/ours", anchor: "BenchmarkHTTPAllow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.8, want: "≥ 0.8× /healthz"},
	{issue: "#12", what: "time to ready after a restart, 10M cost events of history in a partition", ours: "BenchmarkSnapshotRestore/snapshot", anchor: "BenchmarkSnapshotRestore/full_replay", unit: "s/ready", bound: 0.1, want: "≥ 10× faster with a snapshot than the full replay"},
	{issue: "#12", what: "time to ready with a snapshot, history doubled (10M vs 5M events, same keys)", ours: "BenchmarkSnapshotRestore/snapshot", anchor: "BenchmarkSnapshotRestore/snapshot_half", unit: "s/ready", bound: 1.2, want: "< 20% more"},
	{issue: "#12", what: "ingest events/s with snapshots every 1 s (30× the default: a bound, not the goal's setting) vs off, 100,000 series", ours: "BenchmarkSnapshotIngest/ours", anchor: "BenchmarkSnapshotIngest/anchor", unit: "events/s", higherIsBetter: true, bound: 0, want: "stated (the goal is the 30 s pair)"},
	{issue: "#12", what: "ingest events/s with snapshots every 30 s vs off, 100,000 series (one measured round of snapshots charged per 30 s of ingest)", ours: "BenchmarkSnapshotIngest/ours_30s", anchor: "BenchmarkSnapshotIngest/anchor", unit: "events/s", higherIsBetter: true, bound: 0.9, want: "≥ 0.9× with snapshots off"},
	{issue: "#16", what: "slide batch --group-by over 1,000 groups vs the same job without groups (row by row), CPU per row", ours: "BenchmarkBatchGroupBy/ours", anchor: "BenchmarkBatchGroupBy/anchor", unit: "cpu_ns/row", bound: 2, want: "≥ 0.5× the throughput without groups"},
	{issue: "#16", what: "slide batch --group-by over 1,000 groups vs the fast CSV path without groups", ours: "BenchmarkBatchGroupBy/ours", anchor: "BenchmarkBatchGroupBy/fast", unit: "ns/row", bound: 0, want: "stated"},
	{issue: "#16", what: "best sum of 1,000 over 1M rows: Parquet file vs the same rows as CSV", ours: "BenchmarkBatchParquet/ours", anchor: "BenchmarkBatchParquet/anchor", unit: "ns/row", bound: 0, want: "stated (the goal against DuckDB is in compare.sh)"},
	{issue: "#13", what: "Redis Cluster (3 masters) decisions/s, 16 goroutines, vs one redis-server", ours: "BenchmarkRedisCluster/ours", anchor: "BenchmarkRedisCluster/anchor", unit: "decisions/s", higherIsBetter: true, bound: 0.9, want: "≥ 0.9× single node"},
	{issue: "#13", what: "Redis CPU per decision, cluster (sum of 3 masters) vs one redis-server", ours: "BenchmarkRedisCluster/ours", anchor: "BenchmarkRedisCluster/anchor", unit: "redis_cpu_us/decision", bound: 0, want: "stated"},
	{issue: "#13", what: "/v1/allow over HTTPS vs plain HTTP, 16 reused connections", ours: "BenchmarkHTTPSAllow/ours", anchor: "BenchmarkHTTPSAllow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.8, want: "≥ 0.8× plain HTTP"},
	{issue: "#11", what: "/v1/window one key from a non-owner, 3 instances on loopback", ours: "BenchmarkClusterWindow/ours", anchor: "BenchmarkClusterWindow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.4, want: "≥ 0.4× the local read"},
	{issue: "#11", what: "/v1/window one key from a non-owner, routed (--key-partitioner murmur2)", ours: "BenchmarkClusterWindow/ours_routed", anchor: "BenchmarkClusterWindow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.4, want: "≥ 0.4× the local read"},
	{issue: "#11", what: "/v1/window one key from a non-owner: p99", ours: "BenchmarkClusterWindow/ours", anchor: "BenchmarkClusterWindow/anchor", unit: "p99_us", bound: 2, plus: 1000, want: "≤ 2× local + 1 ms"},
	{issue: "#11", what: "/v1/window glob over 10,000 series on 3 instances", ours: "BenchmarkClusterGlob/ours", anchor: "BenchmarkClusterGlob/anchor", unit: "req/s", higherIsBetter: true, bound: 0.5, want: "≥ 0.5× one instance owning them all"},
	{issue: "#11", what: "/v1/allow with a usage rule on a non-owner", ours: "BenchmarkClusterAllow/ours", anchor: "BenchmarkClusterAllow/anchor", unit: "req/s", higherIsBetter: true, bound: 0.8, want: "≥ 0.8× the local decision"},
	// #30: a one-key read whose owner is known (--key-partitioner murmur2) is one hop.
	{issue: "#30", what: "/v1/window of one key another instance owns (one signed hop to the owner over a kept-alive connection, murmur2 declared), one read at a time, vs the same read of a key held locally, 2 instances on loopback: p99", ours: "BenchmarkClusterOneHop/ours", anchor: "BenchmarkClusterOneHop/anchor", unit: "p99_us", bound: 2, plus: 1000, want: "≤ 2× the local read's + 1 ms"},
	{issue: "#30", what: "the same pair: p50", ours: "BenchmarkClusterOneHop/ours", anchor: "BenchmarkClusterOneHop/anchor", unit: "p50_us", bound: 0, want: "stated"},
	{issue: "#6", what: "401 for a wrong token sharing 31 of 32 bytes vs none (constant time)", ours: "BenchmarkAuthorizeWrongToken/prefix31", anchor: "BenchmarkAuthorizeWrongToken/prefix0", bound: 0, want: "≈ 1: no timing leak"},
	{issue: "#18", what: "end-to-end events/s of zstd records, bounded decompression vs kafka-go's codecs", ours: "BenchmarkInflateEndToEnd/ours", anchor: "BenchmarkInflateEndToEnd/anchor", unit: "events/s", higherIsBetter: true, bound: 0.95, want: "≤ 5% slower"},
	{issue: "#18", what: "inflating a 1 MiB zstd batch, bounded reader vs kafka-go's", ours: "BenchmarkInflate/ours", anchor: "BenchmarkInflate/anchor", bound: 1.05, want: "≤ 5% slower"},
	{issue: "#18", what: "new-key limiter decisions, full store (idle keys make room) vs empty store", ours: "BenchmarkMemoryNewKeys/full", anchor: "BenchmarkMemoryNewKeys/empty", bound: 1.25, want: "≥ 0.8× the empty store's rate"},
	{issue: "#19", what: "bytes per sparse series (10 events), 1M series vs the same events in slots up front", ours: "BenchmarkSparseSeriesMemory/ours", anchor: "BenchmarkSparseSeriesMemory/anchor", unit: "B/series", bound: 0, want: "≤ 1 KB per series (TestSparseSeriesMemoryBudget holds it)"},
	{issue: "#19", what: "bytes per dense latency series (30 full slots × 1,000 values, slots behind the current one packed)", ours: "BenchmarkSeriesMemory/ours", anchor: "BenchmarkSeriesMemory/anchor", unit: "B/series", bound: 0.1, want: "≤ 0.1× 30 sketches-go sketches (TestDenseSeriesMemoryBudget holds it)"},
	{issue: "#19", what: "one event into an existing series vs a bare sketches-go Add", ours: "BenchmarkObserve/ours", anchor: "BenchmarkObserve/anchor", bound: 1, want: "≤ 1.0× ddsketch.Add, 0 allocs"},
	{issue: "#19", what: "one event into an existing series through ObserveFrom (ingest's per-event call) vs a bare sketches-go Add", ours: "BenchmarkObserve/from", anchor: "BenchmarkObserve/anchor", bound: 1, want: "≤ 1.0× ddsketch.Add, 0 allocs"},
	{issue: "#19", what: "5-minute p95 read of one series, 1M series vs 10k", ours: "BenchmarkScale/p95_1M", anchor: "BenchmarkScale/p95_10k", bound: 2, want: "≤ 2× the cost at 10k series"},
	{issue: "#19", what: "top over a metric per series, 1M series vs 10k", ours: "BenchmarkScale/top_1M", anchor: "BenchmarkScale/top_10k", unit: "ns/series", bound: 2, want: "≤ 2× the cost at 10k series"},
	{issue: "#19", what: "idle-series sweep per evicted series, 1M series vs 10k", ours: "BenchmarkScale/sweep_1M", anchor: "BenchmarkScale/sweep_10k", unit: "ns/series", bound: 2, want: "≤ 2× the cost at 10k series"},
	{issue: "#18", what: "new-key limiter decisions, store full of live keys (refused) vs empty store", ours: "BenchmarkMemoryNewKeys/full_live", anchor: "BenchmarkMemoryNewKeys/empty", bound: 0, want: "stated"},
	{issue: "#19", what: "memory token bucket decision on an existing key (ours includes the key's hash, shard lock and lookup; the anchor is one limiter, no key) vs x/time/rate AllowN, both at a fixed instant past the limit", ours: "BenchmarkTokenBucketMemory/ours", anchor: "BenchmarkTokenBucketMemory/anchor", bound: 0.5, want: "≤ 0.5× x/time/rate AllowN"},
	{issue: "#19", what: "the same decision and anchor timed in alternating bursts of 1,000 (fastest burst of each; the sequential pair above runs its two sides a second apart)", ours: "BenchmarkTokenBucketMemoryInterleaved", unit: "ours/anchor", fixed: 1, bound: 0.5, want: "≤ 0.5× x/time/rate AllowN"},
	{issue: "#14", what: "ShouldRateLimit over loopback gRPC, 16 streams, 1,000 random keys, Redis fixed window: decisions/s vs a bare INCRBY+EXPIRE server", ours: "BenchmarkShouldRateLimit/ours_random", anchor: "BenchmarkShouldRateLimit/anchor_random", unit: "decisions/s", higherIsBetter: true, bound: 0, want: "stated (the goal against envoyproxy/ratelimit is a side-by-side run)"},
	{issue: "#14", what: "ShouldRateLimit, random keys: p99 per call", ours: "BenchmarkShouldRateLimit/ours_random", anchor: "BenchmarkShouldRateLimit/anchor_random", unit: "p99_ms", bound: 0, want: "stated, next to Envoy's 20 ms filter timeout"},
	{issue: "#14", what: "ShouldRateLimit, random keys: redis-server CPU per decision", ours: "BenchmarkShouldRateLimit/ours_random", anchor: "BenchmarkShouldRateLimit/anchor_random", unit: "redis_cpu_us/decision", bound: 0, want: "stated (concurrent fixed-window calls share one script call, against a pipelined INCRBY+EXPIRE per call; ≤ 1× envoyproxy/ratelimit is a side-by-side run, README)"},
	{issue: "#14", what: "ShouldRateLimit, one hot key at 10× its limit: decisions/s", ours: "BenchmarkShouldRateLimit/ours_hot", anchor: "BenchmarkShouldRateLimit/anchor_hot", unit: "decisions/s", higherIsBetter: true, bound: 1, want: "≥ the bare INCRBY server (denials from the deny cache)"},
	{issue: "#14", what: "ShouldRateLimit, hot key: redis-server CPU per decision", ours: "BenchmarkShouldRateLimit/ours_hot", anchor: "BenchmarkShouldRateLimit/anchor_hot", unit: "redis_cpu_us/decision", bound: 0.5, want: "≤ 0.5× (most denials never reach Redis)"},
	{issue: "#14", what: "ShouldRateLimit, random keys, frames generator (one goroutine per HTTP/2 connection, pre-framed requests): decisions/s", ours: "BenchmarkShouldRateLimit/ours_random_frames", anchor: "BenchmarkShouldRateLimit/anchor_random_frames", unit: "decisions/s", higherIsBetter: true, bound: 0, want: "stated (against envoyproxy/ratelimit: README)"},
	{issue: "#14", what: "ShouldRateLimit, hot key, frames generator: decisions/s", ours: "BenchmarkShouldRateLimit/ours_hot_frames", anchor: "BenchmarkShouldRateLimit/anchor_hot_frames", unit: "decisions/s", higherIsBetter: true, bound: 1, want: "≥ the bare INCRBY server"},
	{issue: "#15", what: "/v1/range, 30 points of one series, vs one /v1/window read, loopback", ours: "BenchmarkHTTPRange/ours", anchor: "BenchmarkHTTPRange/anchor", unit: "req/s", higherIsBetter: true, bound: 0.5, want: "≥ 0.5× /v1/window"},
	{issue: "#19", what: "event decoding speed by CPU time, the benchmark's event mix (ours ÷ 1,000 MB/s)", ours: "BenchmarkDecode/ours", unit: "cpu_MB/s", higherIsBetter: true, fixed: 1000, bound: 1, want: "≥ 1 GB/s, 0 allocs per event (TestDecodeAllocs holds those)"},
	{issue: "#19", what: "event decoding speed by wall time (ours ÷ 1,000 MB/s)", ours: "BenchmarkDecode/ours", unit: "MB/s", higherIsBetter: true, fixed: 1000, bound: 0, want: "stated (wall time on a shared machine measures the others too)"},
	{issue: "#15", what: "protobuf scrape of 10,000 native histograms vs 10,000 gauges", ours: "BenchmarkScrapeHistograms/ours", anchor: "BenchmarkScrapeHistograms/anchor", bound: 2, want: "≥ 0.5× the gauges' speed"},
	{issue: "#27", what: "heap a series' three labels (route, method, code) add to it, 100k sparse series, over the same series with its key alone", ours: "BenchmarkLabelledSeriesMemory/ours", unit: "extra_B/series", fixed: 64, bound: 1, want: "≤ 64 bytes more (TestLabelledSeriesMemoryBudget holds it)"},
	{issue: "#27", what: "5-minute p95 read of match=route=\"/pay\",code=~\"5..\" over the 100k series of a metric (all selected) vs the glob read key=tenant-* of the same series, CPU per read", ours: "BenchmarkMatchRead/ours", anchor: "BenchmarkMatchRead/anchor", unit: "cpu_ns/op", bound: 2, want: "≤ 2× the glob read"},
	{issue: "#27", what: "the same match= read where it selects one series in eight vs the glob read of all 100k", ours: "BenchmarkMatchRead/ours_selective", anchor: "BenchmarkMatchRead/anchor_selective", unit: "cpu_ns/op", bound: 0, want: "stated"},
	{issue: "#27", what: "Selector.Match of a series of 4 labels against route=\"/pay\",span_kind!=\"SPAN_KIND_CLIENT\",code=~\"5..\" vs anchored regexps over LabelValue", ours: "BenchmarkSelectorMatch/example", anchor: "BenchmarkSelectorMatch/plain_regexp", bound: 0, want: "stated, 0 allocs (TestSelectorMatchAllocatesNothing holds it)"},
	{issue: "#27", what: "decoding an event with 3 labels (Append's layout, labels last) vs the same event without", ours: "BenchmarkDecodeShapes/labels", anchor: "BenchmarkDecodeShapes/exact", bound: 0, want: "stated, 0 allocs (TestDecodeLabelsAllocs holds it)"},
	// #27 §3: access logs and any JSON (--event-map)
	{issue: "#27", what: "Envoy Gateway's default JSON access log through --event-map envoy (a line of ~850 bytes, two events) vs the same two events as slide JSON through event.Decoder, per line", ours: "BenchmarkEventMap/ours", anchor: "BenchmarkEventMap/anchor", bound: 2, want: "≥ 0.5× the events/s of slide's own JSON, 0 allocs (TestMapAllocs holds it)"},
	// #27 §2, OTLP traces (event/otlp_timing_test.go): 16 records of 80 spans each, one op a record.
	{issue: "#27", what: "otlp_proto records into span events (wire scan) vs pdata's ProtoUnmarshaler and a walk over the spans reading the same fields", ours: "BenchmarkOTLPProto/ours", anchor: "BenchmarkOTLPProto/anchor", bound: 0.2, want: "≥ 5× the spans/s, 0 allocs per span (TestOTLPAllocs holds those)"},
	{issue: "#27", what: "the same, CPU per span (the anchor's garbage collection is its own)", ours: "BenchmarkOTLPProto/ours", anchor: "BenchmarkOTLPProto/anchor", unit: "cpu_ns/span", bound: 0.2, want: "≥ 5× the spans/s"},
	{issue: "#27", what: "the same pair timed in alternating bursts of 1,280 spans, the fastest burst of each (the anchor's garbage collection mostly outside them: the strict reading)", ours: "BenchmarkOTLPProtoInterleaved", unit: "ours/anchor", fixed: 1, bound: 0, want: "stated"},
	{issue: "#27", what: "otlp_json records into span events vs pdata's JSONUnmarshaler and the same walk", ours: "BenchmarkOTLPJSON/ours", anchor: "BenchmarkOTLPJSON/anchor", bound: 0.5, want: "≥ 2× the spans/s"},
	{issue: "#27", what: "the same, CPU per span", ours: "BenchmarkOTLPJSON/ours", anchor: "BenchmarkOTLPJSON/anchor", unit: "cpu_ns/span", bound: 0.5, want: "≥ 2× the spans/s"},
	{issue: "#27", what: "zipkin_json records (the same spans, written by the Collector's zipkin_json marshaler) into span events vs the Collector's zipkin receiver (contrib's zipkinv2 JSON unmarshaler into pdata) and the same walk", ours: "BenchmarkZipkinJSON/ours", anchor: "BenchmarkZipkinJSON/anchor", bound: 0.2, want: "≥ 5× the spans/s, 0 allocs per span (TestZipkinAllocs holds those)"},
	{issue: "#27", what: "zipkin_proto records (the same spans, the Collector's zipkin_proto marshaler) into span events vs the Collector's zipkin receiver (contrib's zipkinv2 proto3 unmarshaler into pdata) and the same walk", ours: "BenchmarkZipkinProto/ours", anchor: "BenchmarkZipkinProto/anchor", bound: 0.2, want: "≥ 5× the spans/s, 0 allocs per span (TestZipkinAllocs holds those)"},
	{issue: "#27", what: "end-to-end spans/s, 2,000 otlp_proto records of 80 spans from the embedded broker into the windows vs a bare kafka-go fetch loop over the same records", ours: "BenchmarkEndToEndSpans/ours", anchor: "BenchmarkEndToEndSpans/anchor", unit: "spans/s", higherIsBetter: true, bound: 0.9, want: "≥ 0.9× a bare kafka-go fetch loop"},
	{issue: "#27", what: "a record's 80 span events (3 series, stamped over the last minute) observed together (ObserveFromAll: a series locked and found once) vs one at a time (ObserveFrom)", ours: "BenchmarkObserveFromAll/ours", anchor: "BenchmarkObserveFromAll/anchor", bound: 0, want: "stated, 0 allocs; the same results and slots (TestObserveFromAllMatchesOneByOne)"},
	{issue: "#27", what: "the same, CPU per op (the embedded broker's share included)", ours: "BenchmarkEndToEndSpans/ours", anchor: "BenchmarkEndToEndSpans/anchor", unit: "cpu_ms/op", bound: 0, want: "stated: 80 spans a record, decoding and observing them is most of a record's cost"},
	{issue: "#27", what: "the same records' 80 span events, each with a trace id, observed by a store keeping exemplars (--exemplars: each slot's slowest span) vs one keeping none, CPU per event", ours: "BenchmarkExemplars/ours", anchor: "BenchmarkExemplars/anchor", unit: "cpu_ns/event", bound: 0, want: "stated, 0 allocs: what --exemplars adds to a span"},
	// #29: long windows in little memory (rings of several resolutions).
	{issue: "#29", what: "bytes per series holding 35 days of a sum-only metric (an event every 10 s) in the tiers 1h:6:none+1d:36 vs the same history in 10 s slots", ours: "BenchmarkTieredMemory/ours", anchor: "BenchmarkTieredMemory/anchor", unit: "B/series", bound: 0.001, want: "≤ 0.001× the 10 s slots"},
	{issue: "#29", what: "the same tiered series, absolute", ours: "BenchmarkTieredMemory/ours", unit: "B/series", fixed: 2048, bound: 1, want: "≤ 2 KB per series (TestTieredSeriesMemoryBudget holds it)"},
	// #28: PromQL on Prometheus' engine over the rings.
	{issue: "#28", what: "instant histogram_quantile(0.95, sum by (key) (rate(latency_ms[5m]))) over 1,000 series vs /v1/top by p95 over them, both through their handlers, CPU per query (the process's: garbage collection is charged to it); answered by the pushdown, the default", ours: "BenchmarkPromQLQuantile/ours", anchor: "BenchmarkPromQLQuantile/anchor", unit: "cpu_ns/op", bound: 3, want: "≤ 3× /v1/top by p95"},
	{issue: "#28", what: "the same, wall time per query", ours: "BenchmarkPromQLQuantile/ours", anchor: "BenchmarkPromQLQuantile/anchor", bound: 0, want: "stated"},
	{issue: "#28", what: "the same query on the engine (Config.DisablePushdown, --promql-pushdown=false) vs /v1/top by p95, CPU per query", ours: "BenchmarkPromQLQuantile/engine", anchor: "BenchmarkPromQLQuantile/anchor", unit: "cpu_ns/op", bound: 0, want: "stated (the goal's row is the default, pushed down)"},
	// #30: backend cluster, a decision forwarded to the key's owner.
	{issue: "#30", what: "a backend cluster decision forwarded to the key's owner (MACed frames over one signed stream per owner on loopback, batched, caller and owner in one process) vs a memory decision, CPU per decision, 64 goroutines per core", ours: "BenchmarkClusterDecision/ours", anchor: "BenchmarkClusterDecision/anchor", unit: "cpu_ns/op", bound: 5, want: "≤ 5× a local memory decision"},
	{issue: "#30", what: "an owner's decisions per CPU second with checkpoints every 1 s (100,000 live keys exported and encoded, one steady-state round's CPU charged per second) vs none", ours: "BenchmarkClusterCheckpoint/ours", anchor: "BenchmarkClusterCheckpoint/anchor", unit: "decisions/cpu_s", higherIsBetter: true, bound: 0.9, want: "≥ 0.9× without checkpoints"},
	// #29: plans, calendar windows, levels.
	{issue: "#29", what: "memory decision (Service) of a three-level fixed window (org/team/user) vs a one-level one, same key", ours: "BenchmarkLevels/ours", anchor: "BenchmarkLevels/anchor", unit: "cpu_ns/op", bound: 2, want: "≤ 2× (CPU per decision: the loop's thread, so a loaded machine's waits stay out)"},
	{issue: "#29", what: "the same on the bare memory limiter, without the Service's part of a decision", ours: "BenchmarkLevelsStore/ours", anchor: "BenchmarkLevelsStore/anchor", unit: "cpu_ns/op", bound: 0, want: "stated"},
	{issue: "#29", what: "Redis decision of a three-level fixed window (one script: three INCRBYs) vs a one-level one, one goroutine", ours: "BenchmarkLevelsRedis/ours", anchor: "BenchmarkLevelsRedis/anchor", bound: 2, want: "≤ 2×"},
	{issue: "#29", what: "memory decision (Service) of a key listed in a plans file of 1,000 keys and 2 globs vs the same decision without plans", ours: "BenchmarkPlanLookup/ours", anchor: "BenchmarkPlanLookup/anchor", unit: "cpu_ns/op", bound: 1.3, want: "≤ +50 ns (the difference stated in ns with the ratio; +50 ns is 1.3× of a ~170 ns decision)"},
	// #28 (r8-promcluster): a one-hour query_range beside a real Prometheus 2.42 holding the same hour.
	{issue: "#28", what: "one-hour query_range at 10 s steps over 1,000 series (sum by (key) of rate of _count, and histogram_quantile(0.95) by key: native buckets here, classic in Prometheus) over HTTP vs Prometheus 2.42 backfilled with the same events", ours: "BenchmarkQueryRangeVsPrometheus/ours", anchor: "BenchmarkQueryRangeVsPrometheus/anchor", bound: 1, want: "≤ 1× Prometheus"},
	// #29: levels on usage rules.
	{issue: "#29", what: "allowed decision of a three-level usage rule (sum over 1h; org and team each a read of the store's level index) vs a one-level one, same key, 300 series, CPU per check", ours: "BenchmarkRuleLevels/ours", anchor: "BenchmarkRuleLevels/anchor", unit: "cpu_ns/op", bound: 3, want: "≤ 3× (CPU per check: the loop's thread, so a loaded machine's waits stay out)"},
	{issue: "#29", what: "the same with an event under the key's team before each check (both levels fold their own series, 100 and 10: the index's cache missed) vs the event and a one-level check", ours: "BenchmarkRuleLevelsWritten/ours", anchor: "BenchmarkRuleLevelsWritten/anchor", unit: "cpu_ns/op", bound: 0, want: "stated"},
	{issue: "#29", what: "an event (ObserveFrom) into a series of a metric a rule with levels indexes (two prefixes) vs the same series unindexed", ours: "BenchmarkObserveLevels/ours", anchor: "BenchmarkObserveLevels/anchor", unit: "cpu_ns/op", bound: 0, want: "stated"},
}

// result is one benchmark's metrics by unit: the median over the rounds (runs) in the input.
type result map[string]float64

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func parse(r io.Reader, raw io.Writer) (map[string]result, []string, error) {
	runs := map[string]map[string][]float64{} // name → unit → one value per run
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(raw, line)
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, ok := runs[m[1]]; !ok {
			runs[m[1]] = map[string][]float64{}
			order = append(order, m[1])
		}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			runs[m[1]][f[i+1]] = append(runs[m[1]][f[i+1]], v)
		}
	}
	res := map[string]result{}
	for name, units := range runs {
		rr := result{}
		for u, vs := range units {
			rr[u] = median(vs)
		}
		res[name] = rr
	}
	return res, order, sc.Err()
}

// median of vs (vs is reordered).
func median(vs []float64) float64 {
	sort.Float64s(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

func main() {
	extra := flag.String("extra", "", "markdown file appended verbatim (e.g. the DuckDB comparison)")
	rawOut := flag.String("raw", "", "also copy the raw benchmark output to this file")
	cmd := flag.String("cmd", "make bench", "the command that reproduces the run, printed in the report")
	flag.Parse()
	raw := io.Discard
	if *rawOut != "" {
		f, err := os.Create(*rawOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		raw = f
	}
	res, order, err := parse(os.Stdin, raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading benchmark output:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `%s` on %s (%s/%s, %d CPUs, %s). Each goal is a ratio of two\n",
		*cmd, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "benchmarks measured side by side in this one run (each value the median of its rounds, ours and anchor measured in the same round);\nthe machine is shared, so absolute times mean little and the ratios are what we hold\nourselves to. An anchor marked (fixed) is an absolute figure the issue sets instead of a benchmark.\n\n")
	fmt.Fprintln(w, "| issue | what | ours | anchor | ours ÷ anchor | goal | holds |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	failed := 0
	for _, g := range goals {
		line, fail := g.row(res)
		fmt.Fprintln(w, line)
		if fail {
			failed++
		}
	}
	fmt.Fprintf(w, "\n## All results\n\n| benchmark | ns/op | B/op | allocs/op | other |\n|---|---|---|---|---|\n")
	for _, name := range order {
		r := res[name]
		var other []string
		for u, v := range r {
			if u != "ns/op" && u != "B/op" && u != "allocs/op" && u != "MB/s" {
				other = append(other, num(v)+" "+u)
			}
		}
		if v, ok := r["MB/s"]; ok {
			other = append(other, num(v)+" MB/s")
		}
		sort.Strings(other)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", name, num(r["ns/op"]), num(r["B/op"]), num(r["allocs/op"]), strings.Join(other, ", "))
	}
	if *extra != "" {
		b, err := os.ReadFile(*extra)
		if err == nil {
			fmt.Fprintf(w, "\n%s", b)
		}
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "benchreport: %d goal(s) not met this run\n", failed)
	}
}

// row is g's line in the goals table, and whether g was measured and missed.
func (g goal) row(res map[string]result) (line string, failed bool) {
	unit := g.unit
	if unit == "" {
		unit = "ns/op"
	}
	o, a := res[g.ours][unit], res[g.anchor][unit]
	anchor := ""
	if g.fixed != 0 {
		a, anchor = g.fixed, " (fixed)"
	}
	if o == 0 || a == 0 {
		return fmt.Sprintf("| %s | %s | – | – | – | %s | not measured |", g.issue, g.what, g.want), false
	}
	ratio := o / a
	holds := "yes"
	switch {
	case g.bound == 0:
		holds = "reported"
	case g.higherIsBetter && ratio < g.bound, !g.higherIsBetter && o > g.bound*a+g.plus:
		holds, failed = "**no**", true
	}
	shown := num(ratio) + "×"
	if !g.higherIsBetter && ratio < 1 {
		shown += fmt.Sprintf(" (%s× less)", num(1/ratio))
	}
	return fmt.Sprintf("| %s | %s | %s %s | %s %s%s | %s | %s | %s |", g.issue, g.what, num(o), unit, num(a), unit, anchor, shown, g.want, holds), failed
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
