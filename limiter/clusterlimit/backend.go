package clusterlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/internal/logrepeat"
	"github.com/slide-metrics/slide/limiter"
)

// Path is the peer route an owner decides forwarded batches on.
const Path = "/internal/v1/limit"

// DefaultMaxInflight is how many batches one instance keeps on the wire to one owner at
// once; the decisions arriving meanwhile wait and leave together in the next. The second
// slot is taken only behind a small batch (smallBatch): under load one batch flies at a
// time and the callers gather into it (BenchmarkClusterDecision: ~120 decisions a frame,
// against ~44 when every slot took what was queued), fewer writes, reads and MACs per
// decision, while a few callers still leave at once.
const DefaultMaxInflight = 2

// Errors of Decide: the Service decides each policy of the call by its on_backend_error.
var (
	// ErrNoOwner: the group was not described yet, or the key's partition has no
	// reachable owner in the view.
	ErrNoOwner = errors.New("clusterlimit: the key's owner is unknown")
	// ErrOwner wraps a status an owner answered other than ok (stale after the one
	// retry, not ready, policy differs, store full).
	ErrOwner = errors.New("clusterlimit: the owner did not decide")
)

// Group is what the backend needs of the consumer group; *cluster.Cluster is one.
type Group interface {
	Self() string
	KeyOwner(key string) (partition int32, addr string, ok bool)
	Assigned(p int32) bool
	Partitions() int
	PartitionOwner(p int32) string
	MemberGone(addr string, since time.Time) bool
	Describe(ctx context.Context, since time.Time)
	PostPeer(ctx context.Context, op, addr, path string, body []byte) ([]byte, error)
	VerifyPeer(r *http.Request, body []byte) (cluster.Exchange, error)
	DialStream(ctx context.Context, addr, path string) (*cluster.Stream, error)
	AcceptStream(w http.ResponseWriter, r *http.Request) (*cluster.Stream, error)
	ObservePeer(op string, err error, d time.Duration)
	Served(code int, d time.Duration)
}

var _ Group = (*cluster.Cluster)(nil)

// Config builds a Backend. Group is required; Policies are the policies with backend
// cluster, every instance of the group configured alike.
type Config struct {
	Group    Group
	Policies []limiter.Policy
	// Memory configures the owned state of each policy (limiter.NewMemory).
	Memory limiter.MemoryConfig
	// MaxInflight bounds the batches on the wire to one owner; default DefaultMaxInflight.
	MaxInflight int
	// Ready reports whether this instance restored the state of partition p (a
	// checkpoint) and may decide its keys; nil: always.
	Ready func(p int32) bool
	// Checkpoint configures the owned state's checkpoints (OnGeneration, Run, Close).
	Checkpoint CheckpointConfig
	// Logger receives owner errors, rate-limited; nil discards them.
	Logger *slog.Logger
	// Registerer receives the slide_limiter_cluster_* collectors; nil registers nothing.
	Registerer prometheus.Registerer
}

// Validate reports a config New would refuse.
func (c *Config) Validate() error {
	if c.Group == nil {
		return errors.New("clusterlimit: no group")
	}
	if c.MaxInflight < 0 {
		return errors.New("clusterlimit: negative max inflight")
	}
	if err := c.Checkpoint.Validate(); err != nil {
		return err
	}
	return c.Memory.Validate()
}

// Backend is limiter.Backend for the policies with backend cluster: each key is decided by
// the owner of its partition, this instance's memory when it owns it, else the owner over
// the peer channel (see the package doc).
type Backend struct {
	g Group

	owned    map[string]*owned
	byIdx    []*owned // each policy at its idx (a decision's route)
	inflight int
	ready    func(int32) bool
	log      *slog.Logger
	logEvery *rate.Limiter
	logRep   *logrepeat.Log
	m        metrics

	mu     sync.Mutex            // adding to peers
	peers  atomic.Pointer[peers] // copied on write
	byPart peerCache             // the channel to each partition's owner last found (peerOf)
	sent   atomic.Int64          // batches sent to owners
	hold   func()                // tests: called before a stream's batch is decided

	own     ownership
	cp      CheckpointConfig
	bg      sync.WaitGroup // handovers under way
	jobMu   sync.Mutex
	jobs    []func()         // handovers queued, in generation order
	working bool             // a goroutine runs jobs
	cpMu    sync.Mutex       // one checkpoint write at a time
	cpBufs  map[int32][]byte // each partition's last record's buffer, reused (records)
	cpKeys  int              // the keys in the last records, for the final write's log line
	topicMu sync.Mutex
	cpParts int           // the checkpoint topic's partitions, once known
	w       *kafka.Writer // checkpoints, once the topic is known

	resolve atomic.Pointer[func(name, key string) (limiter.Policy, string, bool)] // SetResolver
}

// metrics are the slide_limiter_cluster_* collectors.
type metrics struct {
	checkpoints prometheus.Counter
	restored    prometheus.Counter
}

// warnf logs at level: the same line at most once a minute, the next one saying how many were
// held back (a peer or the broker down fails every retry alike: logrepeat), and at most a
// few lines a second in all.
func (b *Backend) warnf(level slog.Level, msg string, args ...any) {
	if ok, held := b.logRep.AllowIf(msg+fmt.Sprint(args...), b.logEvery.Allow); ok {
		b.log.Log(context.Background(), level, msg, append(args, b.logRep.Attrs(held)...)...)
	}
}

// owned is one policy's state on this instance, for the keys it owns.
type owned struct {
	p        limiter.Policy
	idx      int // in Backend.byIdx
	fp       uint64
	mem      *limiter.Memory
	variants sync.Map // fingerprint → *limiter.Memory: the plans' numbers on mem's state (plans.go)
}

// New builds a Backend. Its Handler must be served on Path.
func New(cfg Config) (*Backend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Backend{g: cfg.Group, owned: map[string]*owned{}, inflight: cfg.MaxInflight,
		ready: cfg.Ready, log: cfg.Logger, cp: cfg.Checkpoint,
		logEvery: rate.NewLimiter(rate.Every(time.Second), 5), logRep: logrepeat.New(time.Minute)}
	b.own.owned, b.own.ready, b.own.epoch = map[int32]bool{}, map[int32]bool{}, map[int32]uint64{}
	b.own.finals = map[int32]finalMark{}
	b.peers.Store(&peers{byAddr: map[string]*peer{}})
	if b.cp.Wait == 0 {
		b.cp.Wait = 2 * b.cp.Interval
	}
	b.m = metrics{
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{Name: "slide_limiter_cluster_checkpoints_total",
			Help: "Partitions' limiter state written to the checkpoint topic (backend cluster)."}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{Name: "slide_limiter_cluster_restored_keys_total",
			Help: "Keys' limiter state restored from checkpoints when this instance became their owner."}),
	}
	// Once the instance is ready a restore no longer holds its readiness, so the gauge is
	// how one sees a restore that does not end.
	restoring := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "slide_limiter_cluster_partitions_restoring",
		Help: "Partitions this instance owns whose limiter state (backend cluster) it is restoring from the checkpoint topic; their keys decide by on_backend_error meanwhile."},
		func() float64 { return float64(len(b.Restoring())) })
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{b.m.checkpoints, b.m.restored, restoring} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	if b.inflight == 0 {
		b.inflight = DefaultMaxInflight
	}
	if b.ready == nil {
		b.ready = func(int32) bool { return true }
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	for _, p := range cfg.Policies {
		mem, err := limiter.NewMemory(p, cfg.Memory)
		if err != nil {
			return nil, err
		}
		o := &owned{p: p, fp: Fingerprint(&p), mem: mem, idx: len(b.byIdx)}
		b.owned[p.Name] = o
		b.byIdx = append(b.byIdx, o)
	}
	return b, nil
}

// Memory is the owned state of the named policy, nil when it is not a cluster policy.
func (b *Backend) Memory(policy string) *limiter.Memory {
	if o := b.owned[policy]; o != nil {
		return o.mem
	}
	return nil
}

// Decide decides reqs, each at its key's owner: here when this instance owns the key's
// partition, else forwarded; the forwarded ones of one owner share round trips with every
// concurrent decision for that owner. An owner that answers stale is asked again once
// after the group is described anew.
func (b *Backend) Decide(ctx context.Context, reqs []limiter.BackendRequest, out []limiter.Decision) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Second)
	}
	var answered time.Time
	return b.decideBy(ctx, deadline, reqs, out, &answered)
}

var _ limiter.DeadlineDecider = (*Backend)(nil)

// DecideLocal decides req here when this instance owns its key and has restored the key's
// partition (limiter.LocalDecider: the Service then makes no call); false otherwise, with
// nothing decided, and, when another instance owns the key, the route to it (its policy
// and its owner's channel), so that DecideBy does not look the owner up again.
func (b *Backend) DecideLocal(req limiter.BackendRequest) (limiter.Decision, uint64, bool) {
	o := b.owned[req.Policy.Name]
	if o == nil {
		return limiter.Decision{}, 0, false
	}
	p, addr, ok := b.g.KeyOwner(o.route(req.Key))
	switch {
	case !ok:
		return limiter.Decision{}, 0, false
	case addr != b.g.Self():
		return limiter.Decision{}, routeOf(o, b.peerOf(p, addr)), false
	}
	d, ok := b.decideHere(o, p, &req)
	return d, 0, ok
}

// decideHere is DecideLocal's decision of req, of o's policy, whose key is in partition p,
// which this instance owns: false when it cannot decide it here (the partition not yet
// restored, a variant it does not hold), with nothing decided.
func (b *Backend) decideHere(o *owned, p int32, req *limiter.BackendRequest) (limiter.Decision, bool) {
	mem := o.mem
	if !o.sameNumbers(req.Policy) {
		if mem = o.variant(req.Policy, Fingerprint(req.Policy)); mem == nil {
			return limiter.Decision{}, false
		}
	}
	it := item{key: req.Key, now: req.Now.UnixNano(), cost: req.Cost}
	res := b.take(mem, p, &it)
	return res.d, res.status == StatusOK
}

// routeOf is the route (limiter.BackendRequest.Route) of a decision of o's policy that pe's
// owner takes: both indexes, each plus one.
func routeOf(o *owned, pe *peer) uint64 { return uint64(o.idx+1)<<32 | uint64(pe.idx+1) }

// routed is the policy and the owner's channel of r's route, nils when it has none (or
// one that is not of r's policy).
func (b *Backend) routed(r *limiter.BackendRequest) (*owned, *peer) {
	if r.Route == 0 {
		return nil, nil
	}
	oi, pi := int(r.Route>>32)-1, int(uint32(r.Route))-1
	list := b.peers.Load().list
	if oi < 0 || oi >= len(b.byIdx) || pi < 0 || pi >= len(list) || b.byIdx[oi].p.Name != r.Policy.Name {
		return nil, nil
	}
	return b.byIdx[oi], list[pi]
}

var _ limiter.LocalDecider = (*Backend)(nil)

// finish turns an owner's result into the decision of r.
func (b *Backend) finish(r *limiter.BackendRequest, c *call, d *limiter.Decision) error {
	if c.res.status != StatusOK {
		return fmt.Errorf("%w: %s for %q", ErrOwner, statusNames[c.res.status], r.Key)
	}
	*d = c.res.d
	if n := c.res.level; n > 0 {
		if n > len(r.Key) {
			return fmt.Errorf("%w: a level of %d bytes for %q", ErrCorrupt, n, r.Key)
		}
		d.Level = r.Key[:n] // the owner's level key, a prefix of r.Key
	}
	d.Window, d.Policy = r.Policy.QuotaWindow(), r.Policy.Name
	if cal := r.Policy.Calendar; cal != 0 {
		// The period the owner counted in: its length at the decision's time (23 or 25 hours
		// across a DST change), as a memory decision says it.
		start, end := cal.Bounds(r.Policy.Location, r.Now.UnixNano())
		d.Window = time.Duration(end - start)
	}
	return nil
}

// decideOwned decides it here, this instance owning partition p.
func (b *Backend) decideOwned(o *owned, mem *limiter.Memory, p int32, it *item, d *limiter.Decision) error {
	if mem == nil {
		return fmt.Errorf("%w: %s (this instance) for %q", ErrOwner, statusNames[StatusPolicy], it.key)
	}
	res := b.take(mem, p, it)
	if res.status != StatusOK {
		return fmt.Errorf("%w: %s (this instance) for %q", ErrOwner, statusNames[res.status], it.key)
	}
	*d = res.d
	return nil
}

// take decides one item as its owner: the partition must be in this generation's
// assignment and restored. A partition leaves (OnGeneration) only between decisions.
func (b *Backend) take(mem *limiter.Memory, p int32, it *item) result {
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	return b.takeLocked(mem, p, it)
}

// takeLocked is take, the ownership lock held for reading.
func (b *Backend) takeLocked(mem *limiter.Memory, p int32, it *item) result {
	if st := b.ownStatusLocked(p); st != StatusOK {
		return result{status: st}
	}
	return decideMem(mem, it)
}

// ownStatusLocked is StatusOK when this instance owns partition p and restored it, else
// why not (stale, not ready); the ownership lock held for reading.
func (b *Backend) ownStatusLocked(p int32) byte {
	owned, ready := b.ownsLocked(p)
	switch {
	case !owned:
		return StatusStale
	case !ready:
		return StatusNotReady
	}
	return StatusOK
}

// decideMem decides it by mem, its partition's ownership checked.
func decideMem(mem *limiter.Memory, it *item) result {
	var r result
	decideMemInto(mem, it, &r)
	return r
}

// decideMemInto is decideMem into *r, which must be zero (a batch's results are written in
// place: a result is a Decision and more, copied twice on its way out otherwise).
func decideMemInto(mem *limiter.Memory, it *item, r *result) {
	var err error
	r.d, err = mem.AllowN(context.Background(), it.key, time.Unix(0, it.now), it.cost)
	switch {
	case errors.Is(err, limiter.ErrStoreFull):
		*r = result{status: StatusFull}
	case err != nil:
		*r = result{status: StatusBad}
	}
}

// Handler serves Path: a signed batch from a peer, decided here key by key (stale for a
// key whose partition this instance does not own), answered signed.
func (b *Backend) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if r.Method == http.MethodPost && cluster.IsUpgrade(r) {
			b.serveUpgrade(w, r, start) // counts the upgrade, then each batch, not the stream's life
			return
		}
		if cluster.IsOtherUpgrade(r) {
			// A peer of another version: it falls back to one POST per batch (ErrNoStream).
			b.g.Served(plain(w, http.StatusUpgradeRequired, "peer stream "+r.Header.Get("Upgrade")+
				" not served: this instance speaks "+cluster.StreamProtocol+"; send batches as POSTs"), time.Since(start))
			return
		}
		code := b.serve(w, r)
		b.g.Served(code, time.Since(start))
	})
}

func (b *Backend) serve(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		return plain(w, http.StatusMethodNotAllowed, "POST only")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	if err != nil {
		return plain(w, http.StatusBadRequest, "reading the batch: "+err.Error())
	}
	if len(body) > maxRequestBytes {
		return plain(w, http.StatusRequestEntityTooLarge, "batch too large")
	}
	x, err := b.g.VerifyPeer(r, body)
	if err != nil {
		return plain(w, http.StatusUnauthorized, "peer request not authenticated: "+err.Error())
	}
	// Every caller of a batch that arrives past its deadline has given up (and decided by
	// on_backend_error): counting its decisions would only charge keys for nothing, as a
	// SIGSTOPped owner would on waking up.
	// The header is in whole milliseconds, cut down: a batch in the deadline's own millisecond
	// may be past it, so that millisecond is refused too (a caller still waiting then gets
	// its on_backend_error a fraction of a millisecond early, never a decision it gave up on).
	if dl, err := strconv.ParseInt(r.Header.Get(cluster.HeaderDeadline), 10, 64); err == nil && time.Now().UnixMilli() >= dl {
		return plain(w, http.StatusGatewayTimeout, "deadline passed before the batch was decided")
	}
	if len(body) > 0 && body[0] == kindPeek {
		return b.servePeek(w, x, body)
	}
	items, err := decodeRequest(body)
	if err != nil {
		return plain(w, http.StatusBadRequest, err.Error())
	}
	res := b.decideBatch(items, nil)
	x.Answer(w, appendAnswer(make([]byte, 0, 16+len(res)*24), res))
	return http.StatusOK
}

// decideBatch decides a forwarded batch here, key by key, appending the results to res:
// stale for a key whose partition this instance does not own, policy for one whose policy
// differs. The ownership lock is taken once for the batch (a partition leaves between
// batches, never within one: the batch is decided at one instant of the assignment), each
// partition's ownership is looked up once a batch (nearly: the last few partitions seen
// are kept), and a run of items of one policy looks it up once.
func (b *Backend) decideBatch(items []item, res []result) []result {
	self := b.g.Self()
	var o *owned
	var name string
	var seen [16]struct { // by partition mod 16: p's ownership status, once looked up
		p  int32
		st byte
		ok bool
	}
	b.own.mu.RLock()
	defer b.own.mu.RUnlock()
	for i := range items {
		it := &items[i]
		if o == nil || it.policy != name {
			o, name = b.owned[it.policy], it.policy
		}
		var mem *limiter.Memory
		if o != nil {
			mem = b.forwarded(o, it)
		}
		if mem == nil {
			res = append(res, result{status: StatusPolicy})
			continue
		}
		p, addr, ok := b.g.KeyOwner(o.route(it.key))
		if !ok || addr != self {
			res = append(res, result{status: StatusStale})
			continue
		}
		e := &seen[uint32(p)%uint32(len(seen))]
		if !e.ok || e.p != p {
			e.p, e.st, e.ok = p, b.ownStatusLocked(p), true
		}
		if e.st != StatusOK {
			res = append(res, result{status: e.st})
			continue
		}
		res = append(res, result{})
		decideMemInto(mem, it, &res[len(res)-1])
	}
	return res
}

func plain(w http.ResponseWriter, code int, msg string) int {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
	return code
}
