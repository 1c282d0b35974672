// Package redislimit is the cluster-wide backend of package limiter: one Lua
// script per algorithm (scripts/*.lua, embedded), run with EVALSHA and a
// NOSCRIPT fallback to EVAL, reading the server's TIME so every instance
// shares one clock, setting the key's TTL in the same script, and using keys
// with a hash tag, rl:{key}:policy:alg, so Redis Cluster works and every
// policy of one key lands in one slot.
//
// The scripts mirror the pure algorithms of package limiter (which work in
// nanoseconds; the scripts in microseconds, the resolution of TIME), and the
// conformance suite in limiter/limitertest runs over both. Redis 5 or newer is
// required (effects replication of scripts that call TIME).
//
// The fixed window keeps an integer string per window, Key:N for window number N
// (same hash tag, so the same slot), one INCRBY per admission, the least work a script
// can do per decision. The caller names N (from Redis's TIME as the last reply showed it)
// and passes the counter in KEYS, so a script touches only declared keys; the script
// checks N against TIME and, at a window's edge, touches nothing and answers TIME for a
// second try (fixed.go). On a single server (not Cluster) fixed-window calls that arrive
// while another is in flight wait for it and then go together in one script call,
// fixed_window_batch.lua (Config.Pipelines, batch.go): one read, one write and one script
// run for all of them, and no timer.
//
// NewClient (conn.go) reaches one server by host:port or URL (redis://, rediss://, an
// ACL user), a Redis Cluster or a Sentinel-managed master, with the backend's safety
// options in every mode. Every per-algorithm script touches the keys of one hash slot,
// so a decision never spans slots. A Cluster client runs without go-redis's redirect loop
// (it also retries timeouts, which could count a decision twice): the backend itself sends
// a call answered with MOVED or ASK once to the node named (redirect.go), and a decision
// that fails otherwise follows on_backend_error and reloads the slot map for the next one.
package redislimit

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/slide-metrics/slide/limiter"
)

var algTag = [...]string{
	limiter.FixedWindow:    "fw",
	limiter.SlidingLog:     "sl",
	limiter.SlidingCounter: "sc",
	limiter.TokenBucket:    "tb",
	limiter.LeakyBucket:    "lb",
}

// Client is the part of go-redis the backend uses. *goredis.Client,
// *goredis.ClusterClient, *goredis.Ring and *goredis.AutoPipeliner satisfy it.
type Client interface {
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *goredis.Cmd
	Eval(ctx context.Context, script string, keys []string, args ...any) *goredis.Cmd
	ScriptLoad(ctx context.Context, script string) *goredis.StringCmd
	Pipeline() goredis.Pipeliner
}

// ErrUnsafeClient is returned by New for a client that would retry a failed
// command (a retried decision can count a request twice) or ignore the
// context deadline (the policy timeout would not bound the call).
var ErrUnsafeClient = errors.New("redis client retries commands or ignores context deadlines")

// Config tunes a Backend. The zero value is ready to use.
type Config struct {
	// KeyPrefix starts every key. Default "rl:".
	KeyPrefix string
	// ClientClock makes the scripts use the now passed in each Request
	// instead of Redis TIME. For tests and replays only: instances with
	// skewed clocks would disagree about windows. Default false.
	ClientClock bool
	// OnScriptCall, if set, is called once per script invocation sent to
	// Redis (EVALSHA or EVAL), with the command name. For tests and metrics.
	OnScriptCall func(cmd string)
	// OnRedirect, if set, is called once per MOVED or ASK reply of a Cluster node that
	// the backend followed (redirect.go), with "moved" or "ask": a slot migration
	// (ask) or a failover (moved) in progress. For metrics.
	OnRedirect func(kind string)
	// Pipelines bounds the fixed-window Decide calls in flight at once on a
	// single server (*goredis.Client; a Cluster's script keys must share a
	// slot, so there each call goes on its own). Calls that arrive while that
	// many are out wait, and the next round trip decides all of them in one
	// script call (fixed_window_batch): concurrent decisions then cost Redis
	// one read, one write and one script run for all instead of each. Nothing
	// waits on a timer: a call that finds a slot free is sent at once. Calls
	// with other algorithms are not gathered. Default DefaultPipelines (1);
	// -1 sends every call on its own.
	Pipelines int
}

// Validate reports a KeyPrefix that would break the hash tag: a '{' or '}'
// in the prefix would make Redis Cluster hash the wrong part of the key.
func (c *Config) Validate() error {
	if strings.ContainsAny(c.KeyPrefix, "{}") {
		return fmt.Errorf("redis limiter config: key prefix %q must not contain { or }", c.KeyPrefix)
	}
	if c.Pipelines < -1 {
		return fmt.Errorf("redis limiter config: pipelines %d: want -1 (no coalescing), 0 (default %d) or more", c.Pipelines, DefaultPipelines)
	}
	return nil
}

// Options returns go-redis options suited to the backend: no retries (a
// retried decision can count a request twice), context deadlines honoured
// (the policy timeout bounds each call), and one dial attempt per call:
// go-redis would otherwise retry a refused dial after 100 ms, longer than the
// default policy timeout, so every decision of an outage's first moments would
// wait out its timeout for an answer the refused dial gave at once.
//
// Recovery after an outage: once PoolSize dials have failed, go-redis's pool
// fails every dial at once and leaves it to a background probe to find the
// server again, retrying that probe only once a second. The dialer here knows
// when the pool is in that state (it counts the failures the pool counts) and
// then keeps each probe trying every 50 ms for up to a minute, so decisions
// return to Redis within about 50 ms of it answering again instead of up to a
// second (TestOutageUnderLoad). A client closed during an outage keeps that
// probe goroutine until it ends, at most a minute. Pipelines share the main
// pool (PipelinePoolSize -1), whose failures are the ones the dialer counts.
func Options(addr string) *goredis.Options {
	o := &goredis.Options{
		Addr:                  addr,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		// go-redis dials in the background with this as the context deadline of
		// each attempt, a caller waiting only its own deadline; connects are
		// bounded by dialAttempt, so this bounds only the probe below.
		DialTimeout:  probeFor,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		// Pipelines (Decide of several requests) on the main pool: go-redis's
		// dedicated pipeline pool counts its own failed dials, so the dialer
		// below, which mirrors the main pool's count, took a pipeline's dial in
		// an outage for the probe's and kept dialing until the caller's deadline
		// (TestPipelinedOutageFailsFast).
		PipelinePoolSize: -1,
	}
	// PoolSize is read at each dial: a caller may set it after Options returns.
	o.Dialer = newDialer(nil, func() int64 { return poolSize(o.PoolSize, 10) }).dial
	return o
}

const (
	probeFor    = time.Minute           // how long one background probe keeps dialing
	probeEvery  = 50 * time.Millisecond // its pace
	dialAttempt = time.Second           // bound of one TCP connect (and TLS handshake)
)

// dialer connects to Redis (with TLS when tls is set) and mirrors go-redis's dial circuit
// breaker: each node's pool counts failed dials and, once PoolSize have failed, stops
// dialing for callers and probes from one goroutine. failed counts the same failures per
// address (one attempt per dial: DialerRetries 1; a Cluster or Sentinel client has one pool
// per node) and is reset, as the pool's count is, only by a probe that gets through.
type dialer struct {
	tls     *tls.Config
	pool    func() int64 // the pool size of one node
	noProbe bool         // every dial is one attempt (Sentinel: the probe must re-ask the master's address)
	failed  sync.Map     // addr → *atomic.Int64
}

func newDialer(t *tls.Config, pool func() int64) *dialer { return &dialer{tls: t, pool: pool} }

func (d *dialer) failures(addr string) *atomic.Int64 {
	if v, ok := d.failed.Load(addr); ok {
		return v.(*atomic.Int64)
	}
	v, _ := d.failed.LoadOrStore(addr, new(atomic.Int64))
	return v.(*atomic.Int64)
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	failed := d.failures(addr)
	if d.noProbe || failed.Load() < d.pool() {
		// A dial for a caller: one attempt, failing as fast as the network does.
		c, err := d.connect(ctx, network, addr)
		if err != nil {
			failed.Add(1)
		}
		return c, err
	}
	// The pool's probe: keep trying until the server answers or the probe's
	// context (DialTimeout) ends, rather than failing and sleeping a second.
	for {
		c, err := d.connect(ctx, network, addr)
		if err == nil {
			failed.Store(0)
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(probeEvery):
		}
	}
}

// connect is one TCP connect and, with TLS, one handshake, within dialAttempt. A
// certificate the server presents and the CA does not sign fails here, named as such.
func (d *dialer) connect(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := net.Dialer{Timeout: dialAttempt, KeepAlive: 5 * time.Minute}
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil || d.tls == nil {
		return c, err
	}
	conf := d.tls
	if conf.ServerName == "" {
		conf = conf.Clone()
		conf.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(c, conf)
	hctx, cancel := context.WithTimeout(ctx, dialAttempt)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// Backend implements limiter.Backend on Redis. It is safe for concurrent use;
// it holds no per-key state. Each Decide costs one round trip: one EVALSHA
// for a single request, one pipeline of EVALSHAs for several (plus one EVAL
// round trip after a SCRIPT FLUSH or failover, the NOSCRIPT fallback).
type Backend struct {
	c        Client
	prefix   string
	client   bool
	onCall   func(string)
	onRedir  func(string)           // Config.OnRedirect; nil: none
	reload   func()                 // a Cluster client's slot map reload, after a failed decision
	cluster  *goredis.ClusterClient // nil unless a Cluster's: MOVED and ASK are followed once (redirect.go)
	nodes    sync.Map               // Cluster node address → go-redis's client for it
	idPrefix string
	seq      atomic.Uint64
	prep     sync.Map // limiter.Policy → *prepared
	nprep    atomic.Int64
	single   bool         // one server (not Cluster): a script may touch keys of any slot
	co       *coalescer   // nil: Pipelines -1
	skew     atomic.Int64 // Redis's TIME minus the local clock, µs, as the last reply showed (fixed.go)
}

var _ limiter.Backend = (*Backend)(nil)

// New returns a Backend using c. For *goredis.Client and
// *goredis.ClusterClient it checks the options and returns ErrUnsafeClient
// unless MaxRetries is -1 and ContextTimeoutEnabled is true (see Options), and
// for a ClusterClient MaxRedirects is -1 too (its redirect loop retries
// timeouts). NewClient builds such clients for every deployment.
func New(c Client, cfg Config) (*Backend, error) {
	if c == nil {
		return nil, errors.New("creating redis limiter backend: nil client")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("creating redis limiter backend: %w", err)
	}
	switch cl := c.(type) {
	case *goredis.Client:
		if o := cl.Options(); o.MaxRetries != 0 || !o.ContextTimeoutEnabled {
			return nil, fmt.Errorf("creating redis limiter backend: %w (set MaxRetries: -1 and ContextTimeoutEnabled: true, see Options)", ErrUnsafeClient)
		}
	case *goredis.ClusterClient:
		if o := cl.Options(); o.MaxRetries > 0 || o.MaxRedirects != 0 || !o.ContextTimeoutEnabled { // its init turns MaxRedirects -1 into 0, MaxRetries 0 into -1
			return nil, fmt.Errorf("creating redis limiter backend: %w (set MaxRetries: -1, MaxRedirects: -1 and ContextTimeoutEnabled: true; see NewClient)", ErrUnsafeClient)
		}
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "rl:"
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("creating redis limiter backend: reading random id: %w", err)
	}
	var reload func()
	cluster, _ := c.(*goredis.ClusterClient)
	if cl := cluster; cl != nil {
		// Without redirects (see NewClient) go-redis reloads its slot map only on a MOVED
		// reply or once a minute: a crashed master's slots would stay mapped to it until
		// then. Any failed decision asks for a reload (coalesced, at most every 200 ms).
		reload = func() { cl.ReloadState(context.Background()) }
	}
	b := &Backend{
		reload:   reload,
		cluster:  cluster,
		c:        c,
		prefix:   prefix,
		client:   cfg.ClientClock,
		onCall:   cfg.OnScriptCall,
		onRedir:  cfg.OnRedirect,
		idPrefix: hex.EncodeToString(id[:]) + "-",
	}
	_, single := c.(*goredis.Client) // one server: fixed_window_batch may touch keys of any slot
	switch n := cfg.Pipelines; {
	case !single || n < 0:
	case n == 0:
		b.co = &coalescer{b: b, max: DefaultPipelines}
	default:
		b.co = &coalescer{b: b, max: n}
	}
	return b, nil
}

// Key returns the Redis key holding policy p's state for key:
// prefix + "{" + key + "}:" + name + ":" + algorithm tag (for a fixed window,
// the prefix of its per-window counters Key:N). The hash tag is the caller's
// key, so all policies of one key share a Cluster slot.
//
// A key starting with '}' would leave the tag empty, and Redis then hashes the
// whole name: the keys of one levels script would land in different slots
// (CROSSSLOT on every decision). Such a key gets its FNV-1a hash as the tag,
// prefix + "}{" + 8 hex digits + "}" + key + ":" + name + ":" + algorithm tag;
// the '}' after the prefix keeps these names apart from every other key's.
func (b *Backend) Key(p *limiter.Policy, key string) string {
	var sb strings.Builder
	sb.Grow(len(b.prefix) + len(key) + len(p.Name) + 17)
	sb.WriteString(b.prefix)
	if len(key) > 0 && key[0] == '}' {
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		var tag [4]byte
		sb.WriteString("}{")
		sb.WriteString(hex.EncodeToString(h.Sum(tag[:0])))
		sb.WriteByte('}')
		sb.WriteString(key)
		sb.WriteByte(':')
	} else {
		sb.WriteByte('{')
		sb.WriteString(key)
		sb.WriteString("}:")
	}
	sb.WriteString(p.Name)
	sb.WriteByte(':')
	sb.WriteString(algTag[p.Algorithm])
	return sb.String()
}

func formatMicros(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Microsecond), 10)
}

// prepared holds a policy's script and its per-policy ARGV, converted and
// boxed once: a decision then boxes only its own values.
type prepared struct {
	script *Script
	static []any
}

// maxPrepared bounds the cache of prepared policies (a caller building a new
// Policy value per request must not grow it without end).
const maxPrepared = 4096

func (b *Backend) prepare(p *limiter.Policy) *prepared {
	if v, ok := b.prep.Load(*p); ok {
		return v.(*prepared)
	}
	pr := &prepared{script: scripts[p.Algorithm]}
	switch p.Algorithm {
	case limiter.FixedWindow, limiter.SlidingCounter, limiter.SlidingLog:
		pr.static = []any{strconv.FormatInt(p.Limit, 10), formatMicros(p.Window)}
	case limiter.TokenBucket:
		pr.static = []any{strconv.FormatInt(p.Capacity, 10), strconv.FormatFloat(p.RefillPerSecond, 'g', -1, 64)}
	default: // LeakyBucket
		pr.static = []any{strconv.FormatInt(p.Capacity, 10), strconv.FormatFloat(p.LeakPerSecond, 'g', -1, 64), formatMicros(p.MaxDelay)}
	}
	if b.nprep.Load() < maxPrepared {
		b.nprep.Add(1)
		b.prep.Store(*p, pr)
	}
	return pr
}

// args returns the script, KEYS and ARGV for r of any algorithm but the fixed
// window (fixedArgs): ARGV = now_us (” = Redis TIME), cost, the policy's
// numbers, [member id].
func (b *Backend) args(r *limiter.BackendRequest) (*Script, []string, []any, error) {
	p := r.Policy
	if p == nil || p.Algorithm < limiter.FixedWindow || p.Algorithm > limiter.LeakyBucket {
		return nil, nil, nil, errors.New("deciding: request without a valid policy")
	}
	pr := b.prepare(p)
	n := 2 + len(pr.static)
	if p.Algorithm == limiter.SlidingLog {
		n++
	}
	args := make([]any, 2, n)
	args[0] = "" // boxing "" does not allocate
	if b.client {
		args[0] = r.Now.UnixMicro()
	}
	args[1] = r.Cost // small integers box without allocating
	args = append(args, pr.static...)
	if p.Algorithm == limiter.SlidingLog {
		args = append(args, b.idPrefix+strconv.FormatUint(b.seq.Add(1), 36))
	}
	return pr.script, []string{b.Key(p, r.Key)}, args, nil
}

func anyLevels(reqs []limiter.BackendRequest) bool {
	for i := range reqs {
		if p := reqs[i].Policy; p != nil && p.Levels.N > 0 {
			return true
		}
	}
	return false
}

// Decide implements limiter.Backend: one EVALSHA, or one pipeline of them,
// for all of reqs; fixed-window requests on a single server share one call
// with the concurrent ones Config.Pipelines gathers. Only NOSCRIPT is retried (with EVAL, which cannot have run
// the script); any other error, a timeout included, is returned unretried.
func (b *Backend) Decide(ctx context.Context, reqs []limiter.BackendRequest, out []limiter.Decision) error {
	if len(reqs) > 0 && b.co != nil && validPolicies(reqs) == nil && allFixed(reqs) {
		return b.co.decide(ctx, reqs, out)
	}
	if anyLevels(reqs) {
		// A policy with levels is one script call of its own: the requests go one after
		// the other (a round trip each), the first error ending the request.
		for i := range reqs {
			d, err := b.decideOne(ctx, &reqs[i])
			out[i] = d
			if err != nil {
				return err
			}
		}
		return nil
	}
	switch len(reqs) {
	case 0:
		return nil
	case 1:
		d, err := b.decideOne(ctx, &reqs[0])
		out[0] = d
		return err
	}
	type call struct {
		keys []string
		args []any
		s    *Script
		cmd  *goredis.Cmd
		win  fixedWin // a fixed window's
	}
	calls := make([]call, len(reqs))
	pipe := b.c.Pipeline()
	for i := range reqs {
		c := &calls[i]
		var err error
		if p := reqs[i].Policy; p != nil && p.Algorithm == limiter.FixedWindow {
			c.s = scripts[limiter.FixedWindow]
			c.keys, c.args, c.win = b.fixedArgs(&reqs[i], b.fixedNow(&reqs[i]))
		} else if c.s, c.keys, c.args, err = b.args(&reqs[i]); err != nil {
			return err
		}
		c.cmd = pipe.EvalSha(ctx, c.s.SHA, c.keys, c.args...)
		b.called("evalsha")
	}
	sent := time.Now().UnixMicro()
	_, _ = pipe.Exec(ctx) // errors are per command, read below
	var retry goredis.Pipeliner
	for i := range calls {
		if err := calls[i].cmd.Err(); isNoScript(err) {
			if retry == nil {
				retry = b.c.Pipeline()
			}
			c := &calls[i]
			c.cmd = retry.Eval(ctx, c.s.Src, c.keys, c.args...)
			b.called("eval")
		}
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
	}
	for i := range calls {
		c := &calls[i]
		c.cmd = b.follow(ctx, c.cmd, c.s, c.keys, c.args) // MOVED or ASK: once to the node named
	}
	for i := range calls {
		var d limiter.Decision
		var err error
		if r := &reqs[i]; r.Policy.Algorithm == limiter.FixedWindow {
			var at int64
			var ok bool
			if d, at, ok, err = b.fixedReply(r, calls[i].cmd, calls[i].win, sent); err == nil && !ok {
				d, err = b.decideFixedOne(ctx, r, at, 1) // Redis is in another window
			}
		} else {
			d, err = decode(r.Policy, calls[i].cmd)
		}
		if err != nil {
			b.failed()
			return err
		}
		out[i] = d
	}
	return nil
}

func (b *Backend) decideOne(ctx context.Context, r *limiter.BackendRequest) (limiter.Decision, error) {
	if p := r.Policy; p != nil && p.Levels.N > 0 {
		d, _, _, err := b.decideLevels(ctx, r)
		if err != nil && err != limiter.ErrInvalidKey {
			b.failed()
		}
		return d, err
	}
	if p := r.Policy; p != nil && p.Algorithm == limiter.FixedWindow {
		d, err := b.decideFixedOne(ctx, r, b.fixedNow(r), 0)
		if err != nil {
			b.failed()
		}
		return d, err
	}
	s, keys, args, err := b.args(r)
	if err != nil {
		return limiter.Decision{}, err
	}
	d, err := decode(r.Policy, b.run(ctx, s, keys, args))
	if err != nil {
		b.failed()
	}
	return d, err
}

func (b *Backend) failed() {
	if b.reload != nil {
		b.reload()
	}
}

func decode(p *limiter.Policy, cmd *goredis.Cmd) (limiter.Decision, error) {
	var v [5]int64
	if err := decodeInts(cmd, v[:]); err != nil {
		return limiter.Decision{Policy: p.Name}, fmt.Errorf("running %s script: %w", p.Algorithm, err)
	}
	return decision(p, v[:]), nil
}

// decision is the Decision of a script's five values.
func decision(p *limiter.Policy, v []int64) limiter.Decision {
	return limiter.Decision{
		Allowed:    v[0] == 1,
		Limit:      p.Quota(),
		Remaining:  max(v[1], 0),
		RetryAfter: time.Duration(max(v[2], 0)) * time.Microsecond,
		ResetAfter: time.Duration(max(v[3], 0)) * time.Microsecond,
		Delay:      time.Duration(max(v[4], 0)) * time.Microsecond,
		Window:     p.QuotaWindow(),
		Policy:     p.Name,
	}
}

// Limiter binds a Backend to one policy; it implements limiter.Limiter.
// Safe for concurrent use.
type Limiter struct {
	b *Backend
	p limiter.Policy
}

// Limiter returns a limiter.Limiter for policy p (validated).
func (b *Backend) Limiter(p limiter.Policy) (*Limiter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Limiter{b: b, p: p}, nil
}

// AllowN decides one request with one round trip. now is used only with
// Config.ClientClock; otherwise the script reads Redis TIME. Bad input gives
// limiter.ErrInvalidKey, ErrInvalidCost or ErrCostOverLimit without a call.
func (l *Limiter) AllowN(ctx context.Context, key string, now time.Time, cost int64) (limiter.Decision, error) {
	if err := limiter.ValidateKey(key); err != nil {
		return limiter.Decision{Policy: l.p.Name}, err
	}
	if cost < 0 {
		return limiter.Decision{Policy: l.p.Name}, limiter.ErrInvalidCost
	}
	if cost > l.p.Quota() {
		return limiter.Decision{Policy: l.p.Name}, limiter.ErrCostOverLimit
	}
	return l.b.decideOne(ctx, &limiter.BackendRequest{Policy: &l.p, Key: key, Now: now, Cost: cost})
}
