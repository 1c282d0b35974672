package clusterlimit

import (
	"context"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// TestExpelledOwnerRestoresAgain: A owns every partition, then stops (SIGSTOP, a long GC
// pause, a starved VM) past its session: the group goes on without it and B decides its
// keys. When A wakes, the group, described again, has no member A. Then the partitions go
// back to A: it must restore them from B's final checkpoint rather than go on from what it
// held before it stopped, and meanwhile decide nothing from that stale memory. Found with
// `kill -STOP` on one of three `slide serve` for 6 s under /v1/allow load on all three:
// five keys of a fixed window of 1,000 admitted 1,050 each. The woken instance decided
// its old keys locally until its consumer rejoined, and, assigned the same partitions in
// the new generation, took them as kept: never restored, B's decisions lost.
// ticked: A's checkpoint loop ran once between its wake and the new generation (it stops
// deciding there); else the generation's hook is the first to see it was expelled.
func TestExpelledOwnerRestoresAgain(t *testing.T) {
	for _, ticked := range []bool{true, false} {
		name := "hook"
		if ticked {
			name = "tick"
		}
		t.Run(name, func(t *testing.T) { testExpelledOwner(t, ticked) })
	}
}

func testExpelledOwner(t *testing.T, ticked bool) {
	h := startHandover(t, 2, 5*time.Second, limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour})
	a, b, all, tp := h.ins[0], h.ins[1], allParts, h.tp
	handTo, describe, waitReady := h.handTo, h.describe, h.waitReady
	ctx := context.Background()
	allowed := 0
	decide := func(in *instance, n int) {
		for i := range n {
			d, err := in.svc.Allow(ctx, "p", "k")
			if err != nil || !d.Allowed {
				t.Fatalf("request %d: %+v, %v", i, d, err)
			}
			allowed++
		}
	}
	handTo(a)
	describe()
	a.b.OnGeneration(1, all)
	b.b.OnGeneration(1, nil)
	waitReady(a)
	decide(a, 3)
	a.b.checkpoint(ctx, all, 1, false) // A's last periodic checkpoint before it stops

	// A stops; the group expels it and B takes every partition from A's last checkpoint.
	handTo(b)
	b.b.OnGeneration(2, all)
	tp.leave(a.g.self)
	waitReady(b)
	decide(b, 4) // 7 of 10

	// A wakes: its view, described again, has no member A.
	describe()
	if ticked {
		a.b.stopIfExpelled()
		if err := a.b.Ready(); err != nil {
			t.Fatal(err) // it owns nothing now, so nothing is waiting
		}
		a.b.own.mu.RLock()
		n := len(a.b.own.owned)
		a.b.own.mu.RUnlock()
		if n != 0 {
			t.Fatalf("A, expelled, still decides %d partitions from what it held", n)
		}
		decide(a, 1) // B's, forwarded: 8 of 10
	}

	// A rejoins and the partitions go back to it.
	handTo(a)
	a.b.OnGeneration(3, all)
	b.b.OnGeneration(3, nil)
	waitReady(a)
	for {
		d, err := a.svc.Allow(ctx, "p", "k")
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
		if allowed++; allowed > 20 {
			break
		}
	}
	if allowed != 10 {
		t.Errorf("%d admitted in all under a limit of 10: A went on from what it held before it was expelled", allowed)
	}
}
