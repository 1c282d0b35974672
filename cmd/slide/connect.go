package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/limiter/redislimit"
	"github.com/slide-metrics/slide/query"

	goredis "github.com/redis/go-redis/v9"
)

// kafkaPasswordEnv carries the SASL password when no --kafka-sasl-password-file is given.
// There is deliberately no --kafka-sasl-password flag: a flag's value shows in ps and in
// shell history.
const kafkaPasswordEnv = "SLIDE_KAFKA_SASL_PASSWORD"

// kafkaFlags are the Kafka TLS and SASL flags of serve and produce.
type kafkaFlags struct {
	tls                  bool
	ca, cert, key        string
	serverName           string
	sasl, user, passFile string
}

func (k *kafkaFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&k.tls, "kafka-tls", false, "connect to the brokers with TLS (implied by --kafka-ca, --kafka-cert)")
	fs.StringVar(&k.ca, "kafka-ca", "", "PEM file of the CA that signs the brokers' certificates (default: the system roots)")
	fs.StringVar(&k.cert, "kafka-cert", "", "PEM client certificate for mTLS (with --kafka-key)")
	fs.StringVar(&k.key, "kafka-key", "", "PEM private key of --kafka-cert")
	fs.StringVar(&k.serverName, "kafka-tls-server-name", "", "name to verify in the brokers' certificates (default: the host dialled)")
	fs.StringVar(&k.sasl, "kafka-sasl", "", "SASL mechanism: plain, scram-sha-256 or scram-sha-512 (empty: none)")
	fs.StringVar(&k.user, "kafka-sasl-user", "", "SASL user")
	fs.StringVar(&k.passFile, "kafka-sasl-password-file", "", "file holding the SASL password (or set "+kafkaPasswordEnv+")")
}

// set reports whether any Kafka security flag was given.
func (k *kafkaFlags) set() bool {
	return k.tls || k.ca != "" || k.cert != "" || k.key != "" || k.serverName != "" || k.sasl != "" || k.user != "" || k.passFile != ""
}

// security turns the flags into ingest.Security, reading the CA, the client certificate
// and the password. Errors name the flag, never the password.
func (k *kafkaFlags) security(getenv func(string) (string, bool)) (ingest.Security, error) {
	var s ingest.Security
	if k.tls || k.ca != "" || k.cert != "" || k.key != "" || k.serverName != "" {
		c, err := clientTLS("--kafka", k.ca, k.cert, k.key, k.serverName)
		if err != nil {
			return s, err
		}
		s.TLS = c
	}
	s.SASL, s.User = k.sasl, k.user
	if k.sasl != "" {
		switch {
		case k.passFile != "":
			p, err := readSecretFile(k.passFile)
			if err != nil {
				return s, fmt.Errorf("--kafka-sasl-password-file: %w", err)
			}
			s.Password = p
		default:
			if p, ok := getenv(kafkaPasswordEnv); ok {
				s.Password = strings.TrimRight(p, "\r\n")
			}
		}
		if s.Password == "" {
			return s, fmt.Errorf("--kafka-sasl %s needs a password: --kafka-sasl-password-file or %s", k.sasl, kafkaPasswordEnv)
		}
	} else if k.user != "" || k.passFile != "" {
		return s, errors.New("--kafka-sasl-user and --kafka-sasl-password-file need --kafka-sasl")
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--kafka-sasl: %w", err)
	}
	return s, nil
}

// dialer is security's *kafka.Dialer: the one every Kafka connection of the process uses
// (consumer group, readers, dead-letter writer, demo producer, slide produce).
func (k *kafkaFlags) dialer(getenv func(string) (string, bool)) (*kafka.Dialer, ingest.Security, error) {
	s, err := k.security(getenv)
	if err != nil {
		return nil, s, err
	}
	d, err := s.Dialer()
	return d, s, err
}

// redisFlags are serve's Redis connection flags beside --redis.
type redisFlags struct {
	ca, cluster, sentinel, user, passFile string
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.ca, "redis-ca", "", "PEM file of the CA that signs Redis's certificate; turns TLS on (rediss:// does too)")
	fs.StringVar(&r.cluster, "redis-cluster", "", "Redis Cluster seed nodes HOST:PORT,... (instead of --redis)")
	fs.StringVar(&r.sentinel, "redis-sentinel", "", "Sentinel-managed Redis MASTER@HOST:PORT,... (instead of --redis)")
	fs.StringVar(&r.user, "redis-user", "", "Redis ACL user (Redis 6+)")
	fs.StringVar(&r.passFile, "redis-password-file", "", "file holding the Redis password (instead of one in a --redis URL)")
}

// set reports whether Redis is configured at all.
func (r *redisFlags) set(addr string) bool { return addr != "" || r.cluster != "" || r.sentinel != "" }

// conn turns --redis (host:port or URL) and these flags into a redislimit.Conn.
func (r *redisFlags) conn(addr string) (redislimit.Conn, error) {
	c := redislimit.Conn{Addr: addr, Username: r.user}
	if r.cluster != "" {
		c.Cluster = splitList(r.cluster)
	}
	if r.sentinel != "" {
		master, addrs, ok := strings.Cut(r.sentinel, "@")
		if !ok || master == "" {
			return c, fmt.Errorf("--redis-sentinel %q: want MASTER@HOST:PORT,...", redislimit.Redact(r.sentinel))
		}
		c.SentinelMaster, c.Sentinels = master, splitList(addrs)
	}
	if r.passFile != "" {
		p, err := readSecretFile(r.passFile)
		if err != nil {
			return c, fmt.Errorf("--redis-password-file: %w", err)
		}
		c.Password = p
	}
	if r.ca != "" {
		t, err := clientTLS("--redis", r.ca, "", "", "")
		if err != nil {
			return c, err
		}
		c.TLS = t
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("--redis: %w", err)
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// readSmallFile reads a file of at most max bytes, and refuses a larger one after reading
// max + 1 (a wrong path, a log or /dev/zero, fails at once instead of filling memory).
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d KiB", path, max>>10)
	}
	return b, nil
}

// readSecretFile reads a password file: surrounding white space (the newline editors add)
// is dropped. Its errors name the file, never its content.
func readSecretFile(path string) (string, error) {
	b, err := readSmallFile(path, 64<<10)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// clientTLS is the client side of TLS for a backend: ca (PEM, empty: system roots), an
// optional client certificate for mTLS, an optional server name to verify.
func clientTLS(flagPrefix, ca, cert, key, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pool, err := loadCAs(ca)
		if err != nil {
			return nil, fmt.Errorf("%s-ca: %w", flagPrefix, err)
		}
		c.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s-cert and %s-key go together", flagPrefix, flagPrefix)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s-cert: %w", flagPrefix, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// loadCAs reads a PEM file of one or more CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	b, err := readSmallFile(path, 4<<20) // the whole Mozilla bundle is about 220 KB

	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// backend is one external system serve depends on, checked at start and then every few
// seconds, so /readyz shows its state. A change of state is one log line: the failure
// names the backend, its address and the cause ("redis 10.0.0.5:6379: WRONGPASS ...").
type backend struct {
	name, addr string
	// gates: while the check fails and has never passed, serve is not ready (Kafka: with
	// a refused password nothing will ever be read, and /readyz should say why). Once it
	// has passed, a failure is shown, logged and exported (slide_backend_up) but does not
	// gate: the windows hold what was read. Redis never gates: its decisions follow each
	// policy's on_backend_error.
	gates bool
	check func(ctx context.Context) error
	// warn, when set, is asked after a check passes: a setting that works but loses
	// something (Redis evicting limiter keys), logged once per distinct warning.
	warn   func(ctx context.Context) string
	warned string

	mu      sync.Mutex
	checked bool
	passed  bool // some check succeeded
	err     error
}

// Backend re-check intervals: soon while failing, rarely while fine.
const (
	backendRetry   = 5 * time.Second
	backendRecheck = 30 * time.Second
	backendTimeout = 5 * time.Second
)

// run checks now and then keeps checking until ctx ends.
func (b *backend) run(ctx context.Context, log *slog.Logger) {
	for {
		cctx, cancel := context.WithTimeout(ctx, backendTimeout)
		err := b.check(cctx)
		warning := ""
		if err == nil && b.warn != nil {
			warning = b.warn(cctx)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		b.set(err, log)
		if warning != "" && warning != b.warned {
			log.Warn(b.describe(errors.New(warning)), "backend", b.name)
		}
		if err == nil {
			b.warned = warning
		}
		wait := backendRecheck
		if err != nil {
			wait = backendRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (b *backend) set(err error, log *slog.Logger) {
	b.mu.Lock()
	first, was := !b.checked, b.err
	b.checked, b.err = true, err
	b.passed = b.passed || err == nil
	b.mu.Unlock()
	switch {
	case err != nil && (first || was == nil || was.Error() != err.Error()):
		log.Error(b.describe(err), "backend", b.name)
	case err == nil && (first || was != nil):
		log.Info(b.name+" "+b.addr+": connected", "backend", b.name)
	}
}

// describe prefixes an error with the backend and its address unless it names them already.
func (b *backend) describe(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, b.name+" ") {
		return msg
	}
	return b.name + " " + b.addr + ": " + msg
}

func (b *backend) state() query.BackendState {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := query.BackendState{Name: b.name, Addr: b.addr, State: "checking"}
	switch {
	case !b.checked:
	case b.err != nil:
		s.State, s.Error = "failing", b.describe(b.err)
	default:
		s.State = "ok"
	}
	return s
}

// failing returns the check's error while a gating backend's last check failed.
func (b *backend) failing() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gates && !b.passed && b.err != nil {
		return errors.New(b.describe(b.err))
	}
	return nil
}

// backends is the set serve checks.
type backends []*backend

func (bs backends) states() []query.BackendState {
	out := make([]query.BackendState, len(bs))
	for i, b := range bs {
		out[i] = b.state()
	}
	return out
}

func (bs backends) failing() error {
	for _, b := range bs {
		if err := b.failing(); err != nil {
			return err
		}
	}
	return nil
}

// backendUpHelp is slide_backend_up's help: the backends' state for alerts, as /readyz
// shows it to people.
const backendUpHelp = "1 while the last check of a backend (kafka, redis) passed, 0 while it fails (every 5 s then); absent before the first check. With Kafka down no record waits that the consumer can see, so slide_ingest_lag_seconds stays 0: alert on this one."

var backendUpDesc = prometheus.NewDesc("slide_backend_up", backendUpHelp, []string{"backend"}, nil)

// Describe and Collect export slide_backend_up at scrape time.
func (bs backends) Describe(ch chan<- *prometheus.Desc) { ch <- backendUpDesc }

func (bs backends) Collect(ch chan<- prometheus.Metric) {
	for _, b := range bs {
		b.mu.Lock()
		checked, up := b.checked, b.err == nil
		b.mu.Unlock()
		if !checked {
			continue // not known yet: neither up nor down
		}
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(backendUpDesc, prometheus.GaugeValue, v, b.name)
	}
}

func kafkaBackend(brokers []string, d *kafka.Dialer) *backend {
	return &backend{name: "kafka", addr: strings.Join(brokers, ","), gates: true,
		check: func(ctx context.Context) error { return ingest.CheckBrokers(ctx, brokers, d) }}
}

func redisBackend(conn redislimit.Conn, c goredis.UniversalClient) *backend {
	// PING, then the limiter's scripts as its ACL user may run them: a user without EVAL,
	// a command the scripts call or the rl:* keys answered PING, so /readyz said "ok"
	// while every decision failed (or, without EVAL, would fail after Redis restarts).
	check := func(ctx context.Context) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		return redislimit.CheckAccess(ctx, c, "")
	}
	if cc, ok := c.(*goredis.ClusterClient); ok {
		// A keyless PING reaches one node at random: a dead master, whose slots'
		// decisions fail, would show "ok" most of the time. Ask every master.
		check = func(ctx context.Context) error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
				err := n.Ping(ctx).Err()
				if err == nil {
					err = redislimit.CheckAccess(ctx, n, "")
				}
				if err != nil {
					return fmt.Errorf("master %s: %w", n.Options().Addr, err)
				}
				return nil
			})
		}
	}
	warn := func(ctx context.Context) string { return redislimit.EvictionWarning(ctx, c) }
	if cc, ok := c.(*goredis.ClusterClient); ok {
		warn = func(ctx context.Context) string {
			var mu sync.Mutex
			var w []string
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
				if s := redislimit.EvictionWarning(ctx, n); s != "" {
					mu.Lock()
					w = append(w, "master "+n.Options().Addr+": "+s)
					mu.Unlock()
				}
				return nil
			})
			slices.Sort(w)
			return strings.Join(w, "; ")
		}
	}
	return &backend{name: "redis", addr: conn.String(), check: check, warn: warn}
}

// connFlags are serve's connection flags: Kafka and Redis security, HTTPS. Kept apart
// from serveConfig's own flags (connect.go, https.go) so each concern stays in one file.
type connFlags struct {
	kafka kafkaFlags
	redis redisFlags
	https httpsFlags

	// Filled by serve as it connects.
	kafkaDialer *kafka.Dialer
	checks      backends
	serverTLS   *tls.Config   // HTTPS: the listener's config (prepareHTTPS)
	certs       *certReloader // HTTPS: the serving certificate, reloaded on SIGHUP
}

func (c *connFlags) register(fs *flag.FlagSet) {
	c.kafka.register(fs)
	c.redis.register(fs)
	c.https.register(fs)
}

// check refuses connection flags that cannot work, before anything starts.
func (c *connFlags) check(brokers string) error {
	if brokers == "" && c.kafka.set() {
		return errors.New("--kafka-tls, --kafka-sasl and the other --kafka-* flags need --brokers: the embedded broker speaks plaintext only")
	}
	return c.https.check()
}

// connectKafka builds the Kafka dialer and its start-up check.
func (c *connFlags) connectKafka(brokers []string, log *slog.Logger) error {
	d, sec, err := c.kafka.dialer(os.LookupEnv)
	if err != nil {
		return err
	}
	if c.kafka.set() {
		c.kafkaDialer = d // nil otherwise: the libraries' defaults, as before these flags
	}
	c.checks = append(c.checks, kafkaBackend(brokers, d))
	if c.kafka.set() {
		log.Info("kafka security", "protocol", sec.String())
	}
	return nil
}

// connectRedis builds the limiter's Redis client from --redis and the --redis-* flags,
// or returns nil when none is set.
func (c *connFlags) connectRedis(addr string) (goredis.UniversalClient, error) {
	if !c.redis.set(addr) {
		if c.redis.ca != "" || c.redis.user != "" || c.redis.passFile != "" {
			return nil, errors.New("--redis-ca, --redis-user and --redis-password-file need --redis, --redis-cluster or --redis-sentinel")
		}
		return nil, nil
	}
	conn, err := c.redis.conn(addr)
	if err != nil {
		return nil, err
	}
	client, err := redislimit.NewClient(conn)
	if err != nil {
		return nil, fmt.Errorf("--redis: %w", err)
	}
	c.checks = append(c.checks, redisBackend(conn, client))
	return client, nil
}

// startChecks checks every backend now and then every few seconds until ctx ends.
func (c *connFlags) startChecks(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger) {
	for _, b := range c.checks {
		wg.Go(func() { b.run(ctx, log) })
	}
}

// prepareHTTPS loads the serving certificate when --tls-cert is set, before the listener
// and the cluster's peer client (which presents the same certificate) are built.
func (c *connFlags) prepareHTTPS() error {
	if !c.https.enabled() {
		return nil
	}
	conf, r, err := c.https.serverTLS()
	if err != nil {
		return err
	}
	c.serverTLS, c.certs = conf, r
	return nil
}

// peerTLS is the client config peer reads use when HTTPS is on (nil: plain HTTP): peers are
// verified against --peer-ca (default --client-ca, else the system roots) and shown this
// instance's own serving certificate, so a group behind --client-ca reads its peers.
func (c *connFlags) peerTLS() (*tls.Config, error) {
	if c.certs == nil {
		return nil, nil
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.certs.getCertificate(nil)
		},
	}
	ca := c.https.peerCA
	if ca == "" {
		ca = c.https.clientCA
	}
	if ca != "" {
		pool, err := loadCAs(ca)
		if err != nil {
			return nil, fmt.Errorf("--peer-ca: %w", err)
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// listener wraps ln in TLS when --tls-cert is set (prepareHTTPS loaded it), and reloads the
// certificate on SIGHUP until ctx ends.
func (c *connFlags) listener(ctx context.Context, ln net.Listener, log *slog.Logger) (net.Listener, error) {
	if c.serverTLS == nil {
		return ln, nil
	}
	reloadOnHUP(ctx, c.certs, log)
	log.Info("serving HTTPS", "cert", c.https.cert, "client_certificates", c.https.clientCA != "")
	return tlsListener(ln, c.serverTLS), nil
}
