package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
)

// testEvent is one produced event, kept for the oracle.
type testEvent struct {
	ts          int64
	key, metric string
	value       float64
}

func (e testEvent) line() string {
	return fmt.Sprintf(`{"ts":%d,"key":%q,"metric":%q,"value":%v}`, e.ts, e.key, e.metric, e.value)
}

// genEvents makes n events for keys tenant-0…tenant-(keys−1) over the 280 s before t0.
// Values are multiples of 1/4 below 2^20, so every sum is exact in any order.
func genEvents(rng *rand.Rand, t0 time.Time, n, keys int) []testEvent {
	evs := make([]testEvent, n)
	for i := range evs {
		evs[i] = testEvent{
			ts:     t0.UnixMilli() - rng.Int64N(280_000),
			key:    fmt.Sprintf("tenant-%d", rng.IntN(keys)),
			metric: []string{"latency_ms", "cost"}[rng.IntN(2)],
			value:  float64(1+rng.IntN(1<<18)) / 4,
		}
	}
	return evs
}

// records packs events into Kafka records keyed by event key: mostly one event a record,
// sometimes several NDJSON lines of one key in a record.
func records(rng *rand.Rand, evs []testEvent) []kafka.Message {
	var msgs []kafka.Message
	for i := 0; i < len(evs); {
		n := 1
		if rng.IntN(5) == 0 {
			n = 1 + rng.IntN(4)
		}
		lines := []string{evs[i].line()}
		j := i + 1
		for ; j < len(evs) && len(lines) < n; j++ {
			if evs[j].key != evs[i].key {
				break
			}
			lines = append(lines, evs[j].line())
		}
		msgs = append(msgs, kafka.Message{Key: []byte(evs[i].key), Value: []byte(strings.Join(lines, "\n") + "\n")})
		i = j
	}
	return msgs
}

// sortByKey groups events of a key together, so records() can pack NDJSON.
func sortByKey(evs []testEvent) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].key < evs[j].key })
}

func newTestStore(t testing.TB, maxSeries int) *window.Store {
	t.Helper()
	s, err := window.NewStore(window.StoreConfig{MaxSeries: maxSeries})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testConfig has short group timeouts so joins, leaves and rebalances take well under a second.
func testConfig(c *kafkatest.Cluster, group string) Config {
	return Config{
		Brokers:           []string{c.Addr},
		Topic:             c.Topic,
		Group:             group,
		CommitInterval:    50 * time.Millisecond,
		SessionTimeout:    2 * time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		RebalanceTimeout:  2 * time.Second,
		JoinGroupBackoff:  100 * time.Millisecond,
		MaxWait:           500 * time.Millisecond,
	}
}

// running is a consumer started in a goroutine; stop cancels it and waits for Run.
type running struct {
	*Consumer
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func start(t *testing.T, cfg Config, store *window.Store, t0 time.Time) *running {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	c, err := New(cfg, store, WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Consumer: c, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(15 * time.Second):
			r.err = errors.New("Run did not return 15 s after cancel")
		}
	})
	if r.err != nil {
		t.Errorf("Run: %v", r.err)
	}
}

// eventually polls cond every 10 ms until it holds or timeout passes (real brokers need
// real time for joins and fetches; the bound keeps failures fast).
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool, state ...func() string) {
	t.Helper()
	polltest.Eventually(t, timeout, 10*time.Millisecond, cond, func() string {
		var b strings.Builder
		b.WriteString("waiting for " + what)
		for _, f := range state {
			b.WriteString("\n" + f())
		}
		return b.String()
	})
}

// logEnd is the end offset of every partition of the cluster's topic.
func logEnd(t testing.TB, c *kafkatest.Cluster, topic string) map[int32]int64 {
	t.Helper()
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range c.Partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	cl := &kafka.Client{Addr: kafka.TCP(c.Addr)}
	if d := c.Dialer; d != nil {
		cl.Transport = &kafka.Transport{TLS: d.TLS, SASL: d.SASLMechanism}
	}
	resp, err := cl.ListOffsets(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, po := range resp.Topics[topic] {
		out[int32(po.Partition)] = po.LastOffset
	}
	return out
}

// progress describes the consumers' assignments for a failure message.
func progress(cs ...*running) func() string {
	return func() string {
		var b strings.Builder
		for i, r := range cs {
			fmt.Fprintf(&b, "consumer %d: %+v\n", i, r.Progress())
		}
		return b.String()
	}
}

// caughtUp reports whether the consumers together own every partition and have processed
// each up to the end of the log.
//
// The progress is read before the log end: read after it, a consumer that became ready in
// between (its plan waited for records produced meanwhile) was held to an end from before
// those records, and passed with none of them applied (TestRestorePlanRace, about once in
// a hundred runs under load).
func caughtUp(t *testing.T, c *kafkatest.Cluster, cs ...*running) bool {
	prs := make([]Progress, len(cs))
	for i, r := range cs {
		prs[i] = r.Progress()
	}
	end := logEnd(t, c, c.Topic)
	seen := map[int32]bool{}
	for _, pr := range prs {
		if !pr.Ready {
			return false
		}
		for _, p := range pr.Partitions {
			if seen[p.Partition] || p.Next < end[p.Partition] {
				return false
			}
			seen[p.Partition] = true
		}
	}
	return len(seen) == c.Partitions
}

// sum adds up every series of a collector (a counter or gauge vector).
func sum(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var total float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		total += pb.GetCounter().GetValue() + pb.GetGauge().GetValue()
	}
	return total
}

var testQs = []float64{0, 0.5, 0.95, 0.99, 1}

// checkOracle compares every series of store with the events, over the span each read
// reports: counts, sums, min and max exactly, quantiles within DDSketch's 1%.
func checkOracle(t *testing.T, store *window.Store, now time.Time, evs []testEvent) {
	t.Helper()
	type id struct{ metric, key string }
	bySeries := map[id][]testEvent{}
	for _, e := range evs {
		bySeries[id{e.metric, e.key}] = append(bySeries[id{e.metric, e.key}], e)
	}
	if got := store.Len(); got != len(bySeries) {
		t.Errorf("store has %d series, events have %d", got, len(bySeries))
	}
	for sid, es := range bySeries {
		a, err := store.ReadAt(now.UnixMilli(), sid.metric, sid.key, 5*time.Minute, testQs)
		if err != nil {
			t.Errorf("%v: %v", sid, err)
			continue
		}
		var vals []float64
		var sum float64
		for _, e := range es {
			if e.ts >= a.From && e.ts < a.To {
				vals = append(vals, e.value)
				sum += e.value
			}
		}
		slices.Sort(vals)
		if a.Count != uint64(len(vals)) || a.Sum != sum {
			t.Errorf("%v over [%d,%d): count %d sum %v, oracle %d %v", sid, a.From, a.To, a.Count, a.Sum, len(vals), sum)
			continue
		}
		if len(vals) == 0 {
			continue
		}
		if a.Min != vals[0] || a.Max != vals[len(vals)-1] {
			t.Errorf("%v: min %v max %v, oracle %v %v", sid, a.Min, a.Max, vals[0], vals[len(vals)-1])
		}
		for i, q := range testQs {
			exact := vals[int(q*float64(len(vals)-1))]
			if got := a.Quantiles[i]; math.Abs(got-exact) > 0.01*exact+1e-9 {
				t.Errorf("%v: q%v = %v, oracle %v (beyond 1%%)", sid, q, got, exact)
			}
		}
	}
}

func TestConsumerMatchesOracle(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 4)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(1, 1))
	before := genEvents(rng, t0, 3000, 40)
	sortByKey(before)
	c.Produce(t, records(rng, before)...)

	store := newTestStore(t, 0)
	r := start(t, testConfig(c, "oracle"), store, t0)
	if r.Ready() {
		t.Fatal("ready before joining the group")
	}
	eventually(t, 10*time.Second, "restore of the first 3000 events", func() bool { return caughtUp(t, c, r) }, progress(r))
	pr := r.Progress()
	if len(pr.Partitions) != 4 || pr.Generation == 0 {
		t.Fatalf("progress %+v: want 4 partitions in a generation", pr)
	}
	for _, p := range pr.Partitions {
		if !p.Restored || p.Done != 1 || p.From != 0 {
			t.Errorf("partition %+v: want restored from offset 0", p)
		}
	}
	checkOracle(t, store, t0, before)

	// Live events after the restore land in the same windows.
	after := genEvents(rng, t0, 2000, 40)
	c.Produce(t, records(rng, after)...)
	eventually(t, 10*time.Second, "the live events", func() bool { return caughtUp(t, c, r) }, progress(r))
	all := append(before, after...)
	checkOracle(t, store, t0, all)
	if got := sum(r.m.events); got != float64(len(all)) {
		t.Errorf("slide_ingest_events_total = %v, want %d", got, len(all))
	}
	if got := sum(r.m.rejected); got != 0 {
		t.Errorf("slide_ingest_rejected_total = %v, want 0", got)
	}
	if got := testutil.ToFloat64(r.m.series); got != float64(store.Len()) {
		t.Errorf("slide_ingest_series = %v, want %d", got, store.Len())
	}
}

// TestConsumerRestart stops a consumer mid-stream and starts a new one (a new process: a
// fresh store, the same group): its windows equal the oracle, nothing lost, nothing twice.
func TestConsumerRestart(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 4)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(2, 2))
	evs := genEvents(rng, t0, 6000, 30)
	msgs := records(rng, evs)

	first := newTestStore(t, 0)
	a := start(t, testConfig(c, "restart"), first, t0)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < len(msgs); i += 200 {
			c.Produce(t, msgs[i:min(i+200, len(msgs))]...)
		}
	}()
	eventually(t, 10*time.Second, "the first consumer to process some events", func() bool {
		return sum(a.m.events) >= 1000
	})
	a.stop(t) // mid-stream: the producer is still writing
	stoppedAt := sum(a.m.events)
	<-produced
	if stoppedAt >= float64(len(evs)) {
		t.Fatalf("first consumer saw all %v events before it was stopped: not mid-stream", stoppedAt)
	}
	second := newTestStore(t, 0)
	b := start(t, testConfig(c, "restart"), second, t0)
	eventually(t, 10*time.Second, "the second consumer to catch up", func() bool { return caughtUp(t, c, b) }, progress(b))
	checkOracle(t, second, t0, evs)
	// The replay re-read records the first consumer had committed: they are counted as
	// events again (windows are rebuilt) but were not refused, so nothing is skipped.
	if got := sum(b.m.events); got != float64(len(evs)) {
		t.Errorf("second consumer accepted %v events, want %d", got, len(evs))
	}
	for _, p := range b.Progress().Partitions {
		if p.From != 0 {
			t.Errorf("partition %d replayed from %d, want 0 (every record is within the restore span)", p.Partition, p.From)
		}
	}
}

// TestConsumerGroupRebalance runs two consumers in one group: the partitions split between
// them with no series on both; after one leaves, the other owns every partition and its
// windows equal the oracle.
func TestConsumerGroupRebalance(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 4)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(3, 3))
	evs := genEvents(rng, t0, 3000, 40)
	c.Produce(t, records(rng, evs)...)

	sa, sb := newTestStore(t, 0), newTestStore(t, 0)
	a := start(t, testConfig(c, "split"), sa, t0)
	eventually(t, 10*time.Second, "A to own all partitions", func() bool { return caughtUp(t, c, a) }, progress(a))
	b := start(t, testConfig(c, "split"), sb, t0)
	eventually(t, 15*time.Second, "A and B to split the partitions", func() bool {
		return len(a.Progress().Partitions) == 2 && len(b.Progress().Partitions) == 2 && caughtUp(t, c, a, b)
	}, progress(a, b))
	// Each store holds exactly the series of its partitions: together, all of them, once.
	if sa.Len()+sb.Len() != seriesCount(evs) || sa.Len() == 0 || sb.Len() == 0 {
		t.Errorf("A has %d series, B %d; want %d together, split", sa.Len(), sb.Len(), seriesCount(evs))
	}
	for _, m := range []string{"latency_ms", "cost"} {
		for _, k := range sa.Keys(m, "") {
			if slices.Contains(sb.Keys(m, ""), k) {
				t.Errorf("series %s/%s served by both A and B", m, k)
			}
		}
	}
	var ownedByA []testEvent
	partsA := map[int32]bool{}
	for _, p := range a.Progress().Partitions {
		partsA[p.Partition] = true
	}
	for _, e := range evs {
		if partsA[int32(murmurPartition(e.key, 4))] {
			ownedByA = append(ownedByA, e)
		}
	}
	checkOracle(t, sa, t0, ownedByA)

	b.stop(t) // graceful: B leaves the group, A is assigned B's partitions and replays them
	eventually(t, 15*time.Second, "A to own all partitions again", func() bool { return caughtUp(t, c, a) }, progress(a))
	checkOracle(t, sa, t0, evs)
	if g := testutil.ToFloat64(a.m.generations); g < 3 {
		t.Errorf("A joined %v generations, want at least 3 (alone, split, alone)", g)
	}
}

func seriesCount(evs []testEvent) int {
	type id struct{ metric, key string }
	seen := map[id]bool{}
	for _, e := range evs {
		seen[id{e.metric, e.key}] = true
	}
	return len(seen)
}

// murmurPartition is kafka-go's Murmur2Balancer choice for key among n partitions.
func murmurPartition(key string, n int) int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(key)}, parts...)
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Brokers: []string{"127.0.0.1:9092"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	bad := map[string]Config{
		"no brokers":        {},
		"empty broker":      {Brokers: []string{""}},
		"dlq is the topic":  {Brokers: ok.Brokers, DeadLetterTopic: "events"},
		"negative restore":  {Brokers: ok.Brokers, Restore: -time.Second},
		"negative key len":  {Brokers: ok.Brokers, MaxKeyLen: -1},
		"negative commit":   {Brokers: ok.Brokers, CommitInterval: -time.Second},
		"heartbeat ≥ sess.": {Brokers: ok.Brokers, HeartbeatInterval: 10 * time.Second},
		"negative bytes":    {Brokers: ok.Brokers, MaxBytes: -1},
		"negative final":    {Brokers: ok.Brokers, Snapshots: SnapshotConfig{Final: -time.Second}},
	}
	for name, cfg := range bad {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
	store := newTestStore(t, 0)
	if _, err := New(Config{}, store); err == nil {
		t.Error("New accepted a config without brokers")
	}
	if _, err := New(ok, nil); err == nil {
		t.Error("New accepted a nil store")
	}
	c, err := New(ok, store)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Brokers: ok.Brokers, Topic: "events", Group: "slide", Restore: 5*time.Minute + 10*time.Second,
		MaxKeyLen: 256, CommitInterval: time.Second, SessionTimeout: 10 * time.Second,
		HeartbeatInterval: time.Second, RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: time.Second,
		MaxWait: time.Second, MaxBytes: 10 << 20, MaxInflatedBytes: DefaultMaxInflatedBytes, RejectLogInterval: time.Second,
		Snapshots: SnapshotConfig{Topic: "events" + DefaultSnapshotTopicSuffix, ChunkBytes: DefaultSnapshotChunkBytes, Final: DefaultSnapshotFinal},
	}
	if fmt.Sprint(c.cfg) != fmt.Sprint(want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c.cfg, want)
	}
	if c.Ready() {
		t.Error("a consumer that never ran is ready")
	}
}

func TestRestoreSpan(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{
		"cost": {Slot: time.Minute, Slots: 60},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RestoreSpan(store), 5*time.Minute+10*time.Second; got != want {
		t.Errorf("RestoreSpan(default) = %v, want %v", got, want)
	}
	if got, want := RestoreSpan(store, "cost"), time.Hour+time.Minute; got != want {
		t.Errorf("RestoreSpan(cost) = %v, want %v", got, want)
	}
}

func TestRunTwice(t *testing.T) {
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}}, newTestStore(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run with a done context: %v", err)
	}
	if err := c.Run(ctx); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Run: %v, want ErrStarted", err)
	}
}

// TestRecordAllocs proves the per-record path (decode, checks, observe) allocates nothing
// once the record's series exist.
func TestRecordAllocs(t *testing.T) {
	store := newTestStore(t, 0)
	t0 := time.Now()
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}}, store, WithClock(func() time.Time { return t0 }))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := event.NewDecoder(event.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{id: 1, label: "1", dec: dec,
		events: c.m.events.WithLabelValues("1"), bytes: c.m.bytes.WithLabelValues("1"), lag: c.m.lag.WithLabelValues("1")}
	p.restored.Store(true)
	ms := t0.UnixMilli()
	m := &kafka.Message{Topic: "events", Partition: 1, Offset: 7, HighWaterMark: 100, Time: t0, Value: []byte(
		fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":87.5}`+"\n"+
			`{"key":"tenant-2","metric":"cost","value":3,"count":2}`, ms-1000))}
	ctx := context.Background()
	accepted := c.record(ctx, p, m, ms) // creates the two series
	allocs := testing.AllocsPerRun(1000, func() { accepted += c.record(ctx, p, m, ms) })
	if allocs != 0 {
		t.Fatalf("record allocates %v times per record for existing series, want 0", allocs)
	}
	const records = 1 + 1 + 1000 // the first call, AllocsPerRun's warm-up, the measured runs
	if a, err := store.ReadAt(ms, "cost", "tenant-2", 5*time.Minute, nil); err != nil || a.Count != 2*records {
		t.Fatalf("cost/tenant-2: %+v %v, want count %d", a, err, 2*records)
	}
	if accepted != 2*records {
		t.Errorf("record accepted %d events, want %d", accepted, 2*records)
	}
}

// TestConsumerStopCommitsAndLeaves: a graceful stop commits the processed offsets and
// leaves the group, so the next member is assigned every partition at once instead of
// after the departed member's session timeout.
func TestConsumerStopCommitsAndLeaves(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 4)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(4, 4))
	c.Produce(t, records(rng, genEvents(rng, t0, 1000, 20))...)
	cfg := testConfig(c, "leave")
	cfg.CommitInterval = time.Hour // only the stop commits
	cfg.SessionTimeout = 30 * time.Second
	cfg.RebalanceTimeout = 30 * time.Second
	a := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 10*time.Second, "A to catch up", func() bool { return caughtUp(t, c, a) }, progress(a))
	if out, err := json.Marshal(a.Progress()); err != nil || !bytes.Contains(out, []byte(`"ready":true,"generation":1,"partitions":[{"partition":0,"restored":true,"done":1,"from":0`)) {
		t.Errorf("Progress JSON %s, %v", out, err)
	}
	a.stop(t)

	end := logEnd(t, c, c.Topic)
	resp, err := (&kafka.Client{Addr: kafka.TCP(c.Addr)}).OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
		GroupID: "leave", Topics: map[string][]int{c.Topic: {0, 1, 2, 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[c.Topic] {
		if p.CommittedOffset != end[int32(p.Partition)] {
			t.Errorf("partition %d: committed %d, log end %d", p.Partition, p.CommittedOffset, end[int32(p.Partition)])
		}
	}

	began := time.Now()
	b := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 10*time.Second, "B to own every partition", func() bool { return caughtUp(t, c, b) }, progress(b))
	if waited := time.Since(began); waited > 5*time.Second {
		t.Errorf("B needed %v to be assigned: A did not leave the group (session timeout 30s)", waited)
	}
}

// TestRecordChecks drives the per-record checks with fixed instants: future and late are
// measured from the record's timestamp with each metric's own ring, and an event that left
// its window after it was produced is expired, not refused.
func TestRecordChecks(t *testing.T) {
	store, err := window.NewStore(window.StoreConfig{Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}}, store)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := event.NewDecoder(event.Config{})
	p := &partition{id: 0, label: "0", dec: dec}
	rec := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	recMs := rec.UnixMilli()
	minute := time.Minute.Milliseconds()
	tests := []struct {
		metric string
		ts     int64 // relative to the record's timestamp
		now    int64 // relative to the record's timestamp
		want   string
	}{
		{"latency_ms", -10 * minute, -10 * minute, "accepted"}, // a producer clock 10 min ahead: judged against now
		{"latency_ms", 0, 0, "accepted"},
		{"latency_ms", 5000, 0, "accepted"},                 // within the 10 s skew
		{"latency_ms", 15000, 0, "future"},                  // beyond it
		{"latency_ms", 15000, 15000, "accepted"},            // a producer clock 15 s behind (or lag): not ahead of now
		{"latency_ms", 26000, 15000, "future"},              // ahead of now too
		{"latency_ms", -6 * minute, 0, "late"},              // older than 5 min at the record's time
		{"cost", -30 * minute, 0, "accepted"},               // cost keeps an hour
		{"cost", 2 * minute, 0, "future"},                   // cost's skew is one 60 s slot
		{"cost", 2 * minute, 2 * minute, "accepted"},        // and a record 2 min behind now is judged against now
		{"cost", -61 * minute, 0, "late"},                   //
		{"latency_ms", -2 * minute, 10 * minute, "expired"}, // fine when produced, gone when read
		{"cost", -2 * minute, 10 * minute, "accepted"},      // the same delay is nothing to cost
		{"latency_ms", 0, -20 * minute, "store future"},     // the store's own check against now
	}
	for _, tt := range tests {
		before := map[string]float64{"late": sum(c.m.rejectedBy[event.ReasonLate]), "future": sum(c.m.rejectedBy[event.ReasonFuture]), "expired": sum(c.m.expired)}
		m := &kafka.Message{Time: rec, Value: fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":%q,"value":1}`, recMs+tt.ts, tt.metric)}
		acc := c.record(context.Background(), p, m, recMs+tt.now)
		got := "accepted"
		switch {
		case acc == 1:
		case sum(c.m.rejectedBy[event.ReasonLate]) > before["late"]:
			got = "late"
		case sum(c.m.rejectedBy[event.ReasonFuture]) > before["future"] && tt.ts <= 10000:
			got = "store future"
		case sum(c.m.rejectedBy[event.ReasonFuture]) > before["future"]:
			got = "future"
		case sum(c.m.expired) > before["expired"]:
			got = "expired"
		default:
			got = "dropped silently"
		}
		if got != tt.want {
			t.Errorf("%s ts %+d ms now %+d ms: %s, want %s", tt.metric, tt.ts, tt.now, got, tt.want)
		}
	}
}

// deadLetterGoroutines counts the goroutines writing dead letters.
func deadLetterGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "ingest.(*deadLetters).run")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestNewStartsNoGoroutine: a Consumer that is never Run (serve failing on a later flag, a
// test building one to check its config) leaves no dead-letter goroutine and writer behind;
// Run starts them and stops them when it returns.
func TestNewStartsNoGoroutine(t *testing.T) {
	before := deadLetterGoroutines()
	for range 3 {
		if _, err := New(Config{Brokers: []string{"127.0.0.1:1"}, DeadLetterTopic: "dlq"}, newTestStore(t, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if got := deadLetterGoroutines(); got != before {
		t.Fatalf("%d dead-letter goroutines after New without Run, want %d", got, before)
	}
	c, err := New(Config{Brokers: []string{"127.0.0.1:1"}, DeadLetterTopic: "dlq"}, newTestStore(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run with a done context: %v", err)
	}
	// Run has waited for the goroutine's done, which it closes in a defer on its way out: a
	// stack dump taken just then may still list it (seen once in CI under load), so its
	// leaving is polled for.
	polltest.Eventually(t, 10*time.Second, time.Millisecond, func() bool { return deadLetterGoroutines() == before }, func() string {
		return fmt.Sprintf("%d dead-letter goroutines after Run returned, want %d", deadLetterGoroutines(), before)
	})
}

// An idle partition is not an error: the broker answers a fetch that waited MaxWait without
// records with RequestTimedOut, which must not be logged as a failure, cause a reconnect, or
// delay the next record by the backoff.
func TestIdlePartitionsAreQuiet(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 2)
	cfg := testConfig(c, "idle")
	cfg.MaxWait = 100 * time.Millisecond
	var logs proctest.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t0 := time.Now()
	store := newTestStore(t, 0)
	r := start(t, cfg, store, t0)
	eventually(t, 10*time.Second, "the consumer to be ready", r.Ready, progress(r))
	time.Sleep(time.Second) // ten fetches per partition that find nothing
	rng := rand.New(rand.NewPCG(9, 9))
	evs := genEvents(rng, t0, 10, 1)
	c.Produce(t, records(rng, evs)...)
	eventually(t, 10*time.Second, "the events to arrive", func() bool { return caughtUp(t, c, r) }, progress(r))
	if s := logs.String(); s != "" {
		t.Errorf("idle partitions logged warnings:\n%s", s)
	}
}

// Records that land while a partition's restore is being planned are replayed, not skipped.
// The broker answers the log-start lookup (asked after the end) only once they are in, so
// the restore-start search sees a log longer than the end asked first. The replay must still
// start no later than the log end as it was before: when the end was read after records
// arrived, the replay started past them and they were never counted.
func TestRestorePlanRace(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(11, 11))
	evs := genEvents(rng, t0, 200, 5)
	sortByKey(evs)
	msgs := records(rng, evs)
	k := c.Kfake()
	var seen sync.Once
	k.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 || r.Topics[0].Partitions[0].Timestamp != -2 {
			return nil, nil, false
		}
		seen.Do(func() {
			produced := make(chan struct{})
			go func() { defer close(produced); c.ProduceTo(t, 0, msgs...) }()
			k.SleepControl(func() { <-produced })
		})
		return nil, nil, false
	})
	store := newTestStore(t, 0)
	r := start(t, testConfig(c, "plan-race"), store, t0)
	eventually(t, 10*time.Second, "the consumer to catch up", func() bool { return caughtUp(t, c, r) }, progress(r))
	checkOracle(t, store, t0, evs)
}

// TestProgressNamesOnlyAppliedRecords holds the reader/applier split to its promise: a
// partition's next offset (what /readyz shows, what is committed and snapshotted) never
// passes a record that is not yet in the windows. One key gets one event per record, so
// the series' count read after the progress is at least the records below its next, at
// every poll of a 20,000-record restore read in many chunks.
func TestProgressNamesOnlyAppliedRecords(t *testing.T) {
	t.Parallel()
	const records = 20_000
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	msgs := make([]kafka.Message, records)
	for i := range msgs {
		ts := t0.Add(-time.Duration(records-i) * time.Millisecond)
		msgs[i] = kafka.Message{Time: ts, Value: fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"latency_ms","value":1}`, ts.UnixMilli())}
	}
	c.ProduceRecords(t, 0, msgs...)
	store := newTestStore(t, 0)
	r := start(t, testConfig(c, "applied"), store, t0)
	polls, ahead := 0, 0
	eventually(t, 30*time.Second, "the restore", func() bool {
		pr := r.Progress()
		if len(pr.Partitions) != 1 {
			return false
		}
		next := pr.Partitions[0].Next
		var count uint64
		if a, err := store.ReadAt(t0.UnixMilli(), "latency_ms", "k", 5*time.Minute, nil); err == nil {
			count = a.Count
		}
		polls++
		if next > int64(count) {
			ahead++
			t.Errorf("progress at offset %d with %d records applied", next, count)
		}
		return next >= records
	}, progress(r))
	if a, err := store.ReadAt(t0.UnixMilli(), "latency_ms", "k", 5*time.Minute, nil); err != nil || a.Count != records {
		t.Errorf("after the restore: %+v %v, want %d events", a, err, records)
	}
	t.Logf("%d polls, %d ahead of the windows", polls, ahead)
}

// TestStopDoesNotWaitForAnIdleFetch: a stop or a rebalance ends a partition's fetch at once
// instead of waiting for the broker to answer a fetch on an idle partition (up to MaxWait).
// Before, each SIGTERM or rebalance held the partitions up to MaxWait (1 s in slide serve)
// before the final snapshot and the rejoin, all of it 503s for cluster reads of them
// (measured with two `slide serve` on `slide broker`: about 2 s of 503s for each SIGTERM).
func TestStopDoesNotWaitForAnIdleFetch(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 2)
	t0 := time.Now()
	c.Produce(t, kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"latency_ms","value":1}`, t0.UnixMilli()), Time: t0})
	cfg := testConfig(c, "idle-stop")
	cfg.MaxWait = 10 * time.Second // far longer than a stop may take
	a := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 10*time.Second, "the consumer to catch up", func() bool { return caughtUp(t, c, a) }, progress(a))
	began := time.Now()
	a.stop(t)
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("stopping a caught-up consumer took %v; its idle fetches (MaxWait %v) should end at once", took, cfg.MaxWait)
	}
}
