package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/window"
)

// Defaults of Demo.
const (
	DefaultDemoKeys       = 100
	DefaultDemoRate       = 1000
	DefaultDemoHeavy      = 3
	DefaultDemoHeavyShare = 0.5
	DefaultDemoMetric     = "latency_ms"
	DefaultDemoCostMetric = "cost"
)

// Demo describes synthetic request traffic for demos, tests and benchmarks: keys
// tenant-1…tenant-N, each request one latency event (lognormal, median 40 ms) followed by
// one cost event (1 unit plus 1 per started 100 ms). The first Heavy keys are the noisy
// neighbours: together they make HeavyShare of the requests and are slow (median 120 ms,
// a longer tail). The zero value means the defaults.
type Demo struct {
	Keys       int     // distinct keys; default 100
	Rate       float64 // events per second for Run, latency and cost events together; default 1000
	Heavy      int     // heavy keys, at most Keys; default 3 (use a negative value for none)
	HeavyShare float64 // share of requests from heavy keys, in [0, 1]; default 0.5
	Metric     string  // latency metric; default "latency_ms"
	CostMetric string  // cost metric; default "cost"
	Seed       uint64  // random seed; the same seed gives the same events
	// Traces gives each latency event a random trace and span id (window.Event.TraceID,
	// SpanID), as a traced service's request would carry, so that a store keeping exemplars
	// links its slowest requests to them; cost events carry none. Off, the events (and the
	// random draws of a seed) are those of before.
	Traces bool
}

func (d Demo) withDefaults() Demo {
	if d.Keys == 0 {
		d.Keys = DefaultDemoKeys
	}
	if d.Rate == 0 {
		d.Rate = DefaultDemoRate
	}
	switch {
	case d.Heavy == 0:
		d.Heavy = min(DefaultDemoHeavy, d.Keys)
	case d.Heavy < 0:
		d.Heavy = 0
	}
	if d.HeavyShare == 0 {
		d.HeavyShare = DefaultDemoHeavyShare
	}
	if d.Metric == "" {
		d.Metric = DefaultDemoMetric
	}
	if d.CostMetric == "" {
		d.CostMetric = DefaultDemoCostMetric
	}
	return d
}

// Validate reports a Demo NewDemoGen would refuse.
func (d Demo) Validate() error {
	d = d.withDefaults()
	switch {
	case d.Keys < 1:
		return fmt.Errorf("keys %d: must be at least 1", d.Keys)
	case d.Heavy > d.Keys:
		return fmt.Errorf("heavy keys %d: more than the %d keys", d.Heavy, d.Keys)
	case !(d.Rate > 0) || math.IsInf(d.Rate, 0):
		return fmt.Errorf("rate %v: must be a positive number of events per second", d.Rate)
	case !(d.HeavyShare >= 0 && d.HeavyShare <= 1):
		return fmt.Errorf("heavy share %v: must be in [0, 1]", d.HeavyShare)
	case d.Metric == d.CostMetric:
		return fmt.Errorf("latency and cost metric are both %q", d.Metric)
	}
	return nil
}

// DemoGen generates the events of a Demo. It is deterministic for a seed and not safe
// for concurrent use.
type DemoGen struct {
	d       Demo
	rng     *rand.Rand
	ids     *rand.Rand // Traces' ids, drawn apart so that a seed's events stay what they were
	keys    []string
	pending window.Event // the cost event of the last request, sent next
	hasCost bool
}

// NewDemoGen returns a generator for d, or d's error.
func NewDemoGen(d Demo) (*DemoGen, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	d = d.withDefaults()
	g := &DemoGen{d: d, rng: rand.New(rand.NewPCG(d.Seed, 0x5eed)), ids: rand.New(rand.NewPCG(d.Seed, 0x7ace)), keys: make([]string, d.Keys)}
	for i := range g.keys {
		g.keys[i] = "tenant-" + strconv.Itoa(i+1)
	}
	return g, nil
}

// Demo returns the generator's Demo with defaults filled in.
func (g *DemoGen) Demo() Demo { return g.d }

// Next returns the next event at time ts (unix ms): a request's latency event, then its
// cost event, alternately. Partition is −1.
func (g *DemoGen) Next(ts int64) window.Event {
	if g.hasCost {
		g.hasCost = false
		ev := g.pending
		ev.TS = ts
		return ev
	}
	var i int
	heavy := g.d.Heavy > 0 && g.rng.Float64() < g.d.HeavyShare
	if heavy {
		i = g.rng.IntN(g.d.Heavy)
	} else {
		i = g.rng.IntN(g.d.Keys)
		heavy = i < g.d.Heavy
	}
	mu, sigma := math.Log(40), 0.5
	if heavy {
		mu, sigma = math.Log(120), 0.9
	}
	lat := math.Round(math.Exp(mu+sigma*g.rng.NormFloat64())*1000) / 1000
	g.pending = window.Event{Metric: g.d.CostMetric, Key: g.keys[i], Value: 1 + math.Floor(lat/100), Count: 1}
	g.hasCost = true
	ev := window.Event{TS: ts, Metric: g.d.Metric, Key: g.keys[i], Value: lat, Count: 1}
	if g.d.Traces {
		binary.BigEndian.PutUint64(ev.TraceID[:8], g.ids.Uint64())
		binary.BigEndian.PutUint64(ev.TraceID[8:], g.ids.Uint64()|1) // never all zero
		binary.BigEndian.PutUint64(ev.SpanID[:], g.ids.Uint64()|1)
	}
	return ev
}

// genChunk is the most events DemoGen.Run hands to emit at once.
const genChunk = 4096

// Run generates events at g's rate, stamped with the wall clock, and hands them to emit in
// batches every 10 ms until ctx ends or emit fails. It returns how many events emit took.
// When emit falls behind, Run drops the backlog beyond one second rather than bursting.
// emit must not keep the batch slice.
func (g *DemoGen) Run(ctx context.Context, emit func([]window.Event) error) (int64, error) {
	t := time.NewTicker(demoTick)
	defer t.Stop()
	return g.run(ctx, t.C, emit)
}

// demoTick is how often DemoGen.Run sends what is due.
const demoTick = 10 * time.Millisecond

// run is Run on the ticks of ticks.
func (g *DemoGen) run(ctx context.Context, ticks <-chan time.Time, emit func([]window.Event) error) (int64, error) {
	const tick = demoTick
	start := time.Now()
	var sent int64
	batch := make([]window.Event, 0, min(int64(g.d.Rate/50)+16, genChunk))
	for {
		select {
		case <-ctx.Done():
			return sent, nil
		case now := <-ticks:
			due := int64(g.d.Rate*now.Sub(start).Seconds()) - sent
			if limit := int64(g.d.Rate) + 1; due > limit {
				// Behind by more than a second: skip ahead instead of bursting.
				start = now.Add(-time.Duration(float64(sent+limit) / g.d.Rate * float64(time.Second)))
				due = limit
			}
			if due <= 0 {
				continue
			}
			ts := now.UnixMilli()
			// In batches of at most genChunk: a high rate must not build a second's worth of
			// events at once, and a blocking emit (a producer at its in-flight cap) brings
			// the loop back to the skip-ahead check above within about a tick. The tick's
			// budget runs from now, when the loop took the tick, not from the tick's time: on
			// a busy machine a tick is taken late, and a budget already spent sent nothing
			// at all (TestDemoRunLateTicks).
			for began := time.Now(); due > 0 && time.Since(began) < tick; {
				n := min(due, genChunk)
				batch = batch[:0]
				for range n {
					batch = append(batch, g.Next(ts))
				}
				if err := emit(batch); err != nil {
					return sent, err
				}
				sent += n
				due -= n
			}
		}
	}
}

// ProducerConfig configures a Producer. Brokers is required; zero fields are defaults.
type ProducerConfig struct {
	Brokers      []string      // bootstrap host:port addresses; required
	Topic        string        // default "events"
	BatchSize    int           // records per partition batch, closed sooner at 1 MB of records; default 1000
	BatchTimeout time.Duration // longest a partial batch waits; default 10 ms
	Dialer       *kafka.Dialer // TLS and SASL settings; nil means plain TCP
	// MaxInFlight caps the records queued but not yet acknowledged by the broker; Send and
	// SendEvents block (until ctx ends) while it is reached, so a producer faster than the
	// broker waits instead of queueing without bound. Default 100,000.
	MaxInFlight int
}

// Validate reports a config NewProducer would refuse.
func (c ProducerConfig) Validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("no brokers")
	case c.BatchSize < 0:
		return fmt.Errorf("batch size %d: must not be negative", c.BatchSize)
	case c.BatchTimeout < 0:
		return fmt.Errorf("batch timeout %v: must not be negative", c.BatchTimeout)
	case c.MaxInFlight < 0:
		return fmt.Errorf("max in flight %d: must not be negative", c.MaxInFlight)
	}
	return nil
}

// Producer writes records to a topic asynchronously in batches, keyed so that all events
// of a key land in one partition (kafka-go's Murmur2Balancer, the Java client's
// partitioner). Send returns once the record is queued; Close flushes and waits. Stats
// counts what the broker acknowledged. At most MaxInFlight records wait for their
// acknowledgement: beyond that, Send blocks. Safe for concurrent use.
type Producer struct {
	w                     *kafka.Writer
	acked, failed, nbytes atomic.Int64
	mu                    sync.Mutex
	lastErr               error // guarded by mu

	maxInFlight int64
	qmu         sync.Mutex
	inFlight    int64         // guarded by qmu
	freed       chan struct{} // closed and replaced whenever records complete; guarded by qmu
}

// ProducerStats are a Producer's counts of records and value bytes acknowledged or failed.
type ProducerStats struct {
	Sent, Failed int64
	Bytes        int64 // value bytes of the records sent
	LastErr      error // the last write error, nil if none
}

// NewProducer returns a producer of cfg.Topic. It does not connect until the first Send.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("producer config: %w", err)
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 1000
	}
	if cfg.BatchTimeout == 0 {
		cfg.BatchTimeout = 10 * time.Millisecond
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 100_000
	}
	p := &Producer{maxInFlight: int64(cfg.MaxInFlight), freed: make(chan struct{})}
	p.w = &kafka.Writer{
		Addr:                   kafka.TCP(cfg.Brokers...),
		Topic:                  cfg.Topic,
		Balancer:               &kafka.Murmur2Balancer{},
		BatchSize:              cfg.BatchSize,
		BatchBytes:             kafkarange.MaxBatchBytes, // 1,000 records of a few KB (an OTLP request, a long log line) would pass a broker's limit
		BatchTimeout:           cfg.BatchTimeout,
		RequiredAcks:           kafka.RequireOne,
		Async:                  true,
		AllowAutoTopicCreation: true,
		Completion:             p.completed,
	}
	if d := cfg.Dialer; d != nil {
		p.w.Transport = &kafka.Transport{Dial: d.DialFunc, TLS: d.TLS, SASL: d.SASLMechanism, ClientID: d.ClientID}
	}
	return p, nil
}

// acquire waits until n more records may be in flight. A batch larger than the cap goes
// alone, when nothing else is in flight.
func (p *Producer) acquire(ctx context.Context, n int64) error {
	for {
		p.qmu.Lock()
		if p.inFlight == 0 || p.inFlight+n <= p.maxInFlight {
			p.inFlight += n
			p.qmu.Unlock()
			return nil
		}
		freed := p.freed
		p.qmu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the broker to acknowledge %d queued records: %w", p.maxInFlight, ctx.Err())
		case <-freed:
		}
	}
}

// release returns n records' places and wakes the waiting senders.
func (p *Producer) release(n int64) {
	p.qmu.Lock()
	p.inFlight = max(p.inFlight-n, 0)
	close(p.freed)
	p.freed = make(chan struct{})
	p.qmu.Unlock()
}

func (p *Producer) completed(msgs []kafka.Message, err error) {
	defer p.release(int64(len(msgs)))
	if err != nil {
		p.failed.Add(int64(len(msgs)))
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		return
	}
	var n int64
	for _, m := range msgs {
		n += int64(len(m.Value))
	}
	p.acked.Add(int64(len(msgs)))
	p.nbytes.Add(n)
}

// Send queues one record, waiting while MaxInFlight records are unacknowledged. The
// producer keeps key and value: do not modify them afterwards.
func (p *Producer) Send(ctx context.Context, key, value []byte) error {
	return p.write(ctx, kafka.Message{Key: key, Value: value})
}

// write queues msgs once they fit under MaxInFlight.
func (p *Producer) write(ctx context.Context, msgs ...kafka.Message) error {
	if err := p.acquire(ctx, int64(len(msgs))); err != nil {
		return err
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		p.release(int64(len(msgs))) // not queued: no completion will come
		return fmt.Errorf("queueing %d records: %w", len(msgs), err)
	}
	return nil
}

// SendAt is Send with the record's timestamp set to ts (Kafka's CreateTime) instead of the
// time of sending: a replay of history keeps each record at its event's time, so consumers
// that seek by time and judge lateness by record time see the log as it was.
func (p *Producer) SendAt(ctx context.Context, key, value []byte, ts time.Time) error {
	return p.write(ctx, kafka.Message{Key: key, Value: value, Time: ts})
}

// SendEvents queues one record per event, keyed by the event's key, its value the JSON
// line event.Append writes.
func (p *Producer) SendEvents(ctx context.Context, evs []window.Event) error {
	msgs := make([]kafka.Message, len(evs))
	buf := make([]byte, 0, 128*len(evs)) // one allocation for the batch's values (a demo latency with its ids is ~150 bytes, a cost ~70)
	for i, ev := range evs {
		start := len(buf)
		buf = event.Append(buf, ev)
		// A full slice expression: a later append that grows buf cannot reach this value,
		// and a reallocation leaves it in the old array, unchanged.
		msgs[i] = kafka.Message{Key: []byte(ev.Key), Value: buf[start:len(buf):len(buf)]}
	}
	return p.write(ctx, msgs...)
}

// Close flushes queued records, waits for their acknowledgements and closes the producer.
func (p *Producer) Close() error { return p.w.Close() }

// Stats returns the counts so far. After Close they are final.
func (p *Producer) Stats() ProducerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ProducerStats{Sent: p.acked.Load(), Failed: p.failed.Load(), Bytes: p.nbytes.Load(), LastErr: p.lastErr}
}
