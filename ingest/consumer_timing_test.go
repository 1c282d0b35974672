package ingest

import (
	"context"
	"fmt"
	"net"
	rtmetrics "runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// BenchmarkEndToEnd measures events per second from the embedded broker into the windows.
// One op reads the whole pre-produced topic (100,000 one-event records over 4 partitions):
// "ours" is a Consumer joining a fresh group, restoring every partition into a fresh store
// (decode, checks, observe, metrics); "anchor" is a bare kafka-go fetch loop, one Reader
// per partition with the same fetch settings, doing nothing with the records. Joining and
// reader creation are timed for both; closing (which waits out an idle fetch) for neither.
// Both also report cpu_ms/op, the process's CPU time over the timed part (the embedded
// broker's included), which a loaded machine's noise moves far less than the rate, and
// gc/op, the collections that ran in it: the two sides share one heap with the broker, so
// a side that keeps more of it live collects less often (by-hand.md, "round 11").
func BenchmarkEndToEnd(b *testing.B) {
	const events = 100_000
	c := kafkatest.Start(b, "events", 4)
	t0 := time.Now()
	clock := func() time.Time { return t0 }
	g, err := NewDemoGen(Demo{Keys: 1000})
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]kafka.Message, events)
	var size int64
	for i := range msgs {
		ev := g.Next(t0.UnixMilli() - int64(events-i))
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: event.Append(nil, ev)}
		size += int64(len(msgs[i].Value))
	}
	for i := 0; i < events; i += 10_000 {
		c.Produce(b, msgs[i:i+10_000]...)
	}
	end := logEnd(b, c, c.Topic)
	const maxWait = 500 * time.Millisecond

	b.Run("ours", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var sum opCost
		for i := 0; i < b.N; i++ {
			cfg := Config{Brokers: []string{c.Addr}, Topic: c.Topic, Group: fmt.Sprintf("bench-%d", i),
				HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second, MaxWait: maxWait}
			sum.add(timeConsume(b, cfg, clock, end, events))
		}
		sum.report(b, events, "events/s")
	})

	b.Run("anchor", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var sum opCost
		for i := 0; i < b.N; i++ {
			sum.add(timeFetch(b, c, end, events, maxWait))
		}
		sum.report(b, events, "events/s")
	})
}

// timeFetch is the anchor of the end-to-end benchmarks: a bare kafka-go fetch loop, one
// Reader per partition of c with a consumer's fetch settings, doing nothing with the records,
// until each partition is read to end (records in all); it returns the time that took and
// the CPU time the process spent meanwhile, with the timer stopped for the closing.
func timeFetch(b *testing.B, c *kafkatest.Cluster, end map[int32]int64, records int, maxWait time.Duration) opCost {
	var conns connSet
	start := startCost()
	var wg sync.WaitGroup
	readers := make([]*kafka.Reader, c.Partitions)
	counts := make([]int, c.Partitions)
	for p := range c.Partitions {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.Addr}, Topic: c.Topic, Partition: p,
			MinBytes: 1, MaxBytes: DefaultMaxBytes, MaxWait: maxWait, QueueCapacity: 1024, ReadLagInterval: -1,
			Dialer: &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, DialFunc: conns.dial}})
		readers[p] = r
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int64(counts[p]) < end[int32(p)] {
				if _, err := r.FetchMessage(context.Background()); err != nil {
					b.Error(err)
					return
				}
				counts[p]++
			}
		}()
	}
	wg.Wait()
	cost := start.since()
	b.StopTimer()
	// kafka-go's Close waits out an idle fetch (MaxWait, ~0.5 s here), where the consumer's
	// stop interrupts it (readRaw). The readers' connections are closed first, so that their
	// idle fetches end at once and Close returns as ours' stop does: no idle gap before the
	// next op (an op after half a second idle runs 10–15 ms slower on either side), and no
	// closing readers left holding the heap while the next op runs (closed in the
	// background, they held ~200 MB, and a heap that large halved the collections the
	// loop's ops paid against ours': by-hand.md, "Spans end to end: round 11").
	conns.closeAll()
	total := 0
	for p, r := range readers {
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
		total += counts[p]
	}
	if total != records {
		b.Fatalf("anchor read %d records, want %d", total, records)
	}
	b.StartTimer()
	return cost
}

// connSet is a dialer's connections, so that a test can close them all at once; a dial
// after that fails.
type connSet struct {
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func (s *connSet) dial(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		conn.Close()
		return nil, net.ErrClosed
	}
	s.conns = append(s.conns, conn)
	return conn, nil
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, conn := range s.conns {
		conn.Close()
	}
}

// cpuNow is the CPU time (user and system) this process has used: ours and the anchor
// report it per op, since on a loaded machine the events/s ratio follows it.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// opCost is what timed ops took: wall time, the process's CPU time and its collections.
type opCost struct {
	took, cpu time.Duration
	gcs       uint64
}

// opStart is when an op began: the wall clock, the process's CPU time and its collections.
type opStart struct {
	at  time.Time
	cpu time.Duration
	gcs uint64
}

func startCost() opStart { return opStart{at: time.Now(), cpu: cpuNow(), gcs: gcCycles()} }

// since is what passed from s to now.
func (s opStart) since() opCost {
	return opCost{took: time.Since(s.at), cpu: cpuNow() - s.cpu, gcs: gcCycles() - s.gcs}
}

func (o *opCost) add(p opCost) { o.took, o.cpu, o.gcs = o.took+p.took, o.cpu+p.cpu, o.gcs+p.gcs }

// report reports the b.N ops' CPU per op, items (of each op) per second as unit, and the
// collections per op.
func (o opCost) report(b *testing.B, items int, unit string) {
	b.ReportMetric(o.cpu.Seconds()*1000/float64(b.N), "cpu_ms/op")
	b.ReportMetric(float64(items*b.N)/o.took.Seconds(), unit)
	b.ReportMetric(float64(o.gcs)/float64(b.N), "gc/op")
}

// gcCycles is the number of collections the process has completed.
func gcCycles() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// consumedAll reports whether every partition in end is processed to its end offset.
// timeConsume runs a consumer of cfg into a fresh store until it has consumed every
// partition up to end, with the timer stopped for what follows, checks that it accepted
// events, and returns the time the consuming took and the CPU time the process spent
// meanwhile.
func timeConsume(b *testing.B, cfg Config, clock func() time.Time, end map[int32]int64, events int) opCost {
	b.Helper()
	cons, err := New(cfg, newTestStore(b, 0), WithClock(clock))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := startCost()
	go func() { done <- cons.Run(ctx) }()
	for !consumedAll(cons.Progress(), end) {
		time.Sleep(200 * time.Microsecond)
	}
	cost := start.since()
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if got := sum(cons.m.events); got != float64(events) {
		b.Fatalf("consumer accepted %v events, want %d", got, events)
	}
	b.StartTimer()
	return cost
}

func consumedAll(pr Progress, end map[int32]int64) bool {
	if len(pr.Partitions) != len(end) {
		return false
	}
	for _, p := range pr.Partitions {
		if p.Next < end[p.Partition] {
			return false
		}
	}
	return true
}
