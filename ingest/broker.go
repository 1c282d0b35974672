package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Defaults of BrokerConfig.
const (
	DefaultBrokerAddr       = "127.0.0.1:9092"
	DefaultTopic            = "events"
	DefaultBrokerPartitions = 4
)

// BrokerConfig configures the embedded Kafka-protocol broker. The zero value means the
// defaults: 127.0.0.1:9092, topic "events" with 4 partitions.
type BrokerConfig struct {
	// Addr is the host:port to listen on; default DefaultBrokerAddr. Port 0 picks a free port
	// (see Broker.Addrs).
	Addr string
	// Advertise is the host:port clients are told to connect to; default the listen address,
	// with 127.0.0.1 in place of an unspecified host (0.0.0.0 or ::). Set it when clients on
	// other machines produce to a broker listening on all interfaces.
	Advertise string
	// Topic is created at start with Partitions partitions; default DefaultTopic.
	Topic string
	// Partitions is the partition count of Topic and of topics created automatically (the
	// broker creates a topic on first use, as Kafka does by default); default 4.
	Partitions int
	// DataDir, when set, keeps the log, the topics and the groups' committed offsets on disk
	// in that directory (created if needed) instead of in memory, and a broker started on
	// it again reloads them: a restarted broker keeps its records, and a long soak does not
	// hold its log in memory. Writes go to the page cache and are synced when a segment
	// rolls and on Close, as Kafka's default (a machine's crash may lose the last ones);
	// SyncWrites syncs each one. A running broker holds the directory locked: a second one
	// started on it is refused (a DataDirError), as is a directory that cannot be written.
	DataDir string
	// SyncWrites syncs every produced batch to disk before it is acknowledged (DataDir only).
	SyncWrites bool
	// Logger receives the broker's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// Validate reports a config StartBroker would refuse.
func (c BrokerConfig) Validate() error {
	c = c.withDefaults()
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("broker address %q: %w", c.Addr, err)
	}
	if c.Advertise != "" {
		if _, port, err := net.SplitHostPort(c.Advertise); err != nil || port == "0" {
			return fmt.Errorf("advertised address %q: want host:port with a real port", c.Advertise)
		}
	}
	if c.Partitions < 1 || c.Partitions > 10000 {
		return fmt.Errorf("partitions %d: must be in [1, 10000]", c.Partitions)
	}
	if c.SyncWrites && c.DataDir == "" {
		return errors.New("sync writes: only with a data directory (the log is in memory without one)")
	}
	return nil
}

func (c BrokerConfig) withDefaults() BrokerConfig {
	if c.Addr == "" {
		c.Addr = DefaultBrokerAddr
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultBrokerPartitions
	}
	return c
}

// Broker is an in-process Kafka-protocol broker (github.com/twmb/franz-go/pkg/kfake) with one
// node: any Kafka client (kafka-go, franz-go, kcat) can produce to it and consume from it,
// consumer groups included. Data lives in memory and is lost on Close, unless
// BrokerConfig.DataDir keeps it on disk. It is meant for `slide serve` without --brokers,
// demos, soaks and tests, not for production: one node, no replication.
//
// Its methods are safe for concurrent use.
type Broker struct {
	c     *kfake.Cluster
	addrs []string
	topic string
	lock  *os.File // holds BrokerConfig.DataDir's lock until Close; nil in memory
	once  sync.Once
}

// StartBroker starts a broker on cfg.Addr with cfg.Topic created, and returns once it
// answers metadata requests for the topic or ctx ends. The caller must Close it.
func StartBroker(ctx context.Context, cfg BrokerConfig) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	cfg = cfg.withDefaults()
	var bound string // the address actually listened on; Addrs reports the advertised one
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, cfg.Addr)
		if err != nil {
			return nil, err
		}
		bound = ln.Addr().String()
		adv := cfg.Advertise
		if adv == "" {
			host, port, _ := net.SplitHostPort(ln.Addr().String())
			if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1"
			}
			adv = net.JoinHostPort(host, port)
		}
		return advertisedListener{ln, advertisedAddr(adv)}, nil
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.SeedTopics(int32(cfg.Partitions), cfg.Topic),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(kfakeLogger{cfg.Logger}))
	}
	var lock *os.File
	if cfg.DataDir != "" {
		var err error
		if lock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, fmt.Errorf("starting embedded broker on %s: %w", cfg.Addr, err)
	}
	b := &Broker{c: c, addrs: c.ListenAddrs(), topic: cfg.Topic, lock: lock}
	if err := b.waitReady(ctx, bound); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// waitReady dials the broker at addr until it lists the topic's partitions.
func (b *Broker) waitReady(ctx context.Context, addr string) error {
	for {
		conn, err := (&kafka.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			_, err = conn.ReadPartitions(b.topic)
			conn.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for embedded broker on %s: %w", addr, errors.Join(ctx.Err(), err))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Addrs returns the advertised host:port of the broker, for clients' bootstrap lists.
func (b *Broker) Addrs() []string { return append([]string(nil), b.addrs...) }

// Close stops the broker and drops its data. It is safe to call more than once.
func (b *Broker) Close() error {
	b.once.Do(func() {
		b.c.Close() // persists the log: the directory is released after
		if b.lock != nil {
			b.lock.Close()
		}
	})
	return nil
}

// advertisedListener reports the address clients should use: kfake advertises whatever
// the listener's Addr says.
type advertisedListener struct {
	net.Listener
	addr advertisedAddr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// kfakeLogger forwards kfake's warnings and errors to slog; its info and debug lines log
// every request and stay off.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		k.l.Error("embedded broker: " + fmt.Sprintf(msg, args...))
	case kfake.LogLevelWarn:
		k.l.Warn("embedded broker: " + fmt.Sprintf(msg, args...))
	}
}

// partitionLabel is the metric label of partition p.
func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }
