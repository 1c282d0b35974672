package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// One Redis Cluster of three masters and a replica each serves every subtest: it takes a
// few seconds to form. The failover subtest runs last, since it changes the roles.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	conn := redislimit.Conn{Cluster: c.Addrs()[:3]} // seeds: the client discovers the rest
	t.Run("conformance", func(t *testing.T) { conformance(t, connClient(t, conn)) })
	t.Run("scale_out", func(t *testing.T) {
		scaleOut(t, func() limiter.Backend { return connBackend(t, conn) }, false)
	})
	t.Run("keys_spread_over_masters", func(t *testing.T) {
		seen := map[string]bool{}
		for i := 0; i < 30; i++ {
			seen[c.MasterOf(t, "tenant-"+strconv.Itoa(i)).Addr] = true
		}
		if len(seen) != 3 {
			t.Errorf("30 keys land on %d masters, want all 3", len(seen))
		}
	})
	t.Run("seeds_untouched", func(t *testing.T) {
		// go-redis appends the nodes it finds to its seed list: given the caller's slice,
		// it wrote past len into the caller's array (and raced between two clients).
		seeds := append(c.Addrs()[:1:1], "not-a-node:1")
		cl := connClient(t, redislimit.Conn{Cluster: seeds[:1]})
		if err := ping(cl); err != nil {
			t.Fatal(err)
		}
		if err := cl.(*goredis.ClusterClient).ForEachShard(context.Background(), func(context.Context, *goredis.Client) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if seeds[1] != "not-a-node:1" {
			t.Errorf("the client wrote %q into the caller's seed array", seeds[1])
		}
	})
	t.Run("slot_migration", func(t *testing.T) { migrateSlot(t, c, conn) })
	t.Run("manual_failover", func(t *testing.T) {
		const key = "tenant-failover"
		old := c.MasterOf(t, "{"+key+"}")
		replica := replicaOf(t, c, old)
		failover(t, conn, key, func() {
			if out, err := replica.Do("CLUSTER", "FAILOVER"); err != nil {
				t.Fatalf("CLUSTER FAILOVER on %s: %v %s", replica.Addr, err, out)
			}
		}, func() bool { return c.MasterOf(t, "{"+key+"}") == replica }, func(name string) *redistest.Server {
			return c.MasterOf(t, "{"+key+"}")
		}, true)
	})
	t.Run("kill_master", func(t *testing.T) {
		const key = "tenant-crash"
		c.WaitOK(t, 10*time.Second)
		old := c.MasterOf(t, "{"+key+"}")
		replica := replicaOf(t, c, old)
		failover(t, conn, key, old.Stop, func() bool {
			role, err := replica.Do("ROLE")
			return err == nil && strings.HasPrefix(role, "master")
		}, func(string) *redistest.Server { return replica }, false)
	})
}

// replicaOf returns the running node that replicates master.
func replicaOf(t *testing.T, c *redistest.Cluster, master *redistest.Server) *redistest.Server {
	t.Helper()
	_, port, _ := splitHostPort(master.Addr)
	for _, n := range c.Nodes {
		if n == master || !n.Running() {
			continue
		}
		role, err := n.Do("ROLE")
		if err == nil && len(role) > 5 && role[:5] == "slave" && containsLine(role, port) {
			return n
		}
	}
	t.Fatalf("no replica of %s", master.Addr)
	return nil
}

// failover drives one decision every 2 ms for key through conn (sliding log, limit far
// above what it sends, on_backend_error closed), calls fault, and checks: decisions that
// failed were degraded (denied), decisions recover within 10 s of moved() turning true,
// and the log holds exactly the admitted decisions (exact) or no more of them (a crash
// may lose the last writes a replica had not yet received, never add any).
func failover(t *testing.T, conn redislimit.Conn, key string, fault func(), moved func() bool,
	master func(name string) *redistest.Server, exact bool) {
	t.Helper()
	pol := limiter.Policy{Name: fmt.Sprintf("fo%d", time.Now().UnixNano()), Algorithm: limiter.SlidingLog,
		Limit: 100000, Window: time.Hour, Backend: limiter.BackendRedis,
		OnBackendError: limiter.FailClosed, Timeout: 200 * time.Millisecond}
	b := connBackend(t, conn)
	s := newService(t, b, limiter.Config{Policies: []limiter.Policy{pol}})
	ctx := context.Background()
	var admitted, degraded int
	decide := func() limiter.Decision {
		d, err := s.Allow(ctx, pol.Name, key)
		switch {
		case errors.Is(err, limiter.ErrBackendUnavailable): // closed: refused with 503
			if !d.Degraded || d.Allowed {
				t.Fatalf("backend failure gave %+v", d)
			}
			degraded++
		case err != nil:
			t.Fatal(err)
		case d.Degraded && d.Allowed:
			t.Fatalf("a degraded decision was allowed under on_backend_error closed: %+v", d)
		case d.Degraded:
			degraded++
		case d.Allowed:
			admitted++
		default:
			t.Fatalf("denied far under the limit: %+v", d)
		}
		return d
	}
	for i := 0; i < 50; i++ {
		if d := decide(); d.Degraded {
			t.Fatalf("degraded before the fault: %+v", d)
		}
		time.Sleep(2 * time.Millisecond)
	}
	start := time.Now()
	fault()
	var movedAt time.Time
	lastDegraded := start
	for {
		if d := decide(); d.Degraded {
			lastDegraded = time.Now()
		}
		if movedAt.IsZero() && moved() {
			movedAt = time.Now()
		}
		// Done once moved and 200 decisions in a row (~0.5 s) went through.
		if !movedAt.IsZero() && time.Since(lastDegraded) > 500*time.Millisecond {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("no recovery 30 s after the fault (moved: %v, %d degraded)", !movedAt.IsZero(), degraded)
		}
		time.Sleep(2 * time.Millisecond)
	}
	recovered := lastDegraded.Sub(start)
	t.Logf("failover: roles changed after %s; last degraded decision %s after the fault; %d admitted, %d degraded",
		movedAt.Sub(start).Round(time.Millisecond), recovered.Round(time.Millisecond), admitted, degraded)
	if !movedAt.IsZero() && lastDegraded.After(movedAt.Add(10*time.Second)) {
		t.Errorf("decisions degraded until %s after the new master took over, want within 10 s", lastDegraded.Sub(movedAt))
	}
	n, err := master(pol.Name).Do("ZCARD", b.Key(&pol, key))
	if err != nil {
		t.Fatal(err)
	}
	logged, _ := strconv.Atoi(n)
	switch {
	case exact && logged != admitted:
		t.Errorf("the log holds %d requests, %d were admitted: want exactly the admitted ones", logged, admitted)
	case logged > admitted:
		t.Errorf("the log holds %d requests, only %d were admitted: a decision was counted twice", logged, admitted)
	}
}

func splitHostPort(a string) (string, string, error) {
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:], nil
		}
	}
	return a, "", fmt.Errorf("no port in %q", a)
}

func containsLine(s, line string) bool {
	for _, l := range splitLines(s) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
