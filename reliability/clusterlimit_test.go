package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/proctest"
)

// The limiter's backend cluster under faults (issue #30): three instances, one key of a
// 1,000-unit token bucket (it refills too slowly to matter), on_backend_error closed, a
// 200 ms hop timeout; clients on the two other instances ask at about 100 decisions a
// second; then the key's owner is SIGKILLed, or SIGSTOPped. Each test logs the figures
// RELIABILITY.md quotes: decisions allowed beyond the limit (the checkpoints lose at most
// an interval's), decisions answered by on_backend_error (503), and the time from the
// fault to the first decision taken again.

const limitQuota = 1000

const limitPolicies = `policies:
  - {name: q, algorithm: token_bucket, capacity: 1000, refill_per_second: 0.001, backend: cluster, on_backend_error: closed, timeout: 200ms}
`

// limitGroup starts three instances with limitPolicies and returns them with the owner of
// key first, once all three see each other and own their partitions.
func limitGroup(t *testing.T, key string) []*slide {
	t.Helper()
	_, brokers := brokerProc(t)
	return limitGroupOn(t, brokers, key)
}

// limitGroupOn is limitGroup on a broker of the caller's.
func limitGroupOn(t *testing.T, brokers, key string) []*slide {
	t.Helper()
	file := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(file, []byte(limitPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--policies", file, "--session-timeout", "3s", "--snapshot-interval", "0"}
	var all []*slide
	for _, name := range []string{"slide-a", "slide-b", "slide-c"} {
		all = append(all, startSlide(t, name, brokers, "limits", flags...))
	}
	part := (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(key)}, 0, 1, 2, 3)
	var owner *slide
	eventually(t, 30*time.Second, "the three instances did not settle", func() bool {
		owner = nil
		for _, s := range all {
			if s.metric(t, "slide_cluster_members") != 3 {
				return false
			}
			if !limitsReady(s) {
				return false
			}
			for _, p := range s.partitions(t) {
				if p == part {
					owner = s
				}
			}
		}
		return owner != nil
	})
	out := []*slide{owner}
	for _, s := range all {
		if s != owner {
			out = append(out, s)
		}
	}
	return out
}

// limitsReady reports whether s is ready and restores no partition's limiter state: once
// ready, /readyz stays 200 while a rebalance's gains restore ("restoring_limits"), their
// keys deciding by on_backend_error meanwhile.
func limitsReady(s *slide) bool {
	code, body, _ := getStatus(s.base + "/readyz")
	return code == 200 && !bytes.Contains(body, []byte("restoring_limits"))
}

func getStatus(url string) (int, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// decision is one answer of the load: when it was asked and its status.
type decision struct {
	at   time.Time
	code int
}

// record is the answers of a load so far.
type record struct {
	mu  sync.Mutex
	out []decision
}

// decidedAfter reports whether a decision asked after at was taken (200 or 429).
func (r *record) decidedAfter(at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.out {
		if d.at.After(at) && (d.code == 200 || d.code == 429) {
			return true
		}
	}
	return false
}

// limitLoad asks key on each of bases from its own goroutine, one decision every 20 ms,
// until ctx ends, into r.
func limitLoad(t *testing.T, ctx context.Context, r *record, key string, bases ...string) {
	client := &http.Client{Timeout: 5 * time.Second}
	var wg sync.WaitGroup
	for _, base := range bases {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				at := time.Now()
				resp, err := client.Post(base+"/v1/allow", "application/json", strings.NewReader(fmt.Sprintf(`{"policy":"q","key":%q}`, key)))
				if err != nil {
					t.Errorf("POST %s/v1/allow: %v (a decision must never hang)", base, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				r.mu.Lock()
				r.out = append(r.out, decision{at: at, code: resp.StatusCode})
				r.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
}

// drain asks key on base until it is denied, and returns how many were allowed; a 503
// (the key's owner not ready yet) is asked again, for up to 10 s.
func drain(t *testing.T, base, key string) int {
	t.Helper()
	n := 0
	deadline := time.Now().Add(10 * time.Second)
	for range 3 * limitQuota {
		code, body, err := proctest503(base, key)
		switch {
		case err != nil:
			t.Fatal(err)
		case code == 200:
			n++
		case code == 429:
			return n
		case code == 503 && time.Now().Before(deadline):
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("draining %s: %d %s", key, code, body)
		}
	}
	t.Fatalf("%s was never denied", key)
	return n
}

func proctest503(base, key string) (int, string, error) {
	resp, err := http.Post(base+"/v1/allow", "application/json", strings.NewReader(fmt.Sprintf(`{"policy":"q","key":%q}`, key)))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// figures sums a load's answers around the fault at: allowed, on_backend_error (503),
// allowed in the second before the fault, and the time from it to the first decision
// taken (200 or 429) after the last 503.
func figures(ds []decision, at time.Time) (allowed, failed, lastSecond int, recovered time.Duration) {
	var lastFail time.Time
	for _, d := range ds {
		switch d.code {
		case 200:
			allowed++
			if d.at.Before(at) && at.Sub(d.at) <= time.Second+200*time.Millisecond {
				lastSecond++
			}
		case 429:
		default:
			failed++
			if d.at.After(lastFail) {
				lastFail = d.at
			}
		}
	}
	for _, d := range ds {
		if (d.code == 200 || d.code == 429) && d.at.After(lastFail) && d.at.After(at) {
			if r := d.at.Sub(at); recovered == 0 || r < recovered {
				recovered = r
			}
		}
	}
	return allowed, failed, lastSecond, recovered
}

// TestLimitOwnerKilled: the key's owner is SIGKILLed mid-load. Its partitions move to the
// survivors after the session timeout (3 s); until the new owner has restored the last
// checkpoint, decisions answer by on_backend_error (closed: 503). The limit is overshot by
// at most the decisions of the last checkpoint interval (1 s, plus the write's own time).
func TestLimitOwnerKilled(t *testing.T) {
	const key = "tenant-killed"
	g := limitGroup(t, key)
	owner, b, c := g[0], g[1], g[2]
	ctx, cancel := context.WithCancel(context.Background())
	var rec record
	done := make(chan struct{})
	go func() { limitLoad(t, ctx, &rec, key, b.base, c.base); close(done) }()
	time.Sleep(3 * time.Second)
	owner.Kill()
	killed := time.Now()
	eventually(t, 30*time.Second, "no survivor took the key over", func() bool { return rec.decidedAfter(killed.Add(time.Second)) })
	time.Sleep(time.Second)
	cancel()
	<-done
	ds := rec.out
	allowed, failed, lastSecond, recovered := figures(ds, killed)
	allowed += drain(t, b.base, key)
	beyond := max(allowed-limitQuota, 0)
	if beyond > lastSecond {
		t.Errorf("%d allowed beyond the limit of %d; the checkpoints lose at most the last interval's %d", beyond, limitQuota, lastSecond)
	}
	if failed == 0 {
		t.Error("no decision failed while the key had no owner: the test proves nothing")
	}
	t.Logf("owner SIGKILLed: %d decisions, %d allowed in all (limit %d): %d beyond it (%d allowed in the last second before the kill); %d answered by on_backend_error (503); decisions again %.1f s after the kill",
		len(ds), allowed, limitQuota, beyond, lastSecond, failed, recovered.Seconds())
}

// TestLimitOwnerStopped: the key's owner is SIGSTOPped mid-load. Each decision forwarded to
// it costs the policy's 200 ms timeout, then on_backend_error (503), never more; after the
// session timeout the group hands its partitions to the others, which restore the last
// checkpoint and decide again.
func TestLimitOwnerStopped(t *testing.T) {
	const key = "tenant-stopped"
	g := limitGroup(t, key)
	owner, b, c := g[0], g[1], g[2]
	ctx, cancel := context.WithCancel(context.Background())
	var rec record
	done := make(chan struct{})
	go func() { limitLoad(t, ctx, &rec, key, b.base, c.base); close(done) }()
	time.Sleep(3 * time.Second)
	if err := syscall.Kill(owner.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(owner.PID(), syscall.SIGCONT) })
	eventually(t, 30*time.Second, "no other instance took the key over", func() bool { return rec.decidedAfter(stopped.Add(time.Second)) })
	time.Sleep(time.Second)
	cancel()
	<-done
	ds := rec.out
	allowed, failed, lastSecond, recovered := figures(ds, stopped)
	allowed += drain(t, b.base, key)
	beyond := max(allowed-limitQuota, 0)
	if beyond > lastSecond {
		t.Errorf("%d allowed beyond the limit of %d; the checkpoints lose at most the last interval's %d", beyond, limitQuota, lastSecond)
	}
	if failed == 0 {
		t.Error("no decision failed while the owner was stopped: the test proves nothing")
	}
	t.Logf("owner SIGSTOPped: %d decisions, %d allowed in all (limit %d): %d beyond it (%d allowed in the last second before the stop); %d answered by on_backend_error (503) after the 200 ms timeout; decisions again %.1f s after the stop",
		len(ds), allowed, limitQuota, beyond, lastSecond, failed, recovered.Seconds())
}

// TestLimitOwnerLeaves: the key's owner is stopped with SIGTERM mid-load, a planned
// handover. It drains its API, writes the final checkpoint of its partitions and leaves
// the group; the next owner restores that checkpoint before it decides, so not one
// decision is lost: never more than the limit is allowed in all.
func TestLimitOwnerLeaves(t *testing.T) {
	const key = "tenant-leaving"
	g := limitGroup(t, key)
	owner, b, c := g[0], g[1], g[2]
	ctx, cancel := context.WithCancel(context.Background())
	var rec record
	done := make(chan struct{})
	go func() { limitLoad(t, ctx, &rec, key, b.base, c.base); close(done) }()
	time.Sleep(3 * time.Second)
	left := time.Now()
	if err := owner.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "no other instance took the key over", func() bool { return rec.decidedAfter(time.Now().Add(-50 * time.Millisecond)) })
	time.Sleep(time.Second)
	cancel()
	<-done
	ds := rec.out
	allowed, failed, _, recovered := figures(ds, left)
	allowed += drain(t, b.base, key)
	// Nothing lost: never more than the limit. A decision answered 503 may still have been
	// counted by an owner that answered after the caller's timeout, so the limit may be
	// short by at most those.
	if allowed > limitQuota || allowed < limitQuota-failed {
		t.Errorf("%d allowed in all across a planned handover, want the limit, %d (or up to %d fewer: decisions answered 503)", allowed, limitQuota, failed)
	}
	t.Logf("owner SIGTERMed: %d decisions, %d allowed in all (limit %d); %d answered by on_backend_error (503) during the handover; decisions again %.1f s after the signal",
		len(ds), allowed, limitQuota, failed, recovered.Seconds())
}

// TestLimitInstanceJoins: a third instance joins two mid-load and the group rebalances, so
// partitions (perhaps the key's) move between live instances: each old owner writes the
// final checkpoint of what it gives up, each new owner restores it before deciding, and
// not one decision is lost: never more than the limit is allowed for any key.
func TestLimitInstanceJoins(t *testing.T) {
	_, brokers := brokerProc(t)
	file := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(file, []byte(limitPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--policies", file, "--session-timeout", "3s", "--snapshot-interval", "0"}
	a := startSlide(t, "slide-a", brokers, "joins", flags...)
	b := startSlide(t, "slide-b", brokers, "joins", flags...)
	settled := func(n int, all ...*slide) func() bool {
		return func() bool {
			owned := 0
			for _, s := range all {
				if !limitsReady(s) || s.metric(t, "slide_cluster_members") != float64(n) {
					return false
				}
				owned += len(s.partitions(t))
			}
			return owned == 4
		}
	}
	eventually(t, 30*time.Second, "two instances did not settle", settled(2, a, b))
	// Eight keys covering the four partitions (murmur2: j-5 and j-6 on 0, j-0 on 1, j-4 and
	// j-7 on 2, the others on 3), so keys move whichever partitions slide-c is handed.
	keys := []string{"j-0", "j-1", "j-2", "j-3", "j-4", "j-5", "j-6", "j-7"}
	ctx, cancel := context.WithCancel(context.Background())
	recs := make([]record, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { limitLoad(t, ctx, &recs[i], k, a.base, b.base) })
	}
	time.Sleep(2 * time.Second)
	joined := time.Now()
	c := startSlide(t, "slide-c", brokers, "joins", flags...)
	eventually(t, 30*time.Second, "three instances did not settle", settled(3, a, b, c))
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	total, failed, short := 0, 0, 0
	for i, k := range keys {
		allowed, f, _, _ := figures(recs[i].out, joined)
		total += len(recs[i].out)
		failed += f
		allowed += drain(t, c.base, k)
		short += limitQuota - allowed
		// As in TestLimitOwnerLeaves: never over the limit, short by at most the 503s.
		if allowed > limitQuota || allowed < limitQuota-f {
			t.Errorf("%s: %d allowed in all across the rebalance, want the limit, %d (or up to %d fewer: decisions answered 503)", k, allowed, limitQuota, f)
		}
	}
	restored := c.metric(t, "slide_limiter_cluster_restored_keys_total")
	if restored == 0 {
		t.Error("slide-c restored no key: no key moved, the test proves nothing")
	}
	t.Logf("slide-c joined: %d decisions over %d keys, none over its limit of %d, %d short in all; slide-c restored %.0f keys' state; %d answered by on_backend_error (503) while partitions moved; settled %.1f s after the join",
		total, len(keys), limitQuota, short, restored, failed, time.Since(joined).Seconds()-1)
}

// TestLimitBrokerRestarts: the broker is SIGKILLed mid-load and restarted empty on its
// address a second later (`slide broker` keeps its log in memory: the group, its
// generations and the checkpoint topic are gone). Owners keep deciding from memory while
// the broker is away (a decision needs no broker), the group forms again, and the limit
// holds within one limit more: 0 when the key keeps its owner, up to a fresh window's worth
// when the new group moves it (the checkpoints went with the log).
func TestLimitBrokerRestarts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	startBroker := func(name string) *proctest.Proc {
		p := proctest.Start(t, name, slideBin, "broker", "--addr", addr, "--partitions", "4")
		if _, err := p.WaitOutput("broker listening on ", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := startBroker("broker-1")
	const key = "tenant-broker"
	g := limitGroupOn(t, addr, key)
	owner, b, c := g[0], g[1], g[2]
	ctx, cancel := context.WithCancel(context.Background())
	var rec record
	done := make(chan struct{})
	go func() { limitLoad(t, ctx, &rec, key, b.base, c.base); close(done) }()
	time.Sleep(3 * time.Second)
	first.Kill()
	killed := time.Now()
	time.Sleep(time.Second)
	startBroker("broker-2")
	restarted := time.Now()
	eventually(t, 60*time.Second, "the group did not form again", func() bool {
		for _, s := range g {
			if s.metric(t, "slide_cluster_members") != 3 || len(s.partitions(t)) == 0 {
				return false
			}
		}
		return rec.decidedAfter(time.Now().Add(-100 * time.Millisecond))
	})
	// Checkpoints resume on the new broker (the topic is created again): a later crash
	// would lose no more than an interval.
	written := owner.metric(t, "slide_limiter_cluster_checkpoints_total")
	eventually(t, 10*time.Second, "the owner wrote no checkpoint to the restarted broker", func() bool {
		return owner.metric(t, "slide_limiter_cluster_checkpoints_total") > written
	})
	cancel()
	<-done
	ds := rec.out
	allowed, failed, lastSecond, _ := figures(ds, killed)
	var during int
	for _, d := range ds {
		if d.at.After(killed) && d.at.Before(restarted) && (d.code == 200 || d.code == 429) {
			during++
		}
	}
	allowed += drain(t, b.base, key)
	beyond := max(allowed-limitQuota, 0)
	if during == 0 {
		t.Error("no decision was taken while the broker was down: a decision must not need the broker")
	}
	// The broker came back without its log, and the checkpoints were in it. When the key keeps
	// its owner nothing is lost (its memory holds the count); when the new group hands it to
	// another instance, that owner starts the window afresh: at most one limit more, never
	// more than that (a second handover in the same window would need a second loss).
	if beyond > limitQuota {
		t.Errorf("%d allowed beyond the limit of %d; a broker restarted empty loses at most one limit (the new owner's fresh window)", beyond, limitQuota)
	}
	t.Logf("broker SIGKILLed and restarted empty: %d decisions, %d taken while it was down; %d allowed in all (limit %d): %d beyond it (%d allowed in the last second before the kill); %d answered by on_backend_error (503); group whole again %.1f s after the restart",
		len(ds), during, allowed, limitQuota, beyond, lastSecond, failed, time.Since(restarted).Seconds()-1)
}
