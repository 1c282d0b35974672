package redislimit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// outageRecord is one decision of TestOutageUnderLoad. Times are offsets from
// the start of the load.
type outageRecord struct {
	start, latency time.Duration
	policy         int // index into outagePolicies
	key            int // index into the load keys; hammerKey for the hammered one
	allowed        bool
	degraded       bool
	unavailable    bool  // err is limiter.ErrBackendUnavailable
	err            error // any other error
}

func (r *outageRecord) end() time.Duration { return r.start + r.latency }

var outagePolicies = [...]string{"open", "closed", "local"}

// hammerKey is the local policy's key the test goroutine hammers while
// Redis is down, past the limit.
const hammerKey = -1

// Issue 6: redis-server is SIGKILLed while 16 goroutines call Allow over 200
// keys of three Redis policies (one per on_backend_error mode), then started
// again on the same port. Each policy follows its mode within its timeout,
// decisions recover within a second of Redis answering PING (issue 6; in fact
// within recovery, 300 ms), and neither goroutines nor connections leak. The
// client is built as `slide serve` builds it (redislimit.Options, default Config,
// default deny cache).
//
// Recovery is what redislimit.Options' dialer buys: after PoolSize failed dials,
// go-redis's pool fails every dial at once and probes the server from one
// goroutine, retrying only once a second; the dialer keeps that probe trying
// every 50 ms. Without it, recovery took up to a second (about 480 ms with
// the phases below, which put the restart half a second after a go-redis
// probe).
//
// The machine is shared: this process and redis-server are sometimes not
// scheduled for tens or hundreds of milliseconds (up to a second was seen).
// Two probes record those stalls (an idle goroutine that wakes up late; a
// PING on its own connection that takes long), and the timing assertions
// discount them: a decision that times out with Redis up is accepted only
// when the probes saw the process or Redis stalled for half of it or more.
func TestOutageUnderLoad(t *testing.T) {
	const (
		timeout = 50 * time.Millisecond
		// slack is scheduling delay on top of the policy timeout: the race
		// detector and 17 callers on 2 cores, beyond the stalls discounted.
		slack    = 150 * time.Millisecond
		bound    = timeout + slack
		recovery = 300 * time.Millisecond // issue 6 asks for a second; the probing dialer gives ~50 ms
		// The load is paced (each worker one call per interval, 4,000/s in
		// all) so that the test's own callers do not saturate the 2 cores:
		// unpaced, while Redis is down they spin on microsecond decisions
		// and the latencies measure the run queue, not the limiter.
		workers  = 16
		interval = 4 * time.Millisecond
		keys     = 200
		// limit is per key and minute. The load stays well below it (20
		// decisions per key per second), so nothing is denied through Redis
		// and the deny cache stays empty: every decision while Redis is down
		// is the failure mode's. The hammered key, one call a millisecond
		// during the outage, goes far past it.
		limit   = 200
		upFor   = time.Second
		downFor = 1500 * time.Millisecond
		backFor = 1500 * time.Millisecond
		// A refused dial is an answer: decisions of the outage's first
		// moments must not wait out their timeout (see redislimit.Options).
		firstMoments = 200 * time.Millisecond
	)
	srv := redistest.Start(t)
	goroutinesBefore := runtime.NumGoroutine()

	client := goredis.NewClient(redislimit.Options(srv.Addr))
	var clientClosed atomic.Bool
	t.Cleanup(func() {
		if !clientClosed.Load() {
			client.Close()
		}
	})
	poolSize := client.Options().PoolSize
	backend, err := redislimit.New(client, redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var pols []limiter.Policy
	for i, mode := range []limiter.FailureMode{limiter.FailOpen, limiter.FailClosed, limiter.FailLocal} {
		pols = append(pols, limiter.Policy{Name: outagePolicies[i], Algorithm: limiter.SlidingLog, Limit: limit,
			Window: time.Minute, Backend: limiter.BackendRedis, OnBackendError: mode, Timeout: timeout})
	}
	svc, err := limiter.NewService(limiter.Config{Policies: pols, Redis: backend, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.Load(context.Background()); err != nil {
		t.Fatal(err)
	}

	keyName := func(k int) string {
		if k == hammerKey {
			return "hammer"
		}
		return fmt.Sprintf("k%03d", k)
	}
	t0 := time.Now()
	decide := func(p, k int) outageRecord {
		start := time.Now()
		d, err := svc.Allow(context.Background(), outagePolicies[p], keyName(k))
		r := outageRecord{start: start.Sub(t0), latency: time.Since(start), policy: p, key: k,
			allowed: d.Allowed, degraded: d.Degraded}
		switch {
		case errors.Is(err, limiter.ErrBackendUnavailable):
			r.unavailable = true
		case err != nil:
			r.err = err
		}
		return r
	}

	// Load: each call picks one of 200 keys; key k belongs to policy k%3.
	var stop atomic.Bool
	var wg sync.WaitGroup
	perWorker := make([][]outageRecord, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 6))
			recs := make([]outageRecord, 0, 2048)
			pace := pacer{next: t0.Add(time.Duration(w) * interval / workers), interval: interval}
			for !stop.Load() {
				pace.wait()
				k := rng.IntN(keys)
				recs = append(recs, decide(k%len(outagePolicies), k))
			}
			perWorker[w] = recs
		}()
	}
	// Probes, each the only writer of its variables, read after wg.Wait:
	// the client's connections (never more than PoolSize), stalls of this
	// process (an idle goroutine waking up late) and of redis-server (a
	// PING on a connection of its own answering late).
	var (
		maxConns                uint32
		procStalls, redisStalls stallLog
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		const tick = 2 * time.Millisecond
		for !stop.Load() {
			if n := client.PoolStats().TotalConns; n > maxConns {
				maxConns = n
			}
			due := time.Since(t0) + tick
			time.Sleep(tick)
			procStalls.add(due, time.Since(t0))
		}
	}()
	go func() {
		defer wg.Done()
		var c net.Conn
		pong := make([]byte, len("+PONG\r\n"))
		for !stop.Load() {
			if c == nil {
				var err error
				if c, err = net.DialTimeout("tcp", srv.Addr, time.Second); err != nil {
					c = nil // down: try again shortly
					time.Sleep(2 * time.Millisecond)
					continue
				}
			}
			sent := time.Since(t0)
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			_, err := io.WriteString(c, "PING\r\n")
			if err == nil {
				_, err = io.ReadFull(c, pong)
			}
			if err != nil {
				c.Close()
				c = nil
				continue
			}
			redisStalls.add(sent, time.Since(t0))
			time.Sleep(2 * time.Millisecond)
		}
		if c != nil {
			c.Close()
		}
	}()
	stopLoad := func() {
		if !stop.Swap(true) {
			wg.Wait()
		}
	}
	defer stopLoad() // a t.Fatal below must not leave the load running

	// Phases.
	time.Sleep(upFor)
	killAt := time.Since(t0)
	srv.Stop() // SIGKILL, then wait until the port refuses connections
	killed := time.Since(t0)
	// The test goroutine hammers one key of the local policy while Redis is
	// down: the in-process fallback must stop it at the limit.
	var hammer []outageRecord
	pace := pacer{next: time.Now(), interval: time.Millisecond}
	// At least downFor, and until the key has been asked more than its limit: on a busy
	// machine (the race detector, other tests) a paced millisecond is a few, and 1.5 s
	// gave 116 requests of a limit of 200, a test that proved nothing (bounded: 10×).
	for el := time.Since(t0); el < killed+downFor || len(hammer) <= limit+20 && el < killed+10*downFor; el = time.Since(t0) {
		pace.wait()
		hammer = append(hammer, decide(2, hammerKey))
	}
	restartAt := time.Since(t0)
	srv.Start() // returns once redis-server answers PING
	pingAt := time.Since(t0)
	time.Sleep(backFor)
	stopLoad()
	stopAt := time.Since(t0)

	// Connections after recovery, load stopped: the pool's, no more than
	// PoolSize; the server's, no more than PoolSize + the CLIENT LIST
	// connection itself once it has reaped the ones the client closed.
	stats := client.PoolStats()
	serverConns := waitServerClients(t, srv, poolSize+1, "after recovery")
	opened := serverStat(t, srv, "total_connections_received")
	// Close the client: its connections and goroutines must go.
	if err := client.Close(); err != nil {
		t.Errorf("closing the client: %v", err)
	}
	clientClosed.Store(true)
	clientsAfter := waitServerClients(t, srv, 1, "after the client closed")
	goroutinesAfter := waitGoroutines(t, goroutinesBefore+2)

	var all []outageRecord
	for _, recs := range perWorker {
		all = append(all, recs...)
	}
	all = append(all, hammer...)
	slices.SortFunc(all, func(a, b outageRecord) int { return int(a.start - b.start) })
	defer func() {
		if t.Failed() {
			logTimeline(t, all, fmt.Sprintf("kill sent %s, port closed %s, restart %s, PING %s, load stopped %s",
				killAt, killed, restartAt, pingAt, stopAt))
		}
	}()
	stalled := func(from, to time.Duration) time.Duration { return stalledWithin(from, to, &procStalls, &redisStalls) }
	describe := func(r *outageRecord) string {
		return fmt.Sprintf("%s %s at %s (%s): allowed=%v degraded=%v unavailable=%v err=%v; process stalled %s, process or Redis %s of it",
			outagePolicies[r.policy], keyName(r.key), r.start, r.latency.Round(100*time.Microsecond), r.allowed, r.degraded,
			r.unavailable, r.err, procStalls.within(r.start, r.end()).Round(100*time.Microsecond),
			stalled(r.start, r.end()).Round(100*time.Microsecond))
	}

	// With Redis up a decision comes from Redis, or times out while the
	// process or Redis is stalled (the failure mode then works as
	// designed). Any other failure is a real error.
	fromRedis := func(phase string, r *outageRecord) (timedOut bool) {
		switch {
		case r.err == nil && !r.degraded && r.allowed:
			return false
		case r.err == nil && r.degraded && r.latency >= timeout && stalled(r.start, r.end()) >= r.latency/2:
			return true
		}
		t.Errorf("%s, %s; want allowed from Redis (or a timeout during a stall)", phase, describe(r))
		return false
	}

	// Up: every decision that ended before the kill.
	var up, upTimeouts int
	for i := range all {
		if r := &all[i]; r.end() < killAt {
			up++
			if fromRedis("redis up", r) {
				upTimeouts++
			}
		}
	}

	// From the kill on, every decision returns within the policy timeout
	// plus slack, not counting the time the process was stalled (waiting on
	// Redis is cut by the timeout; the process not running is not).
	var maxNet time.Duration
	for i := range all {
		r := &all[i]
		if r.start < killAt {
			continue
		}
		net := r.latency - procStalls.within(r.start, r.end())
		maxNet = max(maxNet, net)
		if net > bound {
			t.Errorf("%s; want ≤ %s (timeout %s + slack %s) without the process's stalls", describe(r), bound, timeout, slack)
		}
	}

	// Down: decisions that started once the kill was confirmed (in-flight
	// ones are excluded by construction) and ended before the restart
	// follow their policy's mode.
	var down, first []time.Duration
	for i := range all {
		r := &all[i]
		if r.start < killed || r.end() >= restartAt {
			continue
		}
		down = append(down, r.latency)
		if r.start < killed+firstMoments {
			first = append(first, r.latency-procStalls.within(r.start, r.end()))
		}
		ok := r.degraded && r.err == nil
		switch outagePolicies[r.policy] {
		case "open":
			ok = ok && r.allowed && !r.unavailable
		case "closed":
			ok = ok && !r.allowed && r.unavailable
		case "local":
			ok = ok && !r.unavailable
		}
		if !ok {
			t.Errorf("redis down, %s; want %s", describe(r),
				map[string]string{"open": "allowed, degraded", "closed": "ErrBackendUnavailable, denied, degraded",
					"local": "degraded (fallback)"}[outagePolicies[r.policy]])
		}
	}
	if len(down) == 0 || len(first) == 0 {
		t.Fatal("no decisions while Redis was down")
	}
	slices.Sort(down)
	slices.Sort(first)
	p99, maxDown := down[len(down)*99/100], down[len(down)-1]
	if med := first[len(first)/2]; med >= timeout/2 {
		t.Errorf("first %s of the outage: median decision %s, want < %s: a refused dial should fail the call at once, not after the timeout",
			firstMoments, med, timeout/2)
	}

	// local: the fallback keeps its own sliding log per key. It admitted
	// exactly the limit of the hammered key, and no key more than the limit.
	fallbackAdmitted := map[int]int{}
	for i := range all {
		if r := &all[i]; r.policy == 2 && r.degraded && r.allowed {
			fallbackAdmitted[r.key]++
		}
	}
	for k, n := range fallbackAdmitted {
		if n > limit {
			t.Errorf("local fallback admitted %d requests of %s, want ≤ %d", n, keyName(k), limit)
		}
	}
	if len(hammer) <= limit {
		t.Fatalf("hammered key: only %d requests while Redis was down, need more than the limit %d", len(hammer), limit)
	}
	if n := fallbackAdmitted[hammerKey]; n != limit {
		t.Errorf("local fallback admitted %d of %d requests of the hammered key, want exactly %d", n, len(hammer), limit)
	}

	// Recovery: per policy, the first decision from Redis after the restart,
	// measured from the PING, less the stalls; after it, decisions come from
	// Redis again.
	var (
		recovered            [len(outagePolicies)]time.Duration
		recoveryStall        time.Duration
		after, afterTimeouts int
		settling             int // degraded within the recovery bound, after the first from Redis
	)
	for p, name := range outagePolicies {
		first := time.Duration(-1)
		for i := range all {
			r := &all[i]
			if r.policy != p || r.start < restartAt {
				continue
			}
			if first < 0 {
				if !r.degraded && r.err == nil {
					first = r.end()
				}
				continue
			}
			// Recovered means from Redis for every decision that starts once the
			// recovery bound has passed since PING. Just after the first decision from
			// Redis, a few may still fail fast: a pooled connection left from before the
			// kill fails its one call (MaxRetries -1, so it is not retried into a double
			// count) before the pool drops it. Those fall in the bound the test holds
			// the first decision to, and are counted apart.
			if r.start > first && r.start < pingAt+recovery && r.degraded {
				settling++
				continue
			}
			if r.start > first {
				after++
				if fromRedis("after recovery", r) {
					afterTimeouts++
				}
			}
		}
		if first < 0 {
			t.Errorf("%s: no decision from Redis within %s of its restart", name, backFor)
			continue
		}
		recovered[p] = first - pingAt
		st := stalled(pingAt, first)
		recoveryStall = max(recoveryStall, st)
		if recovered[p]-st >= recovery {
			t.Errorf("%s: first decision from Redis %s after it answered PING (process or Redis stalled %s of it), want < %s",
				name, recovered[p], st, recovery)
		}
	}

	// The client never held more than PoolSize connections.
	if int(maxConns) > poolSize || int(stats.TotalConns) > poolSize {
		t.Errorf("client held up to %d connections during the test, %d after recovery; PoolSize %d", maxConns, stats.TotalConns, poolSize)
	}

	// Metrics: every degraded decision is a backend error and a decision
	// with result "error" of its policy; the others are allowed.
	var want strings.Builder
	want.WriteString("# HELP " + limiter.MetricDecisions + " Admission decisions by policy and result (allowed, denied, shadow_denied; error when the backend failed and the failure mode decided).\n")
	want.WriteString("# TYPE " + limiter.MetricDecisions + " counter\n")
	var degradedBy [len(outagePolicies)]int
	for p, name := range outagePolicies {
		var allowed, denied, failed int
		for i := range all {
			switch r := &all[i]; {
			case r.policy != p:
			case r.degraded:
				failed++
			case r.allowed:
				allowed++
			default:
				denied++
			}
		}
		degradedBy[p] = failed
		for _, c := range []struct {
			result string
			n      int
		}{{limiter.ResultAllowed, allowed}, {limiter.ResultDenied, denied}, {limiter.ResultError, failed}, {limiter.ResultShadowDenied, 0}} {
			fmt.Fprintf(&want, "%s{policy=%q,result=%q} %d\n", limiter.MetricDecisions, name, c.result, c.n)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), limiter.MetricDecisions); err != nil {
		t.Errorf("decision metrics: %v", err)
	}
	backendErrors := backendErrorsByPolicy(t, reg)
	for p, name := range outagePolicies {
		if degradedBy[p] == 0 {
			t.Errorf("%s: no degraded decisions recorded", name)
		}
		if got := backendErrors[name]; got != float64(degradedBy[p]) {
			t.Errorf("%s: %s = %v, want %d (the degraded decisions)", name, limiter.MetricBackendErrors, got, degradedBy[p])
		}
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	t.Logf("redis-server SIGKILLed under load (%d callers, %d keys, policies open/closed/local, timeout %s, race detector): "+
		"up %.1f s at %.0f decisions/s, %d timed out in stalls; "+
		"down %.1f s at %.0f decisions/s, every one per its mode, latency p99 %s, max %s; "+
		"slowest decision from the kill on %s less process stalls (bound %s); "+
		"local fallback admitted %d of %d on the hammered key (limit %d); "+
		"first decision from Redis %s / %s / %s after PING (bound %s; stalls %s of it), %d more degraded within the bound, then %d of %d timed out in stalls; "+
		"goroutines %d before, %d after close; connections ≤ %d in the pool (PoolSize %d), "+
		"%d on the server after recovery (incl. the check's own; %d accepted since the restart, probes included), %d after close; "+
		"%d decisions, %d degraded, all counted in %s; stalls up to %s (process), %s (Redis)",
		workers, keys, timeout,
		killAt.Seconds(), float64(up)/killAt.Seconds(), upTimeouts,
		(restartAt - killed).Seconds(), float64(len(down))/(restartAt-killed).Seconds(), ms(p99), ms(maxDown), ms(maxNet), bound,
		fallbackAdmitted[hammerKey], len(hammer), limit,
		recovered[0].Round(time.Millisecond), recovered[1].Round(time.Millisecond), recovered[2].Round(time.Millisecond), recovery,
		recoveryStall.Round(time.Millisecond), settling, afterTimeouts, after,
		goroutinesBefore, goroutinesAfter, maxConns, poolSize, serverConns, opened, clientsAfter,
		len(all), degradedBy[0]+degradedBy[1]+degradedBy[2], limiter.MetricDecisions, ms(procStalls.max), ms(redisStalls.max))
}

// stallLog records when something the test watches did not run: [from, to)
// intervals of 2 ms or more (shorter is ordinary scheduling), as offsets
// from the test's start, in order and disjoint (one writer; read after it
// stops).
type stallLog struct {
	from, to []time.Duration
	max      time.Duration
}

func (l *stallLog) add(from, to time.Duration) {
	if to-from < 2*time.Millisecond {
		return
	}
	l.from, l.to = append(l.from, from), append(l.to, to)
	l.max = max(l.max, to-from)
}

// within returns how much of [from, to) the log covers.
func (l *stallLog) within(from, to time.Duration) time.Duration {
	return stalledWithin(from, to, l)
}

// stalledWithin returns how much of [from, to) any of the logs covers.
func stalledWithin(from, to time.Duration, logs ...*stallLog) time.Duration {
	type span struct{ from, to time.Duration }
	var spans []span
	for _, l := range logs {
		i, _ := slices.BinarySearch(l.to, from)
		for ; i < len(l.from) && l.from[i] < to; i++ {
			spans = append(spans, span{max(from, l.from[i]), min(to, l.to[i])})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.from - b.from) })
	d, end := time.Duration(0), from
	for _, s := range spans {
		if s.to > end {
			d += s.to - max(s.from, end)
			end = s.to
		}
	}
	return d
}

// pacer spaces a caller's calls interval apart. After a stall it starts
// afresh rather than bursting to catch up.
type pacer struct {
	next     time.Time
	interval time.Duration
}

func (p *pacer) wait() {
	if d := time.Until(p.next); d > 0 {
		time.Sleep(d)
	}
	now := time.Now()
	if p.next = p.next.Add(p.interval); p.next.Before(now) {
		p.next = now.Add(p.interval)
	}
}

// logTimeline logs the decisions per 100 ms (count, degraded, unavailable,
// slowest), to read a failure of TestOutageUnderLoad against its phases.
func logTimeline(t *testing.T, all []outageRecord, phases string) {
	t.Helper()
	const step = 100 * time.Millisecond
	var b strings.Builder
	fmt.Fprintf(&b, "timeline: %s\n", phases)
	for i := 0; i < len(all); {
		from := all[i].start.Truncate(step)
		var n, deg, unav int
		var slowest time.Duration
		for ; i < len(all) && all[i].start < from+step; i++ {
			r := &all[i]
			n++
			if r.degraded {
				deg++
			}
			if r.unavailable {
				unav++
			}
			slowest = max(slowest, r.latency)
		}
		fmt.Fprintf(&b, "%6d ms  %5d decisions  %5d degraded  %5d unavailable  slowest %s\n",
			from.Milliseconds(), n, deg, unav, slowest.Round(100*time.Microsecond))
	}
	t.Log(b.String())
}

// backendErrorsByPolicy sums slide_limiter_backend_errors_total over its
// reasons, by policy.
func backendErrorsByPolicy(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != limiter.MetricBackendErrors {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "policy" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// waitServerClients polls CLIENT LIST (up to 2 s: the server reaps a closed
// connection when it next reads it) until it shows at most max connections,
// its own included, and returns the count it saw last.
func waitServerClients(t *testing.T, srv *redistest.Server, max int, when string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		list, err := srv.Do("CLIENT", "LIST")
		if err != nil {
			t.Errorf("CLIENT LIST %s: %v", when, err)
			return -1
		}
		n := 0
		for _, l := range strings.Split(list, "\n") {
			if strings.TrimSpace(l) != "" {
				n++
			}
		}
		if n <= max {
			return n
		}
		if time.Now().After(deadline) {
			t.Errorf("redis-server has %d clients 2s %s, want ≤ %d (CLIENT LIST's own included):\n%s", n, when, max, list)
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverStat returns one integer field of INFO, or -1 after failing the test.
func serverStat(t *testing.T, srv *redistest.Server, field string) int64 {
	t.Helper()
	info, err := srv.Do("INFO", "all")
	if err != nil {
		t.Errorf("INFO: %v", err)
		return -1
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	t.Errorf("INFO has no integer %s", field)
	return -1
}

// waitGoroutines polls (up to 2 s) until at most max goroutines run and none
// is go-redis's, and returns the last count. On failure it dumps them.
func waitGoroutines(t *testing.T, max int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := runtime.NumGoroutine()
		var dump bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
		if n <= max && !strings.Contains(dump.String(), "github.com/redis/go-redis") {
			return n
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines 2s after the load stopped and the client closed, want ≤ %d and none of go-redis:\n%s", n, max, dump.String())
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
