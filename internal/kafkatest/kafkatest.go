// Package kafkatest starts an in-process Kafka-protocol cluster (github.com/twmb/franz-go/pkg/kfake)
// for tests that drive the real segmentio/kafka-go client.
//
// Every cluster listens on a free loopback port, has its topic created with the requested
// partition count, and is closed by t.Cleanup. Group session timeouts down to 100 ms are
// allowed so tests of joins, leaves and rebalances finish in bounded time. StartWith adds
// TLS (with or without client certificates) and SASL users (PLAIN, SCRAM-SHA-256/512).
package kafkatest

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is a running in-process broker. Its zero value is not usable; call Start.
type Cluster struct {
	// Addr is the loopback host:port of the single broker.
	Addr string
	// Topic is the topic created at start.
	Topic string
	// Partitions is the topic's partition count.
	Partitions int
	// Dialer is how this package's own Produce and ProduceTo connect (TLS, SASL); nil is
	// plain TCP.
	Dialer *kafka.Dialer

	c *kfake.Cluster
}

// User is a SASL user the broker accepts, as a superuser (no ACLs apply).
type User struct {
	// Method is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Method, Name, Password string
}

// Opts are the settings of StartWith; the zero value is Start's plaintext broker.
type Opts struct {
	// TLS, when not nil, makes the broker speak only TLS with this server config
	// (ClientAuth and ClientCAs for mTLS).
	TLS *tls.Config
	// Users enable SASL: every client must authenticate as one of them.
	Users []User
	// Dialer becomes Cluster.Dialer: the client side of TLS and SASL for Produce.
	Dialer *kafka.Dialer
}

// Start launches a one-broker cluster on 127.0.0.1:<free port> with topic created with
// partitions partitions (topics named in extra get the same count) and registers Close
// with t.Cleanup. It fails the test on any error.
func Start(t testing.TB, topic string, partitions int, extra ...string) *Cluster {
	t.Helper()
	return StartWith(t, Opts{}, topic, partitions, extra...)
}

// StartWith is Start with TLS and SASL.
func StartWith(t testing.TB, o Opts, topic string, partitions int, extra ...string) *Cluster {
	t.Helper()
	if partitions < 1 {
		t.Fatalf("kafkatest: partitions must be >= 1, got %d", partitions)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(0),
		kfake.SeedTopics(int32(partitions), append([]string{topic}, extra...)...),
		kfake.DefaultNumPartitions(partitions),
		kfake.AllowAutoTopicCreation(),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	if o.TLS != nil {
		opts = append(opts, kfake.TLS(o.TLS))
	}
	if len(o.Users) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, u := range o.Users {
			opts = append(opts, kfake.Superuser(u.Method, u.Name, u.Password))
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: starting kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		t.Fatalf("kafkatest: want 1 listen address, got %v", addrs)
	}
	return &Cluster{Addr: addrs[0], Topic: topic, Partitions: partitions, Dialer: o.Dialer, c: c}
}

// Kfake returns the underlying cluster, for tests that inject faults.
func (c *Cluster) Kfake() *kfake.Cluster { return c.c }

// Produce writes msgs to the cluster's topic synchronously, acknowledged, partitioned by key
// with the Java-compatible murmur2 partitioner (as `slide produce` does). It fails the test on error.
func (c *Cluster) Produce(t testing.TB, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{
		Addr:         kafka.TCP(c.Addr),
		Topic:        c.Topic,
		Balancer:     &kafka.Murmur2Balancer{},
		BatchSize:    len(msgs) + 1,
		BatchBytes:   64 << 20,
		BatchTimeout: time.Millisecond,
		RequiredAcks: kafka.RequireAll,
	}
	if d := c.Dialer; d != nil {
		w.Transport = &kafka.Transport{TLS: d.TLS, SASL: d.SASLMechanism}
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafkatest: producing %d messages: %v", len(msgs), err)
	}
}

// ProduceTo writes msgs to partition p of the topic, bypassing the balancer.
func (c *Cluster) ProduceTo(t testing.TB, p int, msgs ...kafka.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := c.Dialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	conn, err := d.DialLeader(ctx, "tcp", c.Addr, c.Topic, p)
	if err != nil {
		t.Fatalf("kafkatest: dialing leader of %s/%d: %v", c.Topic, p, err)
	}
	defer conn.Close()
	if _, err := conn.WriteMessages(msgs...); err != nil {
		t.Fatalf("kafkatest: producing %d messages to %s/%d: %v", len(msgs), c.Topic, p, err)
	}
}

// String returns a short description for test logs.
func (c *Cluster) String() string {
	return fmt.Sprintf("kfake %s topic %s/%d", c.Addr, c.Topic, c.Partitions)
}

// rawBatchBytes is the most records ProduceRecords frames into one batch: half of kfake's
// default max.message.bytes.
const rawBatchBytes = 512 << 10

// ProduceRecords writes msgs (their Key, Value and Time; a zero Time is now) to partition p
// of the topic as uncompressed v2 record batches of up to 512 KiB, framed here and sent as
// raw Produce requests over one connection. It is for tests and benchmarks that need
// millions of records: kafka-go's Writer spends microseconds a record, this a few tens of
// nanoseconds, and the broker stores the same batches either way.
func (c *Cluster) ProduceRecords(t testing.TB, p int, msgs ...kafka.Message) {
	t.Helper()
	if c.Dialer != nil {
		t.Fatalf("kafkatest: ProduceRecords speaks plain TCP only")
	}
	conn, err := net.DialTimeout("tcp", c.Addr, 5*time.Second)
	if err != nil {
		t.Fatalf("kafkatest: dialing %s: %v", c.Addr, err)
	}
	defer conn.Close()
	var recs, rec []byte
	var n int32
	var first time.Time
	flush := func() {
		if n == 0 {
			return
		}
		if code, err := produceRaw(conn, c.Topic, int32(p), RecordBatch(0, recs, n, first)); err != nil || code != 0 {
			t.Fatalf("kafkatest: producing %d records to %s/%d: error code %d, %v", n, c.Topic, p, code, err)
		}
		recs, n = recs[:0], 0
	}
	for i := range msgs {
		m := &msgs[i]
		ts := m.Time
		if ts.IsZero() {
			ts = time.Now()
		}
		if n > 0 && (len(recs)+len(m.Key)+len(m.Value)+32 > rawBatchBytes || ts.Before(first)) {
			flush()
		}
		if n == 0 {
			first = ts
		}
		// A record: length, attributes, timestamp delta, offset delta, key, value, no headers.
		rec = append(rec[:0], 0)
		rec = binary.AppendVarint(rec, ts.UnixMilli()-first.UnixMilli())
		rec = binary.AppendVarint(rec, int64(n))
		rec = binary.AppendVarint(rec, int64(len(m.Key)))
		rec = append(rec, m.Key...)
		rec = binary.AppendVarint(rec, int64(len(m.Value)))
		rec = append(rec, m.Value...)
		rec = binary.AppendVarint(rec, 0)
		recs = binary.AppendVarint(recs, int64(len(rec)))
		recs = append(recs, rec...)
		n++
	}
	flush()
}
