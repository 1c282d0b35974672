package reliability_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Rebalance: two slide processes share a group. One stops; the survivor owns every
// partition and answers for every key equal to the oracle. It starts again; ownership
// splits again and the two together still answer every key exactly once, equal to the
// oracle. Events flow throughout.
func TestRebalanceKeepsEveryAnswer(t *testing.T) {
	_, brokers := brokerProc(t)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 60, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { tr.run(t, ctx, time.Hour, 10) }) // until cancelled: 1,000 events/s

	a := startSlide(t, "slide-a", brokers, "rebalance")
	b := startSlide(t, "slide-b", brokers, "rebalance")
	split := func(phase string) {
		t.Helper()
		eventually(t, 30*time.Second, phase+": the partitions were not split between a and b", func() bool {
			pa, pb := a.partitions(t), b.partitions(t)
			all := slices.Sorted(slices.Values(append(slices.Clone(pa), pb...)))
			return len(pa) > 0 && len(pb) > 0 && slices.Equal(all, []int{0, 1, 2, 3})
		})
		t.Logf("%s: a owns %v, b owns %v", phase, a.partitions(t), b.partitions(t))
	}
	// settle stops the traffic, waits until every given instance has read to the end, and
	// checks every key; then the traffic resumes.
	settle := func(phase string, instances ...*slide) {
		t.Helper()
		cancel()
		wg.Wait()
		for _, s := range instances {
			eventually(t, 30*time.Second, phase+": "+s.Name+" did not catch up", func() bool { return s.caughtUp(t) })
		}
		checkAll(t, o, "5m", instances...)
		if !t.Failed() {
			t.Logf("%s: %d events, all %d keys equal to the oracle", phase, o.count(), len(o.keys()))
		}
		ctx, cancel = context.WithCancel(context.Background())
		wg.Go(func() { tr.run(t, ctx, time.Hour, 10) })
	}

	split("two members")
	time.Sleep(time.Second)
	settle("two members", a, b)

	stopped := time.Now()
	if err := b.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitOutput("left consumer group", 0); err != nil {
		t.Errorf("slide-b did not leave the group cleanly: %v", err)
	}
	eventually(t, 30*time.Second, "slide-a never owned all 4 partitions after b left", func() bool {
		return slices.Equal(a.partitions(t), []int{0, 1, 2, 3})
	})
	t.Logf("b stopped: a owns all 4 partitions %.1f s later", time.Since(stopped).Seconds())
	time.Sleep(time.Second)
	settle("a alone", a)

	b = startSlide(t, "slide-b2", brokers, "rebalance")
	split("b back")
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	tr.close(t)
	for _, s := range []*slide{a, b} {
		eventually(t, 30*time.Second, s.Name+" did not catch up", func() bool { return s.caughtUp(t) })
	}
	checkAll(t, o, "5m", a, b)
	if t.Failed() {
		return
	}
	t.Logf("b back: %d events in all, every key answered by exactly one instance, equal to the oracle", o.count())
}
