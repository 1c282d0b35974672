package clusterlimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
)

// TestQuotaLevelsOverThreeInstances (#30's gap): Quota of a key of a policy with levels,
// asked on an instance that does not own the key's org and on its owner, gives each
// level's numbers as backend memory does for the same decisions (a plan's levels too), and
// charges nothing: asked twice, the same numbers. An owner from before peeks leaves the
// levels out and the key's numbers in, without an error.
func TestQuotaLevelsOverThreeInstances(t *testing.T) {
	cps, tp, ins, oracle := plansOverThree(t)
	org := cps[3] // org: levels 6, 4, 2; gold's 9, 5, 3
	ctx := context.Background()
	step := 0
	at := func() time.Time { return limitertest.T0.Add(time.Duration(step) * 10 * time.Millisecond) }
	for _, o := range []string{"org-gold", "org-plain"} {
		for _, k := range []string{"/team-a/u1", "/team-a/u1", "/team-a/u2", "/team-b/u1", "/team-a/u1"} {
			in := ins[step%len(ins)]
			step++
			if _, err := in.svc.AllowN(ctx, "org", o+k, at(), 1); err != nil {
				t.Fatal(err)
			}
			if _, err := oracle.AllowN(ctx, "org", o+k, at(), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	now := at()
	for _, key := range []string{"org-gold/team-a/u1", "org-plain/team-a/u1", "org-plain/team-b"} {
		want, err := oracle.Quota(ctx, "org", key, now)
		if err != nil || len(want.Levels) == 0 {
			t.Fatalf("memory's quota of %s: %+v, %v", key, want, err)
		}
		owner, other := ownerOf(t, tp, ins, org.RouteKey(key))
		trips := other.g.trips.Load()
		for _, in := range []*instance{other, owner, other} {
			got, err := in.svc.Quota(ctx, "org", key, now)
			if err != nil {
				t.Fatalf("quota of %s at %s: %v", key, in.g.self, err)
			}
			if g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want); g != w {
				t.Errorf("quota of %s at %s (owner %v):\n got %s\nwant %s", key, in.g.self, in == owner, g, w)
			}
		}
		if other.g.trips.Load() == trips {
			t.Errorf("quota of %s at a non-owner asked its owner nothing", key)
		}
	}

	const key = "org-plain/team-a/u1"
	owner, other := ownerOf(t, tp, ins, org.RouteKey(key))
	owner.noPeek.Store(true)
	want, _ := oracle.Quota(ctx, "org", key, now)
	got, err := other.svc.Quota(ctx, "org", key, now)
	if err != nil || got.Levels != nil || got.Limit != want.Limit || got.Remaining != want.Remaining {
		t.Errorf("quota at an owner from before peeks: %+v, %v; want the key's numbers (%d of %d), no levels, no error",
			got, err, want.Remaining, want.Limit)
	}
}

// TestQuotaLevelsWhenTheOwnerMoves: a peek at a stale owner is asked again at the new one
// (one describe), as a decision is; with no owner at all the peek is an error the HTTP layer
// maps to 503 (ErrBackendUnavailable), even where on_backend_error open decided the key's
// numbers.
func TestQuotaLevelsWhenTheOwnerMoves(t *testing.T) {
	org := clusterPolicy(limitertest.LevelsPolicy("org", 6, 4, 2), limiter.FailOpen, 5*time.Second)
	tp, ins := startGroup(t, 3, org)
	const key = "org-1/team-a/u1"
	ctx := context.Background()
	old, caller := ownerOf(t, tp, ins, org.RouteKey(key))
	if _, err := caller.svc.AllowN(ctx, "org", key, limitertest.T0, 2); err != nil {
		t.Fatal(err)
	}
	var next *instance
	for _, in := range ins {
		if in != old && in != caller {
			next = in
		}
	}
	part := partitionOf(org.RouteKey(key), tp.parts)
	tp.set(part, next.g.self)
	per, keys, err := caller.b.PeekLevels(ctx, &org, key, limitertest.T0) // the peek alone: no decision learns the move first
	if err != nil || len(per) != 3 || per[0].Remaining != 6 || per[2].Limit != 2 || keys[0] != "org-1" || keys[2] != key {
		t.Fatalf("peek after the move: %+v %q, %v; want the new owner's three levels, nothing used", per, keys, err)
	}
	if n := caller.g.describes.Load(); n != 1 {
		t.Errorf("caller described the group %d times, want once", n)
	}
	tp.set(part, "")
	if _, err := old.svc.Quota(ctx, "org", key, limitertest.T0); !errors.Is(err, limiter.ErrBackendUnavailable) {
		t.Errorf("quota with no owner: %v, want ErrBackendUnavailable", err)
	}
}
