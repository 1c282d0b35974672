package reliability_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Crash: slide is SIGKILLed mid-stream (no commit, no leaving the group), events keep
// arriving while it is down, and a new slide process takes over. After its restore every
// series equals the oracle over the span it reports: no event lost, none counted twice.
func TestCrashMidStreamLosesNothing(t *testing.T) {
	_, brokers := brokerProc(t)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 50, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A 3 s session (default 10 s): the group hands a crashed instance's partitions over
	// once it has missed heartbeats for that long.
	session := []string{"--session-timeout", "3s"}
	first := startSlide(t, "slide-1", brokers, "crash", session...)
	var wg sync.WaitGroup
	wg.Go(func() { tr.run(t, ctx, 8*time.Second, 20) }) // 2,000 events/s for 8 s
	// Let the first process consume and commit (every second) before the crash.
	eventually(t, 20*time.Second, "slide-1 never owned all 4 partitions", func() bool { return len(first.partitions(t)) == 4 })
	time.Sleep(2500 * time.Millisecond)
	before := first.metric(t, "slide_ingest_events_total")
	first.Kill()
	killedAt := time.Now()
	if before == 0 {
		t.Fatal("slide-1 consumed nothing before the crash: the test would prove nothing")
	}

	time.Sleep(time.Second) // events arrive while nobody consumes
	second := startSlide(t, "slide-2", brokers, "crash", session...)
	wg.Wait()
	tr.close(t)
	// The dead member never left the group: the coordinator waits out its session before
	// handing its partitions to slide-2.
	eventually(t, 40*time.Second, "slide-2 did not catch up", func() bool { return second.caughtUp(t) })
	took := time.Since(killedAt)
	if took > 10*time.Second {
		t.Errorf("slide-2 took over %v after the kill: --session-timeout 3s was not honoured (10 s is the default)", took)
	}
	checkAll(t, o, "5m", second)
	if r := second.metric(t, "slide_ingest_rejected_total"); r != 0 {
		t.Errorf("slide-2 refused %v events", r)
	}
	t.Logf("crash: %d events produced, slide-1 had consumed %.0f when SIGKILLed; slide-2 answered all %d keys equal to the oracle %.1f s after the kill",
		o.count(), before, len(o.keys()), took.Seconds())
}
