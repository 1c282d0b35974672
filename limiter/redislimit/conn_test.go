package redislimit_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/internal/tlstest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limitertest"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

func connClient(t testing.TB, c redislimit.Conn) goredis.UniversalClient {
	t.Helper()
	cl, err := redislimit.NewClient(c)
	if err != nil {
		t.Fatalf("NewClient(%s): %v", c, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func connBackend(t testing.TB, c redislimit.Conn) *redislimit.Backend {
	t.Helper()
	b, err := redislimit.New(connClient(t, c), redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// conformance runs the limiter suite through client c, a fresh key space per limiter.
func conformance(t *testing.T, c redislimit.Client) {
	var n atomic.Int64
	limitertest.Run(t, func(t *testing.T, p limiter.Policy) limiter.Limiter {
		b, err := redislimit.New(c, redislimit.Config{ClientClock: true, KeyPrefix: fmt.Sprintf("c%d-%d:", time.Now().UnixNano(), n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		l, err := b.Limiter(p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func ping(c goredis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// A password (requirepass) and an ACL user, reached through every form the flags offer:
// the URL with credentials, and host:port with Username/Password beside it.
func TestConnAuth(t *testing.T) {
	srv := redistest.StartWith(t, redistest.Opts{Password: "s3cret-default", User: "slide", UserPassword: "s3cret-acl"})
	forms := map[string]redislimit.Conn{
		"url requirepass":   {Addr: "redis://:s3cret-default@" + srv.Addr},
		"url acl user db 0": {Addr: "redis://slide:s3cret-acl@" + srv.Addr + "/0"},
		"addr and fields":   {Addr: srv.Addr, Username: "slide", Password: "s3cret-acl"},
		"url and fields":    {Addr: "redis://" + srv.Addr, Username: "slide", Password: "s3cret-acl"},
	}
	for name, c := range forms {
		t.Run(name, func(t *testing.T) {
			if err := ping(connClient(t, c)); err != nil {
				t.Fatalf("PING: %v", err)
			}
		})
	}
	t.Run("conformance", func(t *testing.T) { conformance(t, connClient(t, forms["url acl user db 0"])) })
	t.Run("scale_out", func(t *testing.T) {
		scaleOut(t, func() limiter.Backend { return connBackend(t, forms["addr and fields"]) }, false)
	})
	for name, c := range map[string]redislimit.Conn{
		"wrong password": {Addr: srv.Addr, Username: "slide", Password: "not-it"},
		"no password":    {Addr: srv.Addr},
	} {
		t.Run(name, func(t *testing.T) {
			err := ping(connClient(t, c))
			if err == nil || !(strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "NOAUTH")) {
				t.Fatalf("PING error = %v, want WRONGPASS or NOAUTH", err)
			}
			if strings.Contains(err.Error(), "not-it") {
				t.Errorf("error %q contains the password", err)
			}
		})
	}
}

// A TLS-only server with a private CA: rediss:// with the CA's pool, and host:port with a
// TLS config; a client without the CA fails the handshake and says so.
func TestConnTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "redis")
	pair := ca.Server("redis")
	srv := redistest.StartWith(t, redistest.Opts{
		TLSCert: pair.CertFile, TLSKey: pair.KeyFile, TLSCA: ca.CertFile,
		TLSClient: &tls.Config{RootCAs: ca.Pool}, User: "slide", UserPassword: "pw-tls",
	})
	withCA := &tls.Config{RootCAs: ca.Pool}
	rediss := redislimit.Conn{Addr: "rediss://slide:pw-tls@" + srv.Addr, TLS: withCA}
	plain := redislimit.Conn{Addr: srv.Addr, TLS: withCA, Username: "slide", Password: "pw-tls"}
	for name, c := range map[string]redislimit.Conn{"rediss url": rediss, "addr with tls": plain} {
		t.Run(name, func(t *testing.T) {
			if err := ping(connClient(t, c)); err != nil {
				t.Fatalf("PING: %v", err)
			}
		})
	}
	t.Run("conformance", func(t *testing.T) { conformance(t, connClient(t, rediss)) })
	t.Run("scale_out", func(t *testing.T) {
		scaleOut(t, func() limiter.Backend { return connBackend(t, rediss) }, false)
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		err := ping(connClient(t, redislimit.Conn{Addr: "rediss://slide:pw-tls@" + srv.Addr}))
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("PING error = %v, want a certificate error", err)
		}
	})
	t.Run("plain client on the TLS port", func(t *testing.T) {
		if err := ping(connClient(t, redislimit.Conn{Addr: srv.Addr, Username: "slide", Password: "pw-tls"})); err == nil {
			t.Fatal("a plaintext PING on the TLS port succeeded")
		}
	})
}

func TestConnValidate(t *testing.T) {
	for _, c := range []struct {
		conn redislimit.Conn
		want string
	}{
		{redislimit.Conn{}, "no address"},
		{redislimit.Conn{Addr: "a:1", Cluster: []string{"b:1"}}, "not several"},
		{redislimit.Conn{Addr: "nohost"}, "not host:port"},
		{redislimit.Conn{Addr: "redis://u:topsecret@h:1/0?pool_size=3"}, "query parameters"},
		{redislimit.Conn{Addr: "redis://u:topsecret@h:1/x"}, "database"},
		{redislimit.Conn{Addr: "http://u:topsecret@h:1"}, "scheme"},
		{redislimit.Conn{Addr: "redis://u:topsecret@h:bad"}, "port"},
		{redislimit.Conn{Sentinels: []string{"a:1"}}, "master name"},
		{redislimit.Conn{SentinelMaster: "m", Sentinels: []string{"u:topsecret@a"}}, "not host:port"},
		{redislimit.Conn{Cluster: []string{"a:1", "b"}}, "not host:port"},
	} {
		err := c.conn.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error containing %q", c.conn, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("Validate error %q contains the password", err)
		}
		if _, err := redislimit.NewClient(c.conn); err == nil {
			t.Errorf("NewClient(%+v) succeeded where Validate failed", c.conn)
		}
	}
	c := redislimit.Conn{Addr: "rediss://u:topsecret@h:1/2"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := c.String(); strings.Contains(s, "topsecret") || s != "h:1" {
		t.Errorf("String() = %q, want h:1", s)
	}
	if s := redislimit.Redact(c.Addr); strings.Contains(s, "topsecret") {
		t.Errorf("Redact = %q", s)
	}
	if _, err := url.Parse(redislimit.Redact(c.Addr)); err != nil {
		t.Errorf("Redact output does not parse: %v", err)
	}
}

// Every script touches exactly one key, KEYS[1], and Key puts the caller's key in the
// hash tag: all state of one decision, and of every policy of one key, is in one slot.
// A key that starts with '}' would make an empty tag (Redis then hashes the whole name):
// Key gives it a tag of its own.
func TestOneSlotPerDecision(t *testing.T) {
	b, err := redislimit.New(newClient(t, "127.0.0.1:1"), redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for a := limiter.FixedWindow; a <= limiter.LeakyBucket; a++ {
		src := redislimit.ScriptFor(a).Src
		for i := 2; i <= 9; i++ {
			if strings.Contains(src, fmt.Sprintf("KEYS[%d]", i)) {
				t.Errorf("%s touches KEYS[%d]: a decision must stay in one hash slot", a, i)
			}
		}
		if !strings.Contains(src, "KEYS[1]") {
			t.Errorf("%s does not use KEYS[1]", a)
		}
	}
	p1 := &limiter.Policy{Name: "a", Algorithm: limiter.SlidingLog}
	p2 := &limiter.Policy{Name: "b", Algorithm: limiter.TokenBucket}
	for _, key := range []string{"tenant-1", "x", "a{b}c", "a}b", "{}", "{", "}x", "}", "}}{a}"} {
		s1, s2 := slot(b.Key(p1, key)), slot(b.Key(p2, key))
		if s1 != s2 {
			t.Errorf("key %q: policies land in slots %d and %d", key, s1, s2)
		}
	}
}

// The levels of a key are one script call, so their counters must share a slot whatever
// the key: a first level starting with '}' made an empty hash tag, each counter hashed
// whole, and Redis Cluster refused every decision of such a key with CROSSSLOT.
func TestLevelKeysShareOneSlot(t *testing.T) {
	b, err := redislimit.New(newClient(t, "127.0.0.1:1"), redislimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := &limiter.Policy{Name: "org", Algorithm: limiter.FixedWindow, Window: time.Minute,
		Levels: limiter.Levels{Separator: "/", N: 3, Limits: [limiter.MaxLevels]int64{30, 20, 10}}}
	names := map[string]string{}
	for _, key := range []string{"org-1/team-a/user-7", "}x/team/user", "}/a/b", "}}{a}/b/c", "a}b/c/d", "{a}/b/c"} {
		keys := redislimit.LevelKeys(b, p, key, time.Unix(1e9, 0))
		if len(keys) != 3 {
			t.Fatalf("key %q: %d level keys, want 3", key, len(keys))
		}
		for _, k := range keys {
			if slot(k) != slot(keys[0]) {
				t.Errorf("key %q: level keys %q in slot %d and %q in slot %d: CROSSSLOT in Redis Cluster", key, keys[0], slot(keys[0]), k, slot(k))
			}
			if other, ok := names[k]; ok {
				t.Errorf("keys %q and %q share the counter %q", other, key, k)
			}
			names[k] = key
		}
	}
}

// slot is Redis Cluster's HASH_SLOT: CRC16 of the hash tag (or the key) mod 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

func TestNewRefusesUnsafeClusterClient(t *testing.T) {
	for name, o := range map[string]*goredis.ClusterOptions{
		"redirects":       {Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, ContextTimeoutEnabled: true},
		"retries":         {Addrs: []string{"127.0.0.1:1"}, MaxRetries: 2, MaxRedirects: -1, ContextTimeoutEnabled: true},
		"ignores context": {Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, MaxRedirects: -1},
	} {
		// go-redis 9.23's maintenance-notification circuit breaker outlives Close.
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		c := goredis.NewClusterClient(o)
		_, err := redislimit.New(c, redislimit.Config{})
		c.Close()
		if !errors.Is(err, redislimit.ErrUnsafeClient) {
			t.Errorf("%s: New error = %v, want ErrUnsafeClient", name, err)
		}
	}
	c := connClient(t, redislimit.Conn{Cluster: []string{"127.0.0.1:1"}})
	if _, err := redislimit.New(c, redislimit.Config{}); err != nil {
		t.Errorf("New refuses NewClient's cluster client: %v", err)
	}
}
