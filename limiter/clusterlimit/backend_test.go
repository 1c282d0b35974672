package clusterlimit

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
)

// topo is the truth of who owns what: the partitions' owners as their own assignments say
// (Assigned). Each instance's view of it (KeyOwner for others) is a copy taken at start
// and at Describe, so a test can move a partition (set) and leave a caller's view stale.
// Both are read as cluster's are, from an atomic snapshot, without a lock.
type topo struct {
	mu    sync.Mutex // writers
	parts int
	truth map[int32]string // under mu; readers load now
	now   atomic.Pointer[map[int32]string]
	gone  map[string]time.Time // under mu: members the group described without, and when
}

// leave has the group described without the member at addr from now on (its session ran out).
func (t *topo) leave(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone == nil {
		t.gone = map[string]time.Time{}
	}
	t.gone[addr] = time.Now()
}

// set makes addr the owner of partition p.
func (t *topo) set(p int32, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.truth[p] = addr
	snap := maps.Clone(t.truth)
	t.now.Store(&snap)
}

func (g *group) Partitions() int {
	if g.blind.Load() {
		return 0
	}
	return g.t.parts
}

// group is one instance's Group over real HTTP, counting its round trips and describes;
// signed with cluster.Auth as cluster's exchanges are when auth is set.
type group struct {
	auth      *cluster.Auth
	t         *topo
	self      string
	view      atomic.Pointer[map[int32]string]
	trips     atomic.Int64
	describes atomic.Int64
	client    *http.Client
	blind     atomic.Bool // the group not described yet: the topic's partitions unknown
}

func (g *group) Self() string { return g.self }

func (g *group) Assigned(p int32) bool { return (*g.t.now.Load())[p] == g.self }

func (g *group) KeyOwner(key string) (int32, string, bool) {
	p := partitionOf(key, g.t.parts)
	if (*g.t.now.Load())[p] == g.self {
		return p, g.self, true
	}
	addr := (*g.view.Load())[p]
	return p, addr, addr != ""
}

func (g *group) PartitionOwner(p int32) string { return (*g.view.Load())[p] }

func (g *group) MemberGone(addr string, since time.Time) bool {
	g.t.mu.Lock()
	defer g.t.mu.Unlock()
	at, ok := g.t.gone[addr]
	return ok && at.After(since)
}

func (g *group) Describe(context.Context, time.Time) {
	g.describes.Add(1)
	view := maps.Clone(*g.t.now.Load())
	g.view.Store(&view)
}

func (g *group) PostPeer(ctx context.Context, _, addr, path string, body []byte) ([]byte, error) {
	g.trips.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set(cluster.HeaderPeer, g.self)
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(cluster.HeaderDeadline, strconv.FormatInt(dl.UnixMilli(), 10))
	}
	var st cluster.Stamp
	if g.auth != nil {
		st = g.auth.SignRequest(cluster.Message{Method: http.MethodPost, To: addr, Path: path, Body: body})
		st.SetHeader(req.Header)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status + ": " + string(b))
	}
	if g.auth != nil {
		mac, err := cluster.AnswerMACOf(resp.Header)
		if err == nil {
			err = g.auth.VerifyAnswer(st.Nonce, b, mac)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

type exchange struct {
	auth  *cluster.Auth
	nonce cluster.Nonce
}

func (x exchange) Answer(w http.ResponseWriter, b []byte) {
	if x.auth != nil {
		cluster.SetAnswerHeader(w.Header(), x.auth.SignAnswer(x.nonce, b))
	}
	_, _ = w.Write(b)
}

func (g *group) VerifyPeer(r *http.Request, body []byte) (cluster.Exchange, error) {
	if r.Header.Get(cluster.HeaderPeer) == "" {
		return nil, errors.New("not a peer")
	}
	x := exchange{auth: g.auth}
	if g.auth != nil {
		st, err := cluster.StampOf(r.Header)
		if err == nil {
			err = g.auth.VerifyRequest(cluster.Message{Method: r.Method, To: g.self, Path: r.URL.Path, Body: body}, st)
		}
		if err != nil {
			return nil, err
		}
		x.nonce = st.Nonce
	}
	return x, nil
}

func (g *group) Served(int, time.Duration) {}

func (g *group) DialStream(ctx context.Context, addr, path string) (*cluster.Stream, error) {
	return cluster.StreamDialer{Auth: g.auth, Self: g.self}.Dial(ctx, addr, path)
}

func (g *group) ObservePeer(string, error, time.Duration) {}

func (g *group) AcceptStream(w http.ResponseWriter, r *http.Request) (*cluster.Stream, error) {
	return cluster.AcceptStream(w, r, g.auth, g.self)
}

// instance is one slide instance of a test group: its backend, the Service over it, its
// peer server, and a gate its server waits at before answering (nil: open). noStream: its
// server answers an upgrade 404, as a slide before streams did; noPeek: it refuses a peek
// (kindPeek) as a slide before peeks did, a batch of an unknown version.
type instance struct {
	g        *group
	b        *Backend
	svc      *limiter.Service
	gate     atomic.Pointer[chan struct{}]
	noStream atomic.Bool
	noPeek   atomic.Bool
}

// startGroup starts n instances enforcing policies, the topic's 6 partitions dealt round
// robin; every instance's view is the truth.
func startGroup(t testing.TB, n int, policies ...limiter.Policy) (*topo, []*instance) {
	t.Helper()
	return startSigned(t, nil, n, policies...)
}

// startSigned is startGroup with the exchanges signed with auth.
func startSigned(t testing.TB, auth *cluster.Auth, n int, policies ...limiter.Policy) (*topo, []*instance) {
	t.Helper()
	tp := &topo{parts: 6, truth: map[int32]string{}}
	ins := make([]*instance, n)
	for i := range ins {
		in := &instance{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if in.noStream.Load() && cluster.IsUpgrade(r) {
				http.NotFound(w, r)
				return
			}
			if in.noPeek.Load() && !cluster.IsUpgrade(r) {
				body, _ := io.ReadAll(r.Body)
				if len(body) > 0 && body[0] != version {
					http.Error(w, "clusterlimit: corrupt message: version", http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			if g := in.gate.Load(); g != nil && !cluster.IsUpgrade(r) { // a stream's batches wait in hold
				select {
				case <-*g:
				case <-r.Context().Done():
					return
				}
			}
			in.b.Handler().ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		in.g = &group{auth: auth, t: tp, self: strings.TrimPrefix(srv.URL, "http://"), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
		ins[i] = in
	}
	for p := range int32(tp.parts) {
		tp.set(p, ins[int(p)%n].g.self)
	}
	for _, in := range ins {
		view := maps.Clone(tp.truth)
		in.g.view.Store(&view)
		var err error
		if in.b, err = New(Config{Group: in.g, Policies: policies}); err != nil {
			t.Fatal(err)
		}
		in.b.hold = func() {
			if g := in.gate.Load(); g != nil {
				<-*g
			}
		}
		if in.svc, err = limiter.NewService(limiter.Config{Policies: policies, Cluster: in.b}); err != nil {
			t.Fatal(err)
		}
	}
	return tp, ins
}

func clusterPolicy(p limiter.Policy, mode limiter.FailureMode, timeout time.Duration) limiter.Policy {
	p.Backend, p.OnBackendError, p.Timeout = limiter.BackendCluster, mode, timeout
	return p
}

// rotating is a Limiter whose requests go to the instances in turn.
type rotating struct {
	ins    []*instance
	policy string
	next   atomic.Int64
}

func (r *rotating) AllowN(ctx context.Context, key string, now time.Time, cost int64) (limiter.Decision, error) {
	in := r.ins[int(r.next.Add(1))%len(r.ins)]
	return in.svc.AllowN(ctx, r.policy, key, now, cost)
}

// TestConformanceOverThreeInstances runs the limiter's conformance suite (exact step tables
// and the concurrent exactness test, every algorithm, levels too) with each request sent to
// the next of three instances: a forwarded decision equals the owner's own.
func TestConformanceOverThreeInstances(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, p limiter.Policy) limiter.Limiter {
		p = clusterPolicy(p, limiter.FailClosed, 10*time.Second)
		_, ins := startGroup(t, 3, p)
		return &rotating{ins: ins, policy: p.Name}
	})
}

// ownerOf returns the instance owning key's partition and one that does not.
func ownerOf(t *testing.T, tp *topo, ins []*instance, key string) (owner, other *instance) {
	t.Helper()
	addr := tp.truth[partitionOf(key, tp.parts)]
	for _, in := range ins {
		if in.g.self == addr {
			owner = in
		} else if other == nil {
			other = in
		}
	}
	return owner, other
}

// TestStaleOwnerRetriesAtNewOwner: the key's partition moved, the caller's view still names
// the old owner; the old owner answers stale, the caller describes the group once and the
// new owner decides. When the group names no owner yet, the decision follows
// on_backend_error (closed: unavailable).
func TestStaleOwnerRetriesAtNewOwner(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 3, p)
	const key = "tenant-moving"
	old, caller := ownerOf(t, tp, ins, key)
	var next *instance
	for _, in := range ins {
		if in != old && in != caller {
			next = in
		}
	}
	part := partitionOf(key, tp.parts)
	tp.set(part, next.g.self)

	ctx := context.Background()
	d, err := caller.svc.Allow(ctx, "p", key)
	if err != nil || !d.Allowed || d.Remaining != 4 || d.Degraded {
		t.Fatalf("after the move: %+v, %v; want allowed by the new owner, remaining 4", d, err)
	}
	if n := caller.g.describes.Load(); n != 1 {
		t.Errorf("caller described the group %d times, want once", n)
	}
	if next.b.Memory("p").Len() != 1 || old.b.Memory("p").Len() != 0 {
		t.Errorf("keys held: new owner %d, old owner %d; want 1 and 0", next.b.Memory("p").Len(), old.b.Memory("p").Len())
	}

	// Nobody owns the partition now: refused, never guessed.
	tp.set(part, "")
	other := old
	if _, err := other.svc.Allow(ctx, "p", key); !errors.Is(err, limiter.ErrBackendUnavailable) {
		t.Errorf("no owner, on_backend_error closed: %v, want ErrBackendUnavailable", err)
	}
}

// TestHungOwnerGetsTheTimeout: an owner that does not answer (SIGSTOPped) costs the policy's
// timeout, then on_backend_error decides: open admits degraded, closed refuses, local
// decides in the caller's memory. Nothing waits past the timeout.
func TestHungOwnerGetsTheTimeout(t *testing.T) {
	base := limiter.Policy{Algorithm: limiter.SlidingLog, Limit: 2, Window: time.Minute}
	mk := func(name string, mode limiter.FailureMode) limiter.Policy {
		p := clusterPolicy(base, mode, 100*time.Millisecond)
		p.Name = name
		return p
	}
	tp, ins := startGroup(t, 2, mk("open", limiter.FailOpen), mk("closed", limiter.FailClosed), mk("local", limiter.FailLocal))
	const key = "tenant-hung"
	owner, caller := ownerOf(t, tp, ins, key)
	gate := make(chan struct{})
	owner.gate.Store(&gate)
	ctx := context.Background()

	d, err := caller.svc.Allow(ctx, "open", key)
	if err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("open: %+v, %v; want allowed, degraded", d, err)
	}
	if _, err := caller.svc.Allow(ctx, "closed", key); !errors.Is(err, limiter.ErrBackendUnavailable) {
		t.Errorf("closed: %v, want ErrBackendUnavailable", err)
	}
	var allowed int
	for range 3 {
		d, err := caller.svc.Allow(ctx, "local", key)
		if err != nil || !d.Degraded {
			t.Fatalf("local: %+v, %v; want a degraded local decision", d, err)
		}
		if d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("local: %d of 3 allowed by the caller's own memory, want its limit, 2", allowed)
	}
	// The owner wakes up (SIGCONT) with the batches its callers gave up on: past their
	// deadline, it decides none of them.
	owner.gate.Store(nil)
	close(gate)
	time.Sleep(300 * time.Millisecond)
	if n := owner.b.Memory("open").Len() + owner.b.Memory("closed").Len() + owner.b.Memory("local").Len(); n != 0 {
		t.Errorf("the owner, woken, counted %d decisions whose callers had given up", n)
	}
}

// TestConcurrentDecisionsShareRoundTrips: while an owner holds every slot of the caller, 200
// more decisions for it queue and leave in few batches; each is decided exactly (50 of 204
// allowed).
func TestConcurrentDecisionsShareRoundTrips(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 50, RefillPerSecond: 0.001}, limiter.FailClosed, 30*time.Second)
	tp, ins := startGroup(t, 2, p)
	const key = "tenant-batched"
	owner, caller := ownerOf(t, tp, ins, key)
	gate := make(chan struct{})
	owner.gate.Store(&gate)
	var n tally
	var wg sync.WaitGroup
	decide := func() { n.allow(caller.svc, key) }
	for range DefaultMaxInflight {
		wg.Go(decide)
	}
	for caller.b.sent.Load() < DefaultMaxInflight {
		time.Sleep(time.Millisecond) // every slot is taken, held at the owner
	}
	for range 200 {
		wg.Go(decide)
	}
	deadline := time.Now().Add(10 * time.Second)
	for queued(caller.b, owner.g.self) < 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	owner.gate.Store(nil)
	close(gate)
	wg.Wait()
	if n.allowed.Load() != 50 || n.failed.Load() != 0 {
		t.Errorf("204 decisions on a 50 bucket: %d allowed, %d failed; want 50, 0", n.allowed.Load(), n.failed.Load())
	}
	if n := caller.b.sent.Load(); n > 2*DefaultMaxInflight {
		t.Errorf("204 decisions took %d round trips; want at most %d (the slots alone, the queue in few batches)", n, 2*DefaultMaxInflight)
	}
}

func queued(b *Backend, addr string) int {
	p := b.peer(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// TestPolicyMismatchIsRefused: instances whose policy files disagree on a policy's numbers
// do not count by the owner's: the owner answers StatusPolicy and the caller's
// on_backend_error decides.
func TestPolicyMismatchIsRefused(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	const key = "tenant-mismatch"
	owner, caller := ownerOf(t, tp, ins, key)
	q := p
	q.Limit = 6
	var err error
	if caller.b, err = New(Config{Group: caller.g, Policies: []limiter.Policy{q}}); err != nil {
		t.Fatal(err)
	}
	if caller.svc, err = limiter.NewService(limiter.Config{Policies: []limiter.Policy{q}, Cluster: caller.b}); err != nil {
		t.Fatal(err)
	}
	if _, err := caller.svc.Allow(context.Background(), "p", key); !errors.Is(err, limiter.ErrBackendUnavailable) || !strings.Contains(err.Error(), "policy differs") {
		t.Errorf("a policy that differs at the owner: %v; want ErrBackendUnavailable naming it", err)
	}
	if owner.b.Memory("p").Len() != 0 {
		t.Error("the owner counted a decision of another policy")
	}
}

// TestOwnedDecisionIsAMemoryDecision: a key this instance owns is decided in process (the
// Service's LocalDecider path): no round trip, and no allocation once the key exists.
func TestOwnedDecisionIsAMemoryDecision(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 1 << 20, RefillPerSecond: 1}, limiter.FailClosed, time.Second)
	_, ins := startGroup(t, 1, p)
	in := ins[0]
	ctx := context.Background()
	now := time.Unix(1_764_489_600, 0)
	if _, err := in.svc.AllowN(ctx, "p", "tenant-1", now, 1); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if d, err := in.svc.AllowN(ctx, "p", "tenant-1", now, 1); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	})
	if allocs != 0 || in.b.sent.Load() != 0 {
		t.Errorf("an owned key's decision: %.1f allocs, %d round trips; want 0 and 0", allocs, in.b.sent.Load())
	}
}

// TestRouteIsTheOwnerDecideLocalFound: DecideLocal hands back the route to a key's owner
// (the Service passes it to DecideBy, which then looks nothing up again), and none for a
// key this instance owns; with its own route, another policy's, or one past the indexes,
// each decision counts at the key's owner under its own policy.
func TestRouteIsTheOwnerDecideLocalFound(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	q := p
	q.Name = "q"
	tp, ins := startGroup(t, 2, p, q)
	var key string // one ins[1] owns
	for i := 0; key == ""; i++ {
		if k := "k-" + strconv.Itoa(i); tp.truth[partitionOf(k, tp.parts)] == ins[1].g.self {
			key = k
		}
	}
	now := time.Unix(1_764_489_600, 0)
	pp, qp := ins[0].b.owned["p"].p, ins[0].b.owned["q"].p
	_, route, ok := ins[0].b.DecideLocal(limiter.BackendRequest{Policy: &pp, Key: key, Now: now, Cost: 1})
	if ok || route == 0 {
		t.Fatalf("DecideLocal of a key another instance owns: ok %v, route %#x; want false and a route", ok, route)
	}
	if _, mine, _ := ins[1].b.DecideLocal(limiter.BackendRequest{Policy: &pp, Key: key, Now: now, Cost: 0}); mine != 0 {
		t.Errorf("DecideLocal of an owned key: route %#x; want none", mine)
	}
	for _, r := range []struct {
		name  string
		pol   *limiter.Policy
		route uint64
	}{
		{"its own route", &pp, route},
		{"p's route for q", &qp, route},
		{"a route past the indexes", &pp, 99<<32 | 99},
	} {
		reqs := []limiter.BackendRequest{{Policy: r.pol, Key: key, Now: now, Cost: 1, Route: r.route}}
		out := make([]limiter.Decision, 1)
		if _, err := ins[0].b.DecideBy(context.Background(), time.Now().Add(5*time.Second), reqs, out); err != nil || !out[0].Allowed {
			t.Fatalf("%s: %+v, %v; want allowed", r.name, out[0], err)
		}
	}
	owner := ins[1].b
	if n := owner.Memory("p").Len(); n != 1 {
		t.Errorf("the owner holds %d keys of p; want 1", n)
	}
	if n := owner.Memory("q").Len(); n != 1 {
		t.Errorf("the owner holds %d keys of q; want 1 (the route of p's decision was not q's)", n)
	}
	if n := ins[0].b.Memory("p").Len() + ins[0].b.Memory("q").Len(); n != 0 {
		t.Errorf("the caller holds %d keys; want none", n)
	}
	d, err := ins[1].b.Memory("p").AllowN(context.Background(), key, now, 0)
	if err != nil || d.Remaining != 8 {
		t.Errorf("the owner's count of p for %s: %+v, %v; want 8 remaining (two decisions)", key, d, err)
	}
}

// TestBatchAnswersEachPartitionByItsOwnership: an owner decides a batch looking each
// partition's ownership up once (a small table by partition mod 16): with more partitions
// than the table holds, interleaved, a key of a partition it owns is decided and one of a
// partition it does not is answered stale, whatever shares its slot in the table; and a
// partition not restored yet answers not ready.
func TestBatchAnswersEachPartitionByItsOwnership(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Hour}, limiter.FailClosed, time.Second)
	tp := &topo{parts: 40, truth: map[int32]string{}}
	g := &group{t: tp, self: "self:1"}
	for q := range int32(tp.parts) {
		owner := "other:1"
		if q%2 == 0 { // 2, 18 and 34 share a slot of the table: 18 is not ready
			owner = g.self
		}
		tp.set(q, owner)
	}
	view := maps.Clone(tp.truth)
	g.view.Store(&view)
	b, err := New(Config{Group: g, Policies: []limiter.Policy{p}, Ready: func(q int32) bool { return q != 18 }})
	if err != nil {
		t.Fatal(err)
	}
	var items []item
	for i := 0; i < 400; i++ {
		items = append(items, item{policy: "p", fp: b.owned["p"].fp, key: "k-" + strconv.Itoa(i), now: 1_764_489_600e9, cost: 1})
	}
	res := b.decideBatch(items, nil)
	var decided int
	for i, it := range items {
		q := partitionOf(it.key, tp.parts)
		want := StatusOK
		switch {
		case q%2 != 0:
			want = StatusStale
		case q == 18:
			want = StatusNotReady
		}
		if res[i].status != want {
			t.Fatalf("%s (partition %d): %s; want %s", it.key, q, statusNames[res[i].status], statusNames[want])
		}
		if want == StatusOK {
			decided++
		}
	}
	if n := b.Memory("p").Len(); n != decided || decided == 0 {
		t.Errorf("the owner holds %d keys; want the %d it decided", n, decided)
	}
}

// TestForwardedKeysOutliveTheirFrame: an owner decides a forwarded batch's keys as views of
// the frame, which the next frame overwrites; the key it stores must be its own copy. Two
// keys of one length leave in turn (so each overwrites the other's bytes in the owner's
// buffer), then the owner decides the first itself, while its buffer holds the second:
// each keeps its own count.
func TestForwardedKeysOutliveTheirFrame(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 1, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	var keys []string // two keys ins[1] owns
	for i := 10; len(keys) < 2; i++ {
		if k := "k-" + strconv.Itoa(i); tp.truth[partitionOf(k, tp.parts)] == ins[1].g.self {
			keys = append(keys, k)
		}
	}
	ctx := context.Background()
	now := time.Unix(1_764_489_600, 0)
	for _, k := range keys {
		if d, err := ins[0].svc.AllowN(ctx, "p", k, now, 1); err != nil || !d.Allowed {
			t.Fatalf("forwarded %s: %+v, %v; want allowed", k, d, err)
		}
	}
	if n := ins[0].b.sent.Load(); n != 2 {
		t.Fatalf("%d frames sent, want 2 (each decision forwarded)", n)
	}
	for _, k := range keys {
		if d, err := ins[1].svc.AllowN(ctx, "p", k, now, 1); err != nil || d.Allowed {
			t.Errorf("%s at its owner after its forwarded decision: %+v, %v; want denied", k, d, err)
		}
	}
}

// TestStrangerCannotOpenAStream: without the group's key nobody opens a stream to an owner
// (its upgrade is refused 401), so nobody can make decisions or read answers on one; an
// instance with the key can, and decides over it.
func TestStrangerCannotOpenAStream(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute}, limiter.FailClosed, 5*time.Second)
	auth, err := cluster.NewAuth(cluster.AuthConfig{Key: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := cluster.NewAuth(cluster.AuthConfig{Key: []byte("fedcba9876543210fedcba9876543210")})
	if err != nil {
		t.Fatal(err)
	}
	tp, ins := startSigned(t, auth, 2, p)
	const key = "tenant-guarded"
	owner, caller := ownerOf(t, tp, ins, key)
	ctx := context.Background()
	for name, a := range map[string]*cluster.Auth{"unsigned": nil, "another key": other} {
		s, err := cluster.StreamDialer{Auth: a, Self: "stranger:1"}.Dial(ctx, owner.g.self, Path)
		if err == nil {
			_ = s.Conn.Close()
			t.Errorf("%s: a stream opened", name)
		} else if errors.Is(err, cluster.ErrNoStream) || !strings.Contains(err.Error(), "refuse") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if d, err := caller.svc.Allow(ctx, "p", key); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("a member's decision over the stream: %+v, %v", d, err)
	}
}

// TestQueuedDecisionEndsAtItsOwnDeadline: a decision of a 50 ms policy queued behind
// batches of a 30 s one (every slot held at the owner) ends at its own deadline, by
// on_backend_error, while the owner still holds them; it is never sent. The held decisions
// are decided once the owner answers.
func TestQueuedDecisionEndsAtItsOwnDeadline(t *testing.T) {
	slow := clusterPolicy(limiter.Policy{Name: "slow", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute}, limiter.FailClosed, 30*time.Second)
	fast := clusterPolicy(limiter.Policy{Name: "fast", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute}, limiter.FailOpen, 50*time.Millisecond)
	tp, ins := startGroup(t, 2, slow, fast)
	const key = "tenant-mixed"
	owner, caller := ownerOf(t, tp, ins, key)
	gate := make(chan struct{})
	owner.gate.Store(&gate)
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range DefaultMaxInflight {
		wg.Go(func() {
			if d, err := caller.svc.Allow(ctx, "slow", key); err != nil || !d.Allowed || d.Degraded {
				failed.Add(1)
			}
		})
	}
	for caller.b.sent.Load() < DefaultMaxInflight {
		time.Sleep(time.Millisecond) // every slot is held at the owner
	}
	got := make(chan limiter.Decision, 1)
	go func() {
		d, _ := caller.svc.Allow(ctx, "fast", key)
		got <- d
	}()
	select {
	case d := <-got:
		if !d.Allowed || !d.Degraded {
			t.Errorf("the queued 50 ms decision: %+v; want on_backend_error open (allowed, degraded)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued 50 ms decision still waits behind the held batches")
	}
	owner.gate.Store(nil)
	close(gate)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d held decisions of the 30 s policy failed", failed.Load())
	}
	if n := owner.b.Memory("fast").Len(); n != 0 {
		t.Errorf("the owner counted %d decisions of the queued call that had given up", n)
	}
}

// TestDecideByAnswered: a forwarded decision reports when its answer arrived (the
// Service's latency ends there, without a clock read of its own); an owned one reports
// zero (the Service reads the clock).
func TestDecideByAnswered(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 10, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	keyOf := func(owner string) string {
		for i := 0; ; i++ {
			if k := "k-" + strconv.Itoa(i); tp.truth[partitionOf(k, tp.parts)] == owner {
				return k
			}
		}
	}
	ctx := context.Background()
	now := time.Unix(1_764_489_600, 0)
	out := make([]limiter.Decision, 1)
	before := time.Now()
	at, err := ins[0].b.DecideBy(ctx, before.Add(5*time.Second), []limiter.BackendRequest{{Policy: &p, Key: keyOf(ins[1].g.self), Now: now, Cost: 1}}, out)
	if err != nil || !out[0].Allowed {
		t.Fatalf("forwarded: %+v, %v; want allowed", out[0], err)
	}
	if at.Before(before) || at.After(time.Now()) {
		t.Errorf("forwarded: answered at %v; want between the call's start %v and its return", at, before)
	}
	at, err = ins[0].b.DecideBy(ctx, time.Now().Add(5*time.Second), []limiter.BackendRequest{{Policy: &p, Key: keyOf(ins[0].g.self), Now: now, Cost: 1}}, out)
	if err != nil || !out[0].Allowed || !at.IsZero() {
		t.Errorf("owned: %+v, %v, answered %v; want allowed, answered zero", out[0], err, at)
	}
}

// TestAnswerGivenUpFreesItsSlot: a batch's slot is held until each of its callers took its
// answer; a caller that returns before taking one (here the first of its two decisions
// failed: the owner does not have its numbers) gives the other up, and the slot is freed
// all the same: the next decision is answered, not left to its timeout.
func TestAnswerGivenUpFreesItsSlot(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 100, Window: time.Minute}, limiter.FailClosed, 2*time.Second)
	tp, ins := startGroup(t, 2, p)
	const key = "tenant-given-up"
	owner, caller := ownerOf(t, tp, ins, key)
	gate := make(chan struct{})
	owner.gate.Store(&gate)
	ctx := context.Background()
	held := make(chan error, DefaultMaxInflight)
	for range DefaultMaxInflight {
		go func() { _, err := caller.svc.Allow(ctx, "p", key); held <- err }()
	}
	for caller.b.sent.Load() < DefaultMaxInflight {
		time.Sleep(time.Millisecond) // every slot is held at the owner
	}
	q := p
	q.Limit = 101 // numbers the owner does not have: it answers StatusPolicy
	pair := make(chan error, 1)
	go func() {
		now := time.Now()
		reqs := []limiter.BackendRequest{{Policy: &q, Key: key, Now: now, Cost: 1}, {Policy: &p, Key: key, Now: now, Cost: 1}}
		_, err := caller.b.DecideBy(ctx, now.Add(2*time.Second), reqs, make([]limiter.Decision, 2))
		pair <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); queued(caller.b, owner.g.self) < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // both queue: they leave in one batch
	}
	owner.gate.Store(nil)
	close(gate)
	for range DefaultMaxInflight {
		if err := <-held; err != nil {
			t.Fatalf("a held decision: %v", err)
		}
	}
	if err := <-pair; !errors.Is(err, ErrOwner) {
		t.Fatalf("a pair whose first policy differs at the owner: %v; want ErrOwner", err)
	}
	if d, err := caller.svc.Allow(ctx, "p", key); err != nil || !d.Allowed || d.Degraded {
		t.Errorf("the next decision: %+v, %v; want allowed by the owner (the slot freed)", d, err)
	}
}

// TestOwnerWithoutStreamsIsAskedByPOST: an owner that answers the upgrade 404 (a slide
// before streams) is asked by one POST per batch; concurrent decisions are decided exactly,
// and a POST's answers hold no slot (only a stream's are held until taken).
func TestOwnerWithoutStreamsIsAskedByPOST(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 30, Window: time.Hour}, limiter.FailClosed, 5*time.Second)
	tp, ins := startGroup(t, 2, p)
	const key = "tenant-post"
	owner, caller := ownerOf(t, tp, ins, key)
	owner.noStream.Store(true)
	var n tally
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() { n.allow(caller.svc, key) })
	}
	wg.Wait()
	if n.allowed.Load() != 30 || n.failed.Load() != 0 {
		t.Errorf("40 decisions on a limit of 30 by POST: %d allowed, %d failed; want 30, 0", n.allowed.Load(), n.failed.Load())
	}
	// A POST's slot is freed (done) after its answers reach their callers, so the last
	// caller may return just before it: wait for the slots to come back, not for ever.
	pr := caller.b.peer(owner.g.self)
	settled := func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return pr.st == nil && pr.untaken.Load() == 0 && pr.held == 0 && pr.inflight == 0
	}
	for deadline := time.Now().Add(10 * time.Second); !settled() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.st != nil || pr.untaken.Load() != 0 || pr.held != 0 || pr.inflight != 0 {
		t.Errorf("10 s after the POSTs: stream %v, %d answers untaken, %d slots held, %d in flight; want none", pr.st, pr.untaken.Load(), pr.held, pr.inflight)
	}
}

// TestOtherStreamVersionIsRefusedClearly: an upgrade to another version of the stream (a
// slide of slide-stream/1's HMAC frames, during a rolling upgrade) is answered 426 naming
// this one, not taken: the asker falls back to POSTs (TestOwnerWithoutStreamsIsAskedByPOST).
func TestOtherStreamVersionIsRefusedClearly(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.FixedWindow, Limit: 5, Window: time.Minute}, limiter.FailClosed, 5*time.Second)
	_, ins := startGroup(t, 1, p)
	req, err := http.NewRequest(http.MethodPost, "http://"+ins[0].g.self+Path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "slide-stream/1")
	req.Header.Set(cluster.HeaderPeer, "old:1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), cluster.StreamProtocol) {
		t.Errorf("an upgrade to slide-stream/1: %s %q; want 426 naming %s", resp.Status, body, cluster.StreamProtocol)
	}
}

// TestCallersGivingUpNeverStallTheStream: under load, callers whose contexts end at random
// moments (before their batch leaves, while it is at the owner, as or after its answer
// arrives) must leave no slot held: a held slot with nobody to take its answer would stop
// every later decision to that owner until its timeout. After the storm, every caller with a
// live context is decided by the owner, none degraded.
func TestCallersGivingUpNeverStallTheStream(t *testing.T) {
	p := clusterPolicy(limiter.Policy{Name: "p", Algorithm: limiter.TokenBucket, Capacity: 1 << 30, RefillPerSecond: 1000}, limiter.FailClosed, 2*time.Second)
	tp, ins := startGroup(t, 2, p)
	const key = "tenant-storm"
	_, caller := ownerOf(t, tp, ins, key)
	var wg sync.WaitGroup
	var gaveUp, decided atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for i := range 150 {
				// 0 to ~300 µs: on loopback a round trip is tens of µs, so some contexts end
				// before the batch leaves, some at the owner, some as the answer arrives.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((g*7919+i*104729)%300)*time.Microsecond)
				if _, err := caller.svc.Allow(ctx, "p", key); err != nil {
					gaveUp.Add(1)
				} else {
					decided.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	t.Logf("%d decided, %d gave up", decided.Load(), gaveUp.Load())
	if gaveUp.Load() == 0 || decided.Load() == 0 {
		t.Fatalf("%d decided, %d gave up: the storm should have both", decided.Load(), gaveUp.Load())
	}
	for range 3 { // more than the slots a stream has: each must be free again
		var after sync.WaitGroup
		for range 64 {
			after.Go(func() {
				d, err := caller.svc.Allow(context.Background(), "p", key)
				if err != nil || !d.Allowed || d.Degraded {
					t.Errorf("after the storm: %+v, %v; want allowed by the owner", d, err)
				}
			})
		}
		after.Wait()
	}
}

// tally counts decisions of policy p: those allowed, and those that failed with an error.
type tally struct{ allowed, failed atomic.Int64 }

// allow decides key of policy p on svc and counts the outcome.
func (n *tally) allow(svc *limiter.Service, key string) {
	d, err := svc.Allow(context.Background(), "p", key)
	switch {
	case err != nil:
		n.failed.Add(1)
	case d.Allowed:
		n.allowed.Add(1)
	}
}
