package redislimit_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// migrateSlot moves the slot of key from its master to another master as
// `redis-cli --cluster reshard` does, checking decide between the steps: while the slot
// is MIGRATING with its keys still on the source, once they are on the target (the
// source answers ASK), and once the slot is assigned to the target (a client with the
// old slot map meets MOVED). A MOVED or ASK reply means the node ran nothing, so the
// backend sends the call once to the node named: no decision fails, none counts twice.
func migrateSlot(t *testing.T, c *redistest.Cluster, conn redislimit.Conn) {
	const key = "tenant-migrating"
	var redirects sync.Map // kind → *atomic.Int64, from Config.OnRedirect
	b, err := redislimit.New(connClient(t, conn), redislimit.Config{OnRedirect: func(kind string) {
		n, _ := redirects.LoadOrStore(kind, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(kind string) int64 {
		if n, ok := redirects.Load(kind); ok {
			return n.(*atomic.Int64).Load()
		}
		return 0
	}
	ctx := context.Background()
	name := "mig" + strconv.FormatInt(time.Now().UnixNano(), 36)
	log := limiter.Policy{Name: name, Algorithm: limiter.SlidingLog, Limit: 1000, Window: time.Hour}
	fixed := limiter.Policy{Name: name, Algorithm: limiter.FixedWindow, Limit: 1000, Window: time.Hour}
	levels := limiter.Policy{Name: name + "l", Algorithm: limiter.FixedWindow, Window: time.Hour,
		Levels: limiter.Levels{Separator: "/", N: 2, Limits: [limiter.MaxLevels]int64{1000, 1000}}}
	admitted := 0
	decide := func(when string) {
		t.Helper()
		for _, p := range []limiter.Policy{log, fixed, levels} {
			l, err := b.Limiter(p)
			if err != nil {
				t.Fatal(err)
			}
			k := key
			if p.Levels.N > 0 {
				k = key + "/user"
			}
			d, err := l.AllowN(ctx, k, time.Now(), 1)
			if err != nil {
				t.Fatalf("%s: %s decision failed: %v", when, p.Algorithm, err)
			}
			if !d.Allowed {
				t.Fatalf("%s: %s denied far under its limit: %+v", when, p.Algorithm, d)
			}
		}
		// Two policies of the key in one pipeline.
		reqs := []limiter.BackendRequest{{Policy: &log, Key: key, Cost: 1}, {Policy: &fixed, Key: key, Cost: 1}}
		out := make([]limiter.Decision, 2)
		if err := b.Decide(ctx, reqs, out); err != nil {
			t.Fatalf("%s: pipelined decisions failed: %v", when, err)
		}
		admitted += 2
	}
	decide("before the migration")

	src := c.MasterOf(t, "{"+key+"}")
	var dst *redistest.Server
	for _, n := range c.Nodes {
		if role, err := n.Do("ROLE"); n != src && n.Running() && err == nil && strings.HasPrefix(role, "master") {
			dst = n
			break
		}
	}
	do := func(n *redistest.Server, args ...string) string {
		t.Helper()
		out, err := n.Do(args...)
		if err != nil {
			t.Fatalf("%s on %s: %v", strings.Join(args, " "), n.Addr, err)
		}
		return out
	}
	slot := do(src, "CLUSTER", "KEYSLOT", key)
	srcID, dstID := do(src, "CLUSTER", "MYID"), do(dst, "CLUSTER", "MYID")
	do(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	do(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	decide("slot migrating, keys on the source")

	_, dport, _ := splitHostPort(dst.Addr)
	keys := splitLines(do(src, "CLUSTER", "GETKEYSINSLOT", slot, "100"))
	do(src, append([]string{"MIGRATE", "127.0.0.1", dport, "", "0", "5000", "KEYS"}, keys...)...)
	decide("slot migrating, keys on the target")
	if seen("ask") == 0 {
		t.Error("the decisions the source answered with ASK were not reported to OnRedirect")
	}

	for _, n := range []*redistest.Server{dst, src} {
		do(n, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	}
	decide("slot moved")
	if seen("moved") == 0 {
		t.Error("the decisions the old master answered with MOVED were not reported to OnRedirect")
	}

	n, _ := strconv.Atoi(do(dst, "ZCARD", b.Key(&log, key)))
	if want := admitted; n != want {
		t.Errorf("the log on the new master holds %d requests, %d were admitted", n, want)
	}
}
