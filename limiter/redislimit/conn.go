package redislimit

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Conn says how to reach Redis: one server (Addr), a Redis Cluster (Cluster) or a master
// managed by Sentinel (SentinelMaster and Sentinels). Exactly one of the three is set. The
// zero value is not valid; NewClient returns a client with the backend's safety options
// (no retries, context deadlines honoured, one dial attempt per call: see Options) in every
// mode, whatever the URL asks for.
type Conn struct {
	// Addr is host:port, or a URL as go-redis's ParseURL reads it:
	// redis://[user[:password]@]host[:port][/db] or rediss://… for TLS. Query parameters
	// (pool_size=, max_retries=, …) are refused: the backend sets those itself.
	Addr string
	// Cluster lists seed nodes (host:port) of a Redis Cluster; the client finds the rest.
	Cluster []string
	// SentinelMaster is the master name the Sentinels monitor; Sentinels their host:port.
	SentinelMaster string
	Sentinels      []string
	// Username and Password authenticate (AUTH user pass: a Redis 6 ACL user; Password
	// alone is requirepass). Non-empty values win over the URL's. Sentinels themselves are
	// reached without authentication.
	Username, Password string
	// TLS, when not nil, connects with TLS (rediss:// implies it; this then adds to the
	// URL's settings, e.g. RootCAs for a private CA). An empty ServerName is the dialled
	// host, so Cluster nodes and promoted replicas are each verified by their own name.
	TLS *tls.Config
	// PoolSize is the connection pool size per node; default go-redis's (10 per CPU, 5 per
	// CPU per Cluster node).
	PoolSize int
}

// Validate reports a Conn NewClient would refuse. Its errors never contain a password.
func (c Conn) Validate() error {
	_, err := c.single()
	return err
}

// modes counts how many of Addr, Cluster and Sentinel are set.
func (c Conn) modes() int {
	n := 0
	for _, set := range []bool{c.Addr != "", len(c.Cluster) > 0, c.SentinelMaster != "" || len(c.Sentinels) > 0} {
		if set {
			n++
		}
	}
	return n
}

// single validates c and returns the parsed single-server options (nil in the other modes).
func (c Conn) single() (*goredis.Options, error) {
	switch c.modes() {
	case 0:
		return nil, errors.New("redis: no address: set an address, a cluster or a sentinel")
	case 1:
	default:
		return nil, errors.New("redis: set one of an address, a cluster or a sentinel, not several")
	}
	checkAddrs := func(what string, addrs []string) error {
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil || strings.Contains(a, "@") {
				return fmt.Errorf("redis %s: %q is not host:port", what, Redact(a))
			}
		}
		return nil
	}
	switch {
	case len(c.Cluster) > 0:
		return nil, checkAddrs("cluster", c.Cluster)
	case c.SentinelMaster != "" || len(c.Sentinels) > 0:
		if c.SentinelMaster == "" || len(c.Sentinels) == 0 {
			return nil, errors.New("redis sentinel: want MASTER@HOST:PORT,…: a master name and at least one sentinel")
		}
		return nil, checkAddrs("sentinel", c.Sentinels)
	}
	if !strings.Contains(c.Addr, "://") {
		if err := checkAddrs("address", []string{c.Addr}); err != nil {
			return nil, err
		}
		return &goredis.Options{Addr: c.Addr}, nil
	}
	u, err := url.Parse(c.Addr)
	if err != nil {
		// url.Error repeats the whole URL, password included: say only what is wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis URL %s: %v", Redact(c.Addr), err)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("redis URL %s: query parameters are not supported (the limiter sets pool, retry and timeout options itself)", Redact(c.Addr))
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis URL %s: scheme %q: want redis:// or rediss://", Redact(c.Addr), u.Scheme)
	}
	o, err := goredis.ParseURL(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("redis URL %s: %v", Redact(c.Addr), err)
	}
	return o, nil
}

// Redact returns addr with a URL's password replaced by xxxxx, for logs and errors.
func Redact(addr string) string {
	if !strings.Contains(addr, "://") {
		if i := strings.LastIndex(addr, "@"); i >= 0 {
			return "xxxxx@" + addr[i+1:] // not a URL, but it looks like it carries a secret
		}
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// String describes the target without secrets: "127.0.0.1:6379", "cluster a:1,b:2",
// "sentinel mymaster@a:1,b:2".
func (c Conn) String() string {
	switch {
	case len(c.Cluster) > 0:
		return "cluster " + strings.Join(c.Cluster, ",")
	case c.SentinelMaster != "" || len(c.Sentinels) > 0:
		return "sentinel " + c.SentinelMaster + "@" + strings.Join(c.Sentinels, ",")
	}
	if o, err := c.single(); err == nil && o != nil && strings.Contains(c.Addr, "://") {
		return o.Addr
	}
	return Redact(c.Addr)
}

// NewClient returns a client for c: a *goredis.Client for one server or a Sentinel master
// (go-redis's failover client), a *goredis.ClusterClient for a Cluster. It does not connect;
// the first command does (use Ping for a check at start). The caller closes it.
func NewClient(c Conn) (goredis.UniversalClient, error) {
	o, err := c.single()
	if err != nil {
		return nil, err
	}
	tlsConf := c.TLS
	if o != nil && o.TLSConfig != nil { // rediss://
		if tlsConf == nil {
			tlsConf = o.TLSConfig
		} else {
			tlsConf = tlsConf.Clone()
			if tlsConf.ServerName == "" {
				tlsConf.ServerName = o.TLSConfig.ServerName
			}
		}
	}
	user, pass := c.Username, c.Password
	if o != nil {
		if user == "" {
			user = o.Username
		}
		if pass == "" {
			pass = o.Password
		}
	}
	switch {
	case len(c.Cluster) > 0:
		d := newDialer(tlsConf, func() int64 { return poolSize(c.PoolSize, 5) })
		// A crashed master's slots move to its replica: nothing waits for that node to
		// return, so no probe keeps dialing it (go-redis's own, once a second, does).
		d.noProbe = true
		return goredis.NewClusterClient(&goredis.ClusterOptions{
			// A copy: go-redis appends the nodes it discovers to the seed slice, which
			// wrote into the caller's array past len (Cluster: addrs[:3]) and raced
			// between clients built from one Conn.
			Addrs: slices.Clone(c.Cluster), Username: user, Password: pass, PoolSize: c.PoolSize,
			MaxRetries: -1, ContextTimeoutEnabled: true, DialerRetries: 1,
			// No redirects: go-redis's redirect loop also retries timeouts and dropped
			// connections on the same node, which could run a decision twice. The
			// backend follows a MOVED or ASK reply itself, once (redirect.go).
			MaxRedirects: -1,
			// The legacy routing: a script with keys goes to its slot's master either
			// way, and the request-policy layer costs allocations per call.
			DisableRoutingPolicies: true,
			DialTimeout:            probeFor, ReadTimeout: time.Second, WriteTimeout: time.Second,
			Dialer: d.dial,
			// Maintenance notifications (a managed service announcing a move) are off:
			// in go-redis 9.23 their cluster circuit breaker outlives Close by a goroutine.
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		}), nil
	case c.SentinelMaster != "":
		d := newDialer(tlsConf, func() int64 { return poolSize(c.PoolSize, 10) })
		// go-redis resolves the master's address before each dial: a probe that kept
		// dialing a dead master would outlast its promoted replica. Its own probe, once
		// a second, asks the Sentinels again.
		d.noProbe = true
		return goredis.NewFailoverClient(&goredis.FailoverOptions{
			MasterName: c.SentinelMaster, SentinelAddrs: c.Sentinels,
			Username: user, Password: pass, PoolSize: c.PoolSize,
			MaxRetries: -1, ContextTimeoutEnabled: true, DialerRetries: 1,
			DialTimeout: probeFor, ReadTimeout: time.Second, WriteTimeout: time.Second,
			Dialer: d.dial,
		}), nil
	}
	opts := Options(o.Addr)
	opts.Username, opts.Password, opts.DB, opts.PoolSize = user, pass, o.DB, c.PoolSize
	opts.Dialer = newDialer(tlsConf, func() int64 { return poolSize(c.PoolSize, 10) }).dial
	return goredis.NewClient(opts), nil
}

// poolSize is n, or go-redis's default of perCPU connections per CPU.
func poolSize(n, perCPU int) int64 {
	if n > 0 {
		return int64(n)
	}
	return int64(perCPU * runtime.GOMAXPROCS(0))
}
