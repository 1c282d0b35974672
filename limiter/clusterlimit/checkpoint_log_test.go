package clusterlimit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/limiter"
)

// TestCheckpointHandsALongLogOver: one sliding_log key of a limit of MaxLogLimit, charged
// one unit at a time at distinct instants (an entry each) up to 60,000 and up to the
// limit, beside other keys of its partition, is handed over exactly: the new owner admits
// what is left of the limit and not a unit more.
func TestCheckpointHandsALongLogOver(t *testing.T) {
	for _, n := range []int{60_000, limiter.MaxLogLimit} {
		t.Run(strconv.Itoa(n), func(t *testing.T) { handOverLog(t, n) })
	}
}

func handOverLog(t *testing.T, entries int) {
	broker := kafkatest.Start(t, "events", 6)
	p := clusterPolicy(limiter.Policy{Name: "log", Algorithm: limiter.SlidingLog, Limit: limiter.MaxLogLimit, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	a, b := ins[0], ins[1]
	cfg := CheckpointConfig{Interval: time.Hour, Wait: 2 * time.Second, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}
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
		deadline := time.Now().Add(20 * time.Second)
		for _, q := range all {
			for {
				in.b.own.mu.RLock()
				ok := in.b.own.ready[q]
				in.b.own.mu.RUnlock()
				if ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("partition %d not ready in 20s", q)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	setOwner(a)
	a.g.Describe(context.Background(), time.Time{})
	b.g.Describe(context.Background(), time.Time{})
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	waitReady(a)

	// The entries 30 ms apart, the newest now: a log of the limit spans 50 minutes of the
	// hour's window, so none leaves during the test.
	ctx := context.Background()
	now := time.Now()
	start := now.Add(-time.Duration(entries-1) * 30 * time.Millisecond)
	const key = "big"
	for i := range entries {
		d, err := a.svc.AllowN(ctx, "log", key, start.Add(time.Duration(i)*30*time.Millisecond), 1)
		if err != nil || !d.Allowed {
			t.Fatalf("A, unit %d: %+v, %v", i, d, err)
		}
	}
	// Other keys of its partition, ~200 KiB of them, so its record holds more than it.
	q := partitionOf(key, 6)
	for i := 0; i < 3000; i++ {
		if k := "small-" + strconv.Itoa(i); partitionOf(k, 6) == q {
			if _, err := a.svc.AllowN(ctx, "log", k, now, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.b.Memory("log").Export(now, func(k string) bool { return k == key }, func(_ string, _ int64, st []byte) {
		t.Logf("%d entries: a state of %d bytes (%.1f a entry)", entries, len(st), float64(len(st))/float64(entries))
	})
	parts, heads := a.b.records([]int32{q}, 1, false, now)
	for _, m := range append(parts, heads...) {
		t.Logf("record %s: %d bytes", m.Key, len(m.Value))
		if len(m.Value) > kafkarange.MaxBatchBytes {
			t.Errorf("record %s of %d bytes: a broker refuses it", m.Key, len(m.Value))
		}
	}

	setOwner(b)
	b.b.OnGeneration(2, all)
	a.b.OnGeneration(2, nil)
	waitReady(b)
	if got := testutil.ToFloat64(a.b.m.checkpoints); got != 6 {
		t.Errorf("A checkpointed %v partitions, want 6", got)
	}
	left := int64(limiter.MaxLogLimit - entries)
	d, err := b.svc.AllowN(ctx, "log", key, now, 0)
	if err != nil || d.Remaining != left {
		t.Fatalf("B, after the handover: %+v, %v; want %d remaining (A had admitted %d of %d)", d, err, left, entries, limiter.MaxLogLimit)
	}
	if left > 0 {
		if d, err := b.svc.AllowN(ctx, "log", key, now, left); err != nil || !d.Allowed {
			t.Fatalf("B, the %d left: %+v, %v", left, d, err)
		}
	}
	if d, err := b.svc.AllowN(ctx, "log", key, now, 1); err != nil || d.Allowed {
		t.Fatalf("B, one unit past the limit: %+v, %v; want denied", d, err)
	}
}

// TestPartEndsBeforeALongEntry: an entry that would carry its part past maxPartBytes
// begins the next part. A part used to end only once it held maxPartBytes, so ~500 KiB of
// small keys and a sliding log of 60,000 entries after them (~720 KB, or a state of
// any key that large) made one part of a size a broker refuses.
func TestPartEndsBeforeALongEntry(t *testing.T) {
	b := &Backend{cp: CheckpointConfig{Group: "g"}}
	sp := split{start: maxHeaderBytes}
	body := make([]byte, maxHeaderBytes)
	var want []string
	add := func(key string, state []byte) {
		body = sp.before(body, entrySize("p", key, state))
		body = appendEntry(body, "p", 1, key, 5, state)
		sp.n++
		want = append(want, key)
	}
	small := make([]byte, 20)
	for i := 0; len(body)-sp.start < maxPartBytes-1000; i++ {
		add("small-"+strconv.Itoa(i), small)
	}
	add("big", make([]byte, 720_000))
	add("after", small)
	parts, head := b.inParts(0, body, &sp, 1, true, 0)
	cp, err := decodeCheckpoint(head.Value)
	if err != nil || cp.parts != len(parts) {
		t.Fatalf("the head: %v, %v", cp, err)
	}
	var got []string
	for i, m := range append(parts, head) {
		if len(m.Value) > kafkarange.MaxBatchBytes {
			t.Errorf("record %d of %d bytes: a broker refuses it", i, len(m.Value))
		}
		es := cp.entries
		if i < len(parts) {
			if _, _, es, err = decodeCheckpointPart(m.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range es {
			got = append(got, e.key)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%d entries read back from %d records, want the %d written in order", len(got), len(parts)+1, len(want))
	}
}
