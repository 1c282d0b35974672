package clusterlimit

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/limiter"
)

// TestCheckpointHandsKeysOver: over a real (embedded) broker, instance A owns every
// partition and decides; a rebalance hands them all to B. A writes each lost partition's
// final checkpoint and forgets its keys; B restores them before deciding and goes on
// exactly where A stopped. A key expired by then, or of a policy that differs at B, is
// not restored.
func TestCheckpointHandsKeysOver(t *testing.T) {
	broker := kafkatest.Start(t, "events", 6)
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.SlidingLog, Limit: 10, Window: time.Minute}, limiter.FailClosed, 5*time.Second)
	short := clusterPolicy(limiter.Policy{Name: "short", Algorithm: limiter.FixedWindow, Limit: 10, Window: 50 * time.Millisecond}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p, short)
	a, b := ins[0], ins[1]
	cfg := CheckpointConfig{Interval: time.Hour, Wait: 5 * time.Second, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}
	for _, in := range ins {
		if err := in.b.SetCheckpoints(cfg); err != nil {
			t.Fatal(err)
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	setOwner := func(in *instance) {
		for _, q := range all {
			tp.set(q, in.g.self)
		}
	}
	setOwner(a)
	a.g.Describe(context.Background(), time.Time{}) // both views: A owns everything
	b.g.Describe(context.Background(), time.Time{})
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	waitReady := func(in *instance, q int32) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			in.b.own.mu.RLock()
			ok := in.b.own.ready[q]
			in.b.own.mu.RUnlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d not ready in 10s", q)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, q := range all {
		waitReady(a, q)
	}
	ctx := context.Background()
	keys := []string{"t-1", "t-2", "t-3", "t-4", "t-5", "t-6", "t-7", "t-8"}
	for _, k := range keys {
		for range 7 {
			if d, err := a.svc.Allow(ctx, "p", k); err != nil || !d.Allowed {
				t.Fatalf("A deciding %s: %+v, %v", k, d, err)
			}
		}
		if _, err := a.svc.Allow(ctx, "short", k); err != nil {
			t.Fatal(err)
		}
	}

	// The rebalance: B gains every partition, A loses them. B starts restoring at once and
	// waits for A's final checkpoint (generation 2).
	setOwner(b)
	b.b.OnGeneration(2, all)
	time.Sleep(100 * time.Millisecond) // B polls before A has written: it must wait, not take nothing
	if _, err := b.svc.Allow(ctx, "p", keys[0]); err == nil {
		t.Error("B decided a partition it had not restored")
	}
	b.b.OnGeneration(3, all) // another generation that keeps them: the restores under way still finish
	a.b.OnGeneration(2, nil)
	for _, q := range all {
		waitReady(b, q)
	}
	a.b.Close(ctx)
	for _, k := range keys {
		for i := range 4 {
			d, err := b.svc.Allow(ctx, "p", k)
			if err != nil {
				t.Fatal(err)
			}
			if want := i < 3; d.Allowed != want {
				t.Fatalf("B, request %d of %s after the handover: allowed %v, want %v (A had admitted 7 of 10)", 8+i, k, d.Allowed, want)
			}
		}
	}
	if n := a.b.Memory("p").Len(); n != 0 {
		t.Errorf("A still holds %d keys it handed over", n)
	}
	if n := b.b.Memory("short").Len(); n != 0 {
		t.Errorf("B restored %d keys of a 50 ms window that had expired", n)
	}
}

// TestRecordsReuseTheirBuffers: each round encodes into the last one's buffers (the header
// written last, before the entries); every round still decodes to exactly the live keys
// of the partitions asked, with its own generation and final flag.
func TestRecordsReuseTheirBuffers(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 0.001}, limiter.FailClosed, time.Second)
	_, ins := startGroup(t, 1, p)
	in := ins[0]
	ctx := context.Background()
	decide := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := in.svc.Allow(ctx, "p", "k-"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(ps []int32, gen int32, final bool, want int) {
		t.Helper()
		keys := map[string]bool{}
		parts, heads := in.b.records(ps, gen, final, time.Now())
		if len(parts) > 0 {
			t.Fatalf("%d parts for records far below maxPartBytes", len(parts))
		}
		for i, m := range heads {
			cp, err := decodeCheckpoint(m.Value)
			if err != nil {
				t.Fatalf("partition %d: %v", ps[i], err)
			}
			if cp.gen != gen || cp.final != final {
				t.Fatalf("partition %d: generation %d final %v, want %d %v", ps[i], cp.gen, cp.final, gen, final)
			}
			for _, e := range cp.entries {
				if partitionOf(e.key, 6) != ps[i] || keys[e.key] {
					t.Fatalf("key %s in the record of partition %d (or twice)", e.key, ps[i])
				}
				keys[e.key] = true
			}
		}
		if len(keys) != want {
			t.Fatalf("%d keys in the records of %v, want %d", len(keys), ps, want)
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	decide(0, 200)
	check(all, 1, false, 200)
	decide(200, 500) // longer records than the buffers hold
	check(all, -2, true, 500)
	n := 0
	for i := range 500 {
		if partitionOf("k-"+strconv.Itoa(i), 6) == 3 {
			n++
		}
	}
	check([]int32{3}, 3, false, n)
	check(all, 4, false, 500)
}

// TestCheckpointInParts: partitions of more keys than one record holds under the broker's
// message.max.bytes (the embedded broker keeps Kafka's 1 MB) are checkpointed in parts, and
// read back whole: every key once, in its partition, from the latest checkpoint alone (the
// parts of an earlier, larger one left in the log are not taken). A record whose parts are
// not in the log is refused, not read as a checkpoint of fewer keys. Before parts, every
// checkpoint of such a partition failed and a new owner started its keys empty.
func TestCheckpointInParts(t *testing.T) {
	broker := kafkatest.Start(t, "events", 6)
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 10, RefillPerSecond: 0.001}, limiter.FailClosed, time.Second)
	_, ins := startGroup(t, 1, p)
	in := ins[0]
	if err := in.b.SetCheckpoints(CheckpointConfig{Interval: time.Hour, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	decide := func(n int) {
		for i := range n {
			if _, err := in.svc.Allow(ctx, "p", "tenant-"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	check := func(gen int32, want int) {
		t.Helper()
		seen, inParts := map[string]bool{}, 0
		for _, q := range all {
			cp, err := in.b.readLatest(ctx, q)
			if err != nil || cp == nil || cp.gen != gen {
				t.Fatalf("partition %d: checkpoint %v, %v; want one of generation %d", q, cp, err, gen)
			}
			if cp.parts > 0 {
				inParts++
			}
			for _, e := range cp.entries {
				if partitionOf(e.key, 6) != q || seen[e.key] {
					t.Fatalf("key %s in the checkpoint of partition %d (or twice)", e.key, q)
				}
				seen[e.key] = true
			}
		}
		if len(seen) != want || inParts == 0 {
			t.Fatalf("%d keys read back in %d partitions' parts, want %d keys, some in parts", len(seen), inParts, want)
		}
	}
	decide(150_000) // ~25,000 keys a partition, ~1.5 MB
	in.b.checkpoint(ctx, all, 1, true)
	if got := testutil.ToFloat64(in.b.m.checkpoints); got != 6 {
		t.Fatalf("%v partitions checkpointed, want 6", got)
	}
	check(1, 150_000)

	in.b.forget(all) // fewer keys: the earlier checkpoint's last parts stay in the log
	decide(70_000)
	in.b.checkpoint(ctx, all, 2, true)
	check(2, 70_000)

	// A record naming parts that were never written.
	head := appendCheckpointHeader(nil, 3, true, time.Now().UnixMilli(), 0)
	head[0] = versionHead
	head = binary.BigEndian.AppendUint64(head, 42)
	head = binary.AppendUvarint(head, 2)
	if err := in.b.w.WriteMessages(ctx, kafka.Message{Key: []byte(in.b.recordKey(0)), Value: head}); err != nil {
		t.Fatal(err)
	}
	if cp, err := in.b.readLatest(ctx, 0); err == nil {
		t.Fatalf("a record whose parts are missing read as %d entries of generation %d", len(cp.entries), cp.gen)
	}
}

// TestCheckpointHandsPlansAndLevelsOver: a planned handover of keys whose state passes the
// policy's own numbers — a plan's larger limit or capacity, an org's or team's counter
// above the user level's limit — goes on where the old owner stopped, as one memory
// Service deciding every request does. Found with three `slide serve --plans` and a fourth
// started mid-traffic: pro keys of a fixed window of 40 (pro: 100) admitted 164 each, and
// orgs of levels [60, 30, 10] 100, since the new owner refused every such state as one
// that did not fit the policy and started those keys afresh.
func TestCheckpointHandsPlansAndLevelsOver(t *testing.T) {
	broker := kafkatest.Start(t, "events", 6)
	plans, err := limiter.ParsePlans([]byte(testPlans), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cps []limiter.Policy
	for _, p := range testPolicies() {
		cps = append(cps, clusterPolicy(p, limiter.FailClosed, 5*time.Second))
	}
	tp, ins := startGroup(t, 2, cps...)
	a, b := ins[0], ins[1]
	oracle, err := limiter.NewService(limiter.Config{Policies: testPolicies()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := CheckpointConfig{Interval: time.Hour, Wait: 5 * time.Second, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}
	for _, svc := range []*limiter.Service{a.svc, b.svc, oracle} {
		if err := svc.SetPlans(plans); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range ins {
		if err := in.b.SetCheckpoints(cfg); err != nil {
			t.Fatal(err)
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	setOwner := func(in *instance) {
		for _, q := range all {
			tp.set(q, in.g.self)
		}
	}
	waitReady := func(in *instance) {
		deadline := time.Now().Add(10 * time.Second)
		for _, q := range all {
			for {
				in.b.own.mu.RLock()
				ok := in.b.own.ready[q]
				in.b.own.mu.RUnlock()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("partition %d not ready in 10s", q)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	setOwner(a)
	a.g.Describe(context.Background(), time.Time{}) // both views: A owns everything, so B waits for its final checkpoint
	b.g.Describe(context.Background(), time.Time{})
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	waitReady(a)

	// One instant for every decision, the start of the next minute: no window ends during
	// the test, and nothing has expired when B restores it.
	now := time.Now().Truncate(time.Minute).Add(time.Minute)
	ctx := context.Background()
	step := 0
	decide := func(in *instance, policy, key string) {
		t.Helper()
		step++
		got, err := in.svc.AllowN(ctx, policy, key, now, 1)
		if err != nil {
			t.Fatalf("step %d %s %s: %v", step, policy, key, err)
		}
		want, err := oracle.AllowN(ctx, policy, key, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.Limit != want.Limit || got.Level != want.Level {
			t.Errorf("step %d %s %s: allowed %v remaining %d of %d level %q; one memory Service: allowed %v remaining %d of %d level %q",
				step, policy, key, got.Allowed, got.Remaining, got.Limit, got.Level, want.Allowed, want.Remaining, want.Limit, want.Level)
		}
	}
	before := []struct{ policy, key string }{
		{"api", "tenant-gold"}, {"api", "tenant-gold"}, {"api", "tenant-gold"}, {"api", "tenant-gold"}, // 4 of gold's 7 (the policy's 3)
		{"bucket", "tenant-gold"}, // 3 of gold's 4 tokens left (the policy's capacity 2)
		{"org", "org-plain/team-a/u1"}, {"org", "org-plain/team-a/u1"},
		{"org", "org-plain/team-a/u2"}, {"org", "org-plain/team-a/u2"}, // team-a 4 of 4, org 4 of 6 (users' 2)
		{"org", "org-gold/team-a/u1"}, {"org", "org-gold/team-a/u1"}, {"org", "org-gold/team-a/u1"},
		{"org", "org-gold/team-a/u2"}, {"org", "org-gold/team-a/u2"}, // gold: team-a 5 of 5, org 5 of 9 (users' 3)
	}
	for _, r := range before {
		decide(a, r.policy, r.key)
	}

	setOwner(b)
	b.b.OnGeneration(2, all)
	a.b.OnGeneration(2, nil)
	waitReady(b)
	after := []struct{ policy, key string }{
		{"api", "tenant-gold"}, {"api", "tenant-gold"}, {"api", "tenant-gold"}, {"api", "tenant-gold"},
		{"bucket", "tenant-gold"}, {"bucket", "tenant-gold"}, {"bucket", "tenant-gold"}, {"bucket", "tenant-gold"},
		{"org", "org-plain/team-a/u3"}, {"org", "org-plain/team-b/u1"}, {"org", "org-plain/team-b/u1"}, {"org", "org-plain/team-b/u2"},
		{"org", "org-gold/team-a/u3"}, {"org", "org-gold/team-b/u1"}, {"org", "org-gold/team-b/u1"}, {"org", "org-gold/team-b/u2"},
		{"org", "org-gold/team-b/u2"}, {"org", "org-gold/team-b/u3"},
	}
	for _, r := range after {
		decide(b, r.policy, r.key)
	}

	// A plan cut, then a handover back to A: keys past their new numbers stay denied, as
	// in memory, rather than start afresh (they were refused as not fitting, and a key
	// that had used 100 of a cut plan's 60 was admitted 60 more).
	cut, err := limiter.ParsePlans([]byte(strings.NewReplacer("api: {limit: 7}", "api: {limit: 2}",
		"org: {levels: [9, 5, 3]}", "org: {levels: [4, 5, 3]}").Replace(testPlans)), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []*limiter.Service{a.svc, b.svc, oracle} {
		if err := svc.SetPlans(cut); err != nil {
			t.Fatal(err)
		}
	}
	// Described again after generation 2, as the group is: the views name B, so A waits
	// for B's final checkpoint. (Without it A's view still named A, A waited for nothing
	// and sometimes restored its own older checkpoint before B wrote its final one.)
	a.g.Describe(context.Background(), time.Now())
	b.g.Describe(context.Background(), time.Now())
	setOwner(a)
	a.b.OnGeneration(3, all)
	b.b.OnGeneration(3, nil)
	waitReady(a)
	for _, r := range []struct{ policy, key string }{
		{"api", "tenant-gold"}, {"org", "org-gold/team-c/u1"}, {"org", "org-plain/team-c/u1"},
	} {
		decide(a, r.policy, r.key)
	}
}

// TestRestoresOfManyPartitionsOverlap: a new owner that gains many partitions whose latest
// records are final but of an older generation (every instance of the group restarted:
// each leave and join moved the generation on) waits up to Wait for each, then takes it.
// The waits overlap: every partition is restored, and its keys go on where they stopped.
// Found restarting three `slide serve` at once after a checkpoint: the restores ran one
// after another (8 partitions × 2 s) under one 10 s budget, so the last partitions, the
// budget spent, went live with nothing restored and admitted their keys' whole limits again.
func TestRestoresOfManyPartitionsOverlap(t *testing.T) {
	broker := kafkatest.Start(t, "events", 6)
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	a, b := ins[0], ins[1]
	wait := 2 * time.Second // six partitions waiting one after another: 12 s
	cfg := CheckpointConfig{Interval: time.Hour, Wait: wait, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}
	for _, in := range ins {
		if err := in.b.SetCheckpoints(cfg); err != nil {
			t.Fatal(err)
		}
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	for _, q := range all {
		tp.set(q, a.g.self)
	}
	a.g.Describe(context.Background(), time.Time{}) // both views: A owns everything
	b.g.Describe(context.Background(), time.Time{})
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	ready := func(in *instance) bool {
		in.b.own.mu.RLock()
		defer in.b.own.mu.RUnlock()
		for _, q := range all {
			if !in.b.own.ready[q] {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !ready(a); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A not ready in 10s")
		}
	}
	// A key on every partition, each charged 3 of its 5.
	keys := map[int32]string{}
	for i := 0; len(keys) < len(all); i++ {
		k := "t-" + strconv.Itoa(i)
		if q := partitionOf(k, 6); keys[q] == "" {
			keys[q] = k
		}
	}
	ctx := context.Background()
	for _, k := range keys {
		for range 3 {
			if d, err := a.svc.Allow(ctx, "p", k); err != nil || !d.Allowed {
				t.Fatalf("A deciding %s: %+v, %v", k, d, err)
			}
		}
	}
	a.b.Close(ctx) // the final records, of generation 1

	// B gains every partition generations later; the view still names A, which the group
	// never says is gone: B waits the whole Wait for a final record of generation ≥ 4.
	for _, q := range all {
		tp.set(q, b.g.self)
	}
	start := time.Now()
	b.b.OnGeneration(5, all)
	for deadline := time.Now().Add(30 * time.Second); !ready(b); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B not ready in 30s")
		}
	}
	took := time.Since(start)
	for q, k := range keys {
		admitted := 0
		for range 5 {
			d, err := b.svc.Allow(ctx, "p", k)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 2 {
			t.Errorf("partition %d, key %s: B admitted %d more, want 2 (A had admitted 3 of 5)", q, k, admitted)
		}
	}
	if took > 2*wait+time.Second {
		t.Errorf("B took %v to restore six partitions waiting %v each: the waits did not overlap", took.Round(time.Millisecond), wait)
	}
}

// TestHandedBackWaitsForThePredecessor: A hands every partition to B, B decides more, and
// a generation later they go back to A before B has written its final checkpoint. The
// latest record then is A's own final one, of the previous generation: A must wait for
// B's, not go on from what it had decided itself (found as a flaky CI run of
// TestCheckpointHandsPlansAndLevelsOver: an org at its limit admitted again).
func TestHandedBackWaitsForThePredecessor(t *testing.T) {
	h := startHandover(t, 2, 5*time.Second, limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour})
	a, b := h.ins[0], h.ins[1]
	ctx := context.Background()
	decide := func(in *instance, n int) {
		for i := range n {
			if d, err := in.svc.Allow(ctx, "p", "k"); err != nil || !d.Allowed {
				t.Fatalf("request %d: %+v, %v", i, d, err)
			}
		}
	}
	h.handTo(a)
	h.describe()
	a.b.OnGeneration(1, allParts)
	b.b.OnGeneration(1, nil)
	h.waitReady(a)
	decide(a, 3)

	b.b.OnGeneration(2, allParts)
	h.handTo(b)
	a.b.OnGeneration(2, nil)
	h.waitReady(b)
	decide(b, 4)
	h.describe() // the group after generation 2: B owns everything

	h.handTo(a)
	a.b.OnGeneration(3, allParts)
	time.Sleep(300 * time.Millisecond) // B has not written its final record yet
	if a.b.Ready() == nil {
		t.Fatal("A took its partitions back before B's final checkpoint (from its own older one)")
	}
	b.b.OnGeneration(3, nil)
	h.waitReady(a)
	decide(a, 3) // 3 at A, 4 at B, 3 more: 10 of 10
	if d, err := a.svc.Allow(ctx, "p", "k"); err != nil || d.Allowed {
		t.Fatalf("the 11th request of a limit of 10: %+v, %v", d, err)
	}
}
