package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/window"
)

// Defaults of Config.
const (
	DefaultTimeout   = time.Second
	DefaultRefresh   = 2 * time.Second
	DefaultStaleness = time.Second
	// DefaultMaxAnswerBytes bounds one peer answer; a glob over a million series with
	// bins stays well below it.
	DefaultMaxAnswerBytes = 256 << 20
)

// Internal peer route and headers.
const (
	// PeerPath is the route peers read each other's partial aggregates from.
	PeerPath = "/internal/v1/partial"
	// HeaderPeer marks a peer request; its value is the sender's advertised address.
	HeaderPeer = "X-Slide-Peer"
	// HeaderDeadline is the sender's deadline, unix ms: the peer gives up after it.
	HeaderDeadline = "X-Slide-Deadline"
)

// UnknownPartitions is the one missing partition a read reports before the group was
// described (the topic's partitions are not known yet).
const UnknownPartitions = -1

// Peer read operations.
const (
	opMerge   = "merge"   // one partial of every matching series
	opSeries  = "series"  // one partial per matching series
	opKeys    = "keys"    // series names
	opGroups  = "groups"  // one partial per group of the series a selector matches
	opSlots   = "slots"   // every live slot of each series a selector matches (promapi)
	opMetrics = "metrics" // the store's metric names (promapi)
	// opExemplars: each series a selector matches with its exemplars (promapi's query_exemplars)
	opExemplars = "exemplars"
	// opExtents: each series a selector matches with its current and first live slot (promapi's listings)
	opExtents = "extents"
)

// peerOps are the op labels of slide_cluster_peer_requests_total: the reads above and
// package clusterlimit's "limit" (PostPeer, ObservePeer).
var peerOps = []string{opMerge, opSeries, opKeys, opGroups, opSlots, opMetrics, opExemplars, opExtents, "limit"}

// unavailableCallers are the caller labels of slide_cluster_unavailable_total: package
// query's reads and the three outcomes of package usage's rules (Checker.checkTarget).
var unavailableCallers = []string{"query", "usage_open", "usage_closed", "usage_denied_anyway"}

// Config configures a Cluster. Store, Brokers, Advertise and Local are required; every
// other zero field takes the default documented on it.
type Config struct {
	// Store is this instance's window store.
	Store *window.Store
	// Brokers are the Kafka bootstrap addresses, as the consumer's.
	Brokers []string
	// Topic and Group are the consumer's; defaults "events" and "slide".
	Topic, Group string
	// Advertise is this instance's HTTP host:port as peers reach it; ingest.Config.MemberData
	// must carry MemberData(Advertise).
	Advertise string
	// Token is the API's bearer token (--auth-token-file). It is never sent to peers: when
	// PeerKey is nil, the group's peer key is derived from it (KeyFromToken), so instances
	// sharing the token sign and check each other's requests and answers without sending it.
	Token string
	// PeerKey is the group's shared key (--peer-key-file), at least MinPeerKeyBytes: every
	// peer request and answer is signed with it (HMAC-SHA256, see Auth); a request that
	// does not verify is refused (401) and an answer that does not is not merged (its
	// partitions are missing). Nil: derived from Token when one is set; with neither, peer
	// requests and answers are unsigned and every member of the group is believed.
	PeerKey []byte
	// Now is this instance's clock, unix ms: a peer's read time and the signatures'
	// timestamps are checked against it. Nil is the wall clock.
	Now func() int64
	// Timeout is the deadline of one fan-out (every peer request of one read); default 1 s.
	// A peer that does not answer in time counts as missing.
	Timeout time.Duration
	// Refresh is how often the group is described besides at every generation; default 2 s.
	Refresh time.Duration
	// Staleness is how old remote aggregates read by usage rules may be; default 1 s.
	// Negative turns the cache off (every decision on a non-owner fans out).
	Staleness time.Duration
	// MaxAnswerBytes bounds one peer answer; default DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
	// KeyPartitioner declares how every producer of the topic chooses a record's partition
	// from its key, so that a read of one exact key asks only that partition's owner:
	// "murmur2" (the Java client's default, kafka-go's Murmur2Balancer, slide produce).
	// Empty (the default) declares nothing and every read fans out to every owner, which
	// is exact whatever the producers do. A wrong declaration makes one-key reads miss
	// events produced to other partitions: declare it only when it holds. Run checks the
	// store against it (CheckKeyPartitioner) and stops routing when a series contradicts it.
	KeyPartitioner string
	// Local returns the partitions this instance has restored and serves (the consumer's
	// restored partitions). Required.
	Local func() []int32
	// Restored reports whether every partition assigned to this instance is restored
	// (ingest.Consumer.Ready). Local is false while it is not, so that an instance gaining
	// partitions in a rebalance, even all of them, reads through the cluster and reports
	// the ones still restoring as missing instead of reading them short. It must be cheap:
	// every read asks it. Nil: always restored.
	Restored func() bool
	// Generation returns the consumer's group generation (ingest.Consumer.Generation). A
	// read whose generation changed while it ran counts this instance's partitions as
	// missing, since a revocation may have dropped part of them mid-read. Nil: no check.
	Generation func() int32
	// Dialer connects to the brokers (TLS, SASL); nil is kafka.DefaultDialer.
	Dialer *kafka.Dialer
	// HTTPClient sends peer requests; nil is a client with keep-alive connections.
	HTTPClient *http.Client
	// TLS, when set, makes peer requests HTTPS with this client config (every instance of
	// a group serves HTTPS or none does); nil: plain HTTP.
	TLS *tls.Config
	// Logger receives membership changes and peer errors; nil discards them.
	Logger *slog.Logger
	// Registerer receives the slide_cluster_* collectors; nil registers nothing.
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	c.Topic = cmp.Or(c.Topic, "events")
	c.Group = cmp.Or(c.Group, "slide")
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Refresh = cmp.Or(c.Refresh, DefaultRefresh)
	c.Staleness = cmp.Or(c.Staleness, DefaultStaleness)
	c.MaxAnswerBytes = cmp.Or(c.MaxAnswerBytes, DefaultMaxAnswerBytes)
	return c
}

// Validate reports a config New would refuse.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("cluster: nil store")
	case len(c.Brokers) == 0:
		return errors.New("cluster: no brokers")
	case c.Local == nil:
		return errors.New("cluster: no Local partitions function")
	case c.Timeout < 0 || c.Refresh < 0 || c.MaxAnswerBytes < 0:
		return errors.New("cluster: negative timeout, refresh or max answer bytes")
	case c.PeerKey != nil && len(c.PeerKey) < MinPeerKeyBytes:
		return fmt.Errorf("%w (%d bytes)", ErrPeerKeyShort, len(c.PeerKey))
	case c.KeyPartitioner != "" && c.KeyPartitioner != "murmur2":
		return fmt.Errorf("cluster: key partitioner %q: only murmur2 (or empty: fan out)%s", c.KeyPartitioner, partitionerHint(c.KeyPartitioner))
	}
	if err := CheckAdvertise(c.Advertise); err != nil {
		return err
	}
	return nil
}

// partitionerHint says what a producer's partitioner name given as Config.KeyPartitioner
// means here: the names librdkafka and the Java client give murmur2, or a hash slide does
// not route by.
func partitionerHint(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "murmur2"), strings.Contains(n, "defaultpartitioner"), strings.Contains(n, "builtinpartitioner"), n == "default", n == "java":
		return "; librdkafka's murmur2 and murmur2_random and the Java client's default partition keyed records alike: declare murmur2"
	case strings.Contains(n, "consistent"), strings.Contains(n, "crc32"), strings.Contains(n, "fnv1a"), strings.Contains(n, "random"), strings.Contains(n, "roundrobin"), strings.Contains(n, "round_robin"):
		return "; that partitioner does not place a key by murmur2, so a key's owner cannot be known: leave it empty (every read fans out, exact)"
	}
	return ""
}

// CheckAdvertise reports an address peers cannot reach: empty, not host:port, or a wildcard
// host (0.0.0.0, ::, empty) that names every interface rather than one.
func CheckAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("advertise address %q: %w", addr, err)
	}
	if port == "" || port == "0" {
		return fmt.Errorf("advertise address %q: needs a port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("advertise address %q: a wildcard host is not an address peers can reach", addr)
	}
	return nil
}

// Cluster makes the instances of one consumer group answer as one engine. It learns who
// owns which partition from the group (each member advertises its HTTP address in its join
// metadata; every instance describes the group at every generation and every Refresh),
// fans reads out to the owners of the partitions it does not serve itself, and merges
// their partial aggregates. When this instance holds every partition, restored, Local is
// true and callers read the store directly: one instance works as it always did.
//
// A read names what it could not cover: the partitions whose owner did not answer in time,
// is restoring, or is unknown. Callers turn them into a 503 or a flagged partial answer;
// a Cluster never returns a silently partial one.
//
// It is safe for concurrent use. Run must be running for membership to follow the group.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	client *kafka.Client
	http   *http.Client
	rt     http.RoundTripper // the transport of c.http when this package built it: reads skip the Client's redirect and header-copy work
	scheme string            // "http://" or "https://" (Config.TLS)
	auth   *Auth             // signs and checks peer requests and answers; nil: unsigned
	now    func() int64
	m      *metrics

	view     atomic.Pointer[View]
	assigned atomic.Pointer[[]int32] // this member's assignment of the current generation
	allLocal atomic.Bool             // assigned covers every partition of the topic
	routeOff atomic.Bool             // a series contradicted the declared partitioner: fan out (keycheck.go)
	hinted   atomic.Bool             // the --key-partitioner hint was logged (keycheck.go)
	kick     chan struct{}           // a generation began: describe now

	describeMu sync.Mutex // Describe: concurrent callers share one describe

	cacheMu sync.Mutex
	cache   map[cacheKey]*cacheEntry // usage reads' remote partials; guarded by cacheMu

	older sync.Map // peer address → unix ms until which it is asked a refused op's older one (extents.go)
}

// New builds a Cluster. It does not connect: Run does.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cluster{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1), cache: map[cacheKey]*cacheEntry{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.client = &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 5 * time.Second}
	if d := cfg.Dialer; d != nil {
		c.client.Transport = &kafka.Transport{Dial: d.DialFunc, TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID}
	}
	var err error
	c.http = cfg.HTTPClient
	if c.http == nil {
		tr := &http.Transport{
			Proxy:               nil, // peers are reached directly
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			MaxConnsPerHost:     64, // below serve's --max-conns-per-client (256) when instances share a host
			IdleConnTimeout:     90 * time.Second,
			DialContext:         (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     cfg.TLS,
		}
		c.http, c.rt = &http.Client{Transport: tr}, tr
	}
	c.scheme = "http://"
	if cfg.TLS != nil {
		c.scheme = "https://"
	}
	c.now = cfg.Now
	if c.now == nil {
		c.now = func() int64 { return time.Now().UnixMilli() }
	}
	key := cfg.PeerKey
	if key == nil && cfg.Token != "" {
		key = KeyFromToken(cfg.Token)
	}
	if key != nil {
		if c.auth, err = NewAuth(AuthConfig{Key: key, Now: c.now}); err != nil {
			return nil, err
		}
	}
	if c.m, err = newMetrics(cfg.Registerer, c); err != nil {
		return nil, err
	}
	return c, nil
}

// OnGeneration is the consumer's generation hook (ingest.WithGenerationHook): it is called
// before the consumer revokes anything, so reads stop being answered from this instance
// alone at once when it no longer holds every partition; the group is described again.
func (c *Cluster) OnGeneration(_ int32, assigned []int32) {
	a := slices.Clone(assigned)
	c.assigned.Store(&a)
	v := c.view.Load()
	c.allLocal.Store(v != nil && v.Partitions > 0 && len(a) >= v.Partitions)
	// Cached remote parts were read for the old split of partitions: a partition that
	// moved here would count twice.
	c.cacheMu.Lock()
	clear(c.cache)
	c.cacheMu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run follows the group until ctx ends: it describes the group at every generation and
// every Refresh, and checks the store's keys against murmur2 every KeyCheckInterval
// (CheckKeyPartitioner). It returns nil when ctx ends.
func (c *Cluster) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.Refresh)
	defer t.Stop()
	check := time.NewTicker(KeyCheckInterval)
	defer check.Stop()
	for {
		c.refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		case <-check.C:
			c.CheckKeyPartitioner()
		}
	}
}

func (c *Cluster) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := describe(rctx, c.client, c.cfg.Group, c.cfg.Topic)
	if err != nil {
		if !errors.Is(err, errNotStable) && ctx.Err() == nil {
			c.warn("cluster: describing the group (other instances' partitions are unreachable until it works)", "err", err)
		}
		if v == nil || v.Partitions == 0 || errors.Is(err, errNotStable) {
			return
		}
		// The partitions are known but not their owners: keep the owners of the last view
		// (peers say what they still serve), or none, so a lone owner of every partition
		// still answers.
		if old := c.view.Load(); old != nil {
			v.Owner, v.Members, v.Addrs = old.Owner, old.Members, old.Addrs
		}
	}
	old := c.view.Swap(v)
	a := c.assigned.Load()
	c.allLocal.Store(a != nil && v.Partitions > 0 && len(*a) >= v.Partitions)
	if old == nil || old.Members != v.Members || !mapsEqual(old.Owner, v.Owner) {
		c.log.Info("cluster: membership", "members", v.Members, "partitions", v.Partitions, "owners", ownersString(v.Owner))
	}
}

func mapsEqual(a, b map[int32]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ownersString(o map[int32]string) string {
	ps := make([]int32, 0, len(o))
	for p := range o {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d=%s", p, o[p])
	}
	return b.String()
}

// Local reports whether this instance holds every partition of the topic, each restored
// (Config.Restored): reads need no peer. It is an atomic load and Config.Restored.
func (c *Cluster) Local() bool {
	return c.allLocal.Load() && (c.cfg.Restored == nil || c.cfg.Restored())
}

// Known reports whether the topic's partitions are known (the group was described once).
func (c *Cluster) Known() bool {
	v := c.view.Load()
	return v != nil && v.Partitions > 0
}

// CurrentView is the last stable view of the group, nil before the first.
func (c *Cluster) CurrentView() *View { return c.view.Load() }

// request is one read to fan out.
type request struct {
	op      string
	metric  string
	key     string           // exact key, glob, or "" (every key) for opSeries; prefix for opKeys
	by      []string         // opGroups: the labels groups are made of
	ms      []window.Matcher // opGroups, opSlots, opExemplars, opKeys, opExtents: the label matchers beside key
	after   *window.SeriesID // opKeys: list the series after this one (nil: from the first)
	limit   int              // opKeys: list at most this many (0: every one)
	at      int64            // opSlots, opExtents: the instant read (unix ms, at most now)
	older   string           // the op to ask instead of op a peer that does not know it ("": none; extents.go)
	winMs   int64
	now     int64
	bins    bool
	parts   []int32
	only    []int32 // when set, the partitions the read needs (a routed key): no other is asked or missing
	timeout time.Duration
}

// rawQuery is r as a peer request's query string, written directly rather than through
// url.Values (a map, its Encode sorting the keys): one string, built once per peer request.
// The peer parses it with url.ParseQuery, so the order of its fields is free.
func (r *request) rawQuery() string {
	b := make([]byte, 0, 96+len(r.metric)+len(r.key))
	field := func(name, v string) {
		if len(b) > 0 {
			b = append(b, '&')
		}
		b = append(b, name...)
		b = append(b, '=')
		b = append(b, url.QueryEscape(v)...) // v itself when nothing needs escaping
	}
	field("op", r.op)
	field("metric", r.metric)
	field("key", r.key)
	b = append(b, "&window="...)
	b = strconv.AppendInt(b, r.winMs, 10)
	b = append(b, "&now="...)
	b = strconv.AppendInt(b, r.now, 10)
	if r.bins {
		b = append(b, "&bins=1"...)
	}
	if r.op == opGroups {
		field("by", strings.Join(r.by, ","))
	}
	if r.op == opGroups || r.op == opSlots || r.op == opExemplars || r.op == opExtents {
		for _, m := range r.ms {
			field("m", appendMatcher(nil, m))
		}
	}
	if r.op == opKeys {
		b = appendKeyFields(b, r)
	}
	if r.op == opSlots || r.op == opExtents {
		b = append(b, "&at="...)
		b = strconv.AppendInt(b, r.at, 10)
	}
	b = append(b, "&parts="...)
	for i, p := range r.parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(p), 10)
	}
	return string(b)
}

// fanout asks every owner of a partition this instance does not serve for r, and calls
// each with the answers (one at a time). local is the set this instance serves; missing
// lists every partition of the topic that neither it nor an answering peer served.
func (c *Cluster) fanout(ctx context.Context, r request, local map[int32]bool, each func(*answer)) (missing []int32) {
	v := c.view.Load()
	if v == nil {
		// The group was never described: who owns what is unknown. Reads are held by
		// readiness until Known; a usage decision meanwhile is flagged, not guessed.
		return []int32{UnknownPartitions}
	}
	timeout := c.cfg.Timeout
	if r.timeout > 0 {
		timeout = r.timeout
	}
	if len(r.only) == 1 {
		// One partition, one owner (a routed key): the hop is a plain call on this
		// goroutine, over the peers' keep-alive connections, with no fan-out machinery.
		p := r.only[0]
		if local[p] {
			return nil
		}
		if addr := v.Owner[p]; addr != "" && addr != c.cfg.Advertise {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r.parts = r.only
			if a, err := c.askOlder(ctx, addr, &r); err == nil {
				each(a)
				if slices.Contains(a.served, p) {
					return nil
				}
			}
		}
		return []int32{p}
	}
	served := make(map[int32]bool, v.Partitions)
	for p := range local {
		served[p] = true
	}
	take := func(a *answer) {
		for _, p := range a.served {
			served[p] = true
		}
		each(a)
	}
	skip := func(p int32) bool { return local[p] }
	if r.only != nil {
		skip = func(p int32) bool { return local[p] || !slices.Contains(r.only, p) }
	}
	peers := v.peers(c.cfg.Advertise, skip)
	delete(peers, "") // a member that advertises no address: its partitions stay missing
	if len(peers) == 1 {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for addr, parts := range peers {
			r.parts = parts
			if a, err := c.askOlder(ctx, addr, &r); err == nil {
				take(a)
			}
		}
	} else if len(peers) > 1 {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		type result struct {
			a   *answer
			err error
		}
		results := make(chan result, len(peers))
		for addr, parts := range peers {
			rr := r
			rr.parts = parts
			go func() {
				a, err := c.askOlder(ctx, addr, &rr)
				results <- result{a, err}
			}()
		}
		for range peers {
			if res := <-results; res.err == nil {
				take(res.a)
			}
		}
	}
	if r.only != nil {
		for _, p := range r.only {
			if !served[p] {
				missing = append(missing, p)
			}
		}
		return missing
	}
	for p := int32(0); p < int32(v.Partitions); p++ {
		if !served[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
