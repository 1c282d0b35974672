package clusterlimit

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/limiter"
)

// TestRestoreWaitsForThePartitionCount: an instance just started gains partitions before
// its first describe of the group has told it the topic's partition count. Its restore
// must wait for the count rather than check each key's partition against none (every key
// then looked like another partition's and was dropped: the partition started empty).
// Found in a rolling restart of three `slide serve` (SIGTERM one at a time, the next once
// /readyz answered 200), a fixed window of 1,000 an hour: four keys of one partition
// admitted 1,090, restored "keys=0" from a final checkpoint that held them.
func TestRestoreWaitsForThePartitionCount(t *testing.T) {
	h := startHandover(t, 2, 5*time.Second, limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour})
	a, b, all, tp := h.ins[0], h.ins[1], allParts, h.tp
	key := ""
	for i := 0; key == ""; i++ {
		if k := "key-" + strconv.Itoa(i); partitionOf(k, 6) != 0 {
			key = k // partition 0 was what a count of none made of every key
		}
	}
	for _, q := range all {
		tp.set(q, a.g.self)
	}
	a.g.Describe(context.Background(), time.Now())
	b.g.Describe(context.Background(), time.Now())
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	ctx := context.Background()
	h.waitReady(a)
	for i := range 3 {
		if d, err := a.svc.Allow(ctx, "p", key); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	a.b.Close(ctx) // SIGTERM: the final checkpoint holds the key at 3 of 10

	// B, as if just started: the group not described yet when its first generation begins.
	b.g.blind.Store(true)
	for _, q := range all {
		tp.set(q, b.g.self)
	}
	b.b.OnGeneration(2, all)
	time.AfterFunc(300*time.Millisecond, func() { b.g.blind.Store(false) })
	h.waitReady(b)
	admitted := 0
	for range 10 {
		d, err := b.svc.Allow(ctx, "p", key)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 7 {
		t.Errorf("B admitted %d more of a limit of 10, want 7: A's 3 were not restored", admitted)
	}
}

// TestFinalCheckpointIsLogged: the final checkpoint an owner writes (SIGTERM, a partition
// lost) is logged with its partitions and keys, so an operator can set what the next owner
// restored ("keys" in its line) against what was handed over. Without it, a restore of
// "keys=0 final=true" (TestRestoreWaitsForThePartitionCount) read as an empty final
// checkpoint, and nothing on the writing side said otherwise.
func TestFinalCheckpointIsLogged(t *testing.T) {
	broker := kafkatest.Start(t, "events", 6)
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 1, p)
	a := ins[0]
	var buf syncBuffer
	a.b.log = slog.New(slog.NewTextHandler(&buf, nil))
	if err := a.b.SetCheckpoints(CheckpointConfig{Interval: time.Hour, Brokers: []string{broker.Addr}, Topic: "events", Group: "g"}); err != nil {
		t.Fatal(err)
	}
	all := []int32{0, 1, 2, 3, 4, 5}
	for _, q := range all {
		tp.set(q, a.g.self)
	}
	a.g.Describe(context.Background(), time.Now())
	a.b.OnGeneration(1, all)
	for deadline := time.Now().Add(10 * time.Second); a.b.Ready() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready in 10s")
		}
	}
	ctx := context.Background()
	for i := range 3 {
		if d, err := a.svc.Allow(ctx, "p", "key-"+strconv.Itoa(i)); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	a.b.Close(ctx)
	want := `msg="clusterlimit: wrote the final limiter checkpoint" partitions="`
	out := buf.String()
	i := strings.Index(out, want)
	if i < 0 || !strings.Contains(out[i:], " generation=1 keys=3\n") {
		t.Errorf("no final checkpoint of 3 keys logged:\n%s", out)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's writes and the test's read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGainedWaitsWhenTheViewIsAlreadyNew: B gains A's partitions, and its view already
// names B when its generation's hook runs (a describe landed first: B's stale answers from
// A, which began the generation earlier, make B describe the group at once). A has not
// written its final checkpoint yet. B must wait for it, not take the view's "B" for "this
// instance owned them" and restore A's older periodic checkpoint.
func TestGainedWaitsWhenTheViewIsAlreadyNew(t *testing.T) {
	h := startHandover(t, 2, 5*time.Second, limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour})
	a, b, all := h.ins[0], h.ins[1], allParts
	handTo := func(in *instance) { h.handTo(in); h.describe() }
	waitReady := h.waitReady
	ctx := context.Background()
	allowed := 0
	decide := func(in *instance) bool {
		d, err := in.svc.Allow(ctx, "p", "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
		return d.Allowed
	}
	handTo(a)
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	waitReady(a)
	for range 3 {
		decide(a)
	}
	a.b.checkpoint(ctx, all, 1, false) // a periodic checkpoint: 3
	for range 2 {
		decide(a) // 5, in A's memory only
	}

	handTo(b) // B's view names B before its hook runs
	b.b.OnGeneration(2, all)
	time.Sleep(300 * time.Millisecond) // A has not begun generation 2 yet
	if b.b.Ready() == nil {
		t.Error("B restored before A's final checkpoint (from A's older periodic one)")
	}
	if got := b.b.Restoring(); !slices.Equal(got, all) {
		t.Errorf("B restoring %v, want %v", got, all)
	}
	a.b.OnGeneration(2, nil)
	waitReady(b)
	if got := b.b.Restoring(); len(got) != 0 {
		t.Errorf("B restored, still restoring %v", got)
	}
	for decide(b) && allowed <= 20 {
	}
	if allowed != 10 {
		t.Errorf("%d admitted in all under a limit of 10", allowed)
	}
}
