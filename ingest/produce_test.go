package ingest

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// TestDemoTraces: with Traces, each latency event carries a trace and span id of its own (so
// that slide serve --demo shows exemplars on latency_ms), which slide's JSON keeps; cost
// events carry none, and the events are otherwise those of the same seed without it.
func TestDemoTraces(t *testing.T) {
	g, err := NewDemoGen(Demo{Keys: 20, Seed: 9, Traces: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := NewDemoGen(Demo{Keys: 20, Seed: 9})
	d, err := event.NewDecoder(event.Config{})
	if err != nil {
		t.Fatal(err)
	}
	traces := map[[16]byte]bool{}
	for i := range 2000 {
		ev, want := g.Next(int64(i)), plain.Next(int64(i))
		if ev.Metric == "cost" {
			if ev.TraceID != [16]byte{} || ev.SpanID != [8]byte{} {
				t.Fatalf("event %d, a cost, has ids: %+v", i, ev)
			}
		} else if ev.TraceID == [16]byte{} || ev.SpanID == [8]byte{} || traces[ev.TraceID] {
			t.Fatalf("event %d, a latency, has ids %x %x: want its own", i, ev.TraceID, ev.SpanID)
		}
		traces[ev.TraceID] = true
		if got, r := d.Decode(event.Append(nil, ev), 0); r != event.ReasonNone || got != ev {
			t.Fatalf("event %+v read back as %+v %v", ev, got, r)
		}
		ev.TraceID, ev.SpanID = [16]byte{}, [8]byte{}
		if ev != want {
			t.Fatalf("event %d: %+v, without traces %+v", i, ev, want)
		}
	}
}

func TestDemoGen(t *testing.T) {
	for name, d := range map[string]Demo{
		"no keys":         {Keys: -1},
		"heavy > keys":    {Keys: 2, Heavy: 3},
		"negative rate":   {Rate: -1},
		"share above one": {HeavyShare: 1.5},
		"same metrics":    {Metric: "x", CostMetric: "x"},
	} {
		if _, err := NewDemoGen(d); err == nil {
			t.Errorf("%s: NewDemoGen accepted %+v", name, d)
		}
	}
	g1, err := NewDemoGen(Demo{Keys: 20, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := NewDemoGen(Demo{Keys: 20, Seed: 9})
	if d := g1.Demo(); d.Heavy != 3 || d.Rate != 1000 || d.Metric != "latency_ms" || d.CostMetric != "cost" {
		t.Errorf("defaults: %+v", d)
	}
	lat := map[bool][]float64{}
	requests := map[string]int{}
	for i := range 20000 {
		ev := g1.Next(int64(i))
		if ev2 := g2.Next(int64(i)); ev2 != ev {
			t.Fatalf("event %d differs for the same seed: %+v %+v", i, ev, ev2)
		}
		if ev.TS != int64(i) || ev.Feed != 0 || ev.Count != 1 {
			t.Fatalf("event %d: %+v", i, ev)
		}
		switch i % 2 {
		case 0:
			if ev.Metric != "latency_ms" || !(ev.Value > 0) {
				t.Fatalf("event %d is not a latency: %+v", i, ev)
			}
			requests[ev.Key]++
			heavy := slices.Contains([]string{"tenant-1", "tenant-2", "tenant-3"}, ev.Key)
			lat[heavy] = append(lat[heavy], ev.Value)
		case 1:
			if ev.Metric != "cost" || ev.Value < 1 {
				t.Fatalf("event %d is not a cost: %+v", i, ev)
			}
		}
	}
	if len(requests) != 20 {
		t.Errorf("%d keys seen, want 20", len(requests))
	}
	heavyShare := float64(len(lat[true])) / 10000
	// 50% heavy by choice, plus the uniform draws that land on a heavy key: 0.5 + 0.5×3/20.
	if math.Abs(heavyShare-0.575) > 0.02 {
		t.Errorf("heavy keys made %.3f of the requests, want about 0.575", heavyShare)
	}
	median := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	if mh, mn := median(lat[true]), median(lat[false]); math.Abs(mn-40) > 3 || math.Abs(mh-120) > 10 {
		t.Errorf("median latency heavy %.1f (want ≈120), others %.1f (want ≈40)", mh, mn)
	}
}

func TestDemoRunPaces(t *testing.T) {
	g, err := NewDemoGen(Demo{Rate: 5000, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	var got int64
	sent, err := g.Run(ctx, func(b []window.Event) error { got += int64(len(b)); return nil })
	elapsed := time.Since(start)
	if err != nil || sent != got {
		t.Fatalf("Run = %d, %v; emit saw %d", sent, err, got)
	}
	// Real time: the pace is checked against the elapsed time, with room for a late tick.
	if hi, lo := 5000*elapsed.Seconds()+1, 5000*(elapsed-150*time.Millisecond).Seconds(); float64(sent) > hi || float64(sent) < lo {
		t.Errorf("sent %d events in %v at 5000/s, want within [%.0f, %.0f]", sent, elapsed, lo, hi)
	}
	stop := fmt.Errorf("emit failed")
	if _, err := g.Run(context.Background(), func([]window.Event) error { return stop }); err != stop {
		t.Errorf("Run returned %v, want emit's error", err)
	}
}

// TestDemoRunLateTicks gives the generator ticks taken 30 ms after their time, as a busy
// machine hands them over: each must still send what is due. The tick's budget was counted
// from the tick's own time, already spent when it was taken, so a loaded `make run` (and
// TestDemoRunPaces under -race with other work running) sent nothing at all.
func TestDemoRunLateTicks(t *testing.T) {
	g, err := NewDemoGen(Demo{Rate: 1000, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	var sent int64
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sent, runErr = g.run(ctx, ticks, func(b []window.Event) error { return nil })
	}()
	start := time.Now()
	for range 5 {
		time.Sleep(demoTick)
		ticks <- time.Now().Add(-30 * time.Millisecond) // taken 30 ms late
	}
	cancel()
	<-done
	// Five ticks over at least 50 ms, the last stamped 30 ms back: at least 20 ms at
	// 1,000 a second was due.
	if elapsed := time.Since(start); runErr != nil || sent < 20 || float64(sent) > 1000*elapsed.Seconds()+1 {
		t.Fatalf("late ticks: sent %d (err %v) over %v at 1000/s, want at least 20 and at most the rate", sent, runErr, elapsed)
	}
}

func TestProducerAndBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addrs := b.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("Addrs = %v", addrs)
	}
	if _, port, _ := net.SplitHostPort(addrs[0]); port == "0" {
		t.Fatalf("Addrs reports port 0: %v", addrs)
	}
	// The address is taken: a second broker on it fails with an error, not a panic.
	if _, err := StartBroker(ctx, BrokerConfig{Addr: addrs[0]}); err == nil {
		t.Error("a second broker started on a taken address")
	}

	p, err := NewProducer(ProducerConfig{Brokers: addrs})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewDemoGen(Demo{Keys: 12})
	evs := make([]window.Event, 3000)
	for i := range evs {
		evs[i] = g.Next(int64(i))
	}
	for i := 0; i < len(evs); i += 500 {
		if err := p.SendEvents(ctx, evs[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Sent != int64(len(evs)) || st.Failed != 0 || st.LastErr != nil || st.Bytes == 0 {
		t.Fatalf("stats %+v, want %d sent", st, len(evs))
	}
	// Every record of a key is in the partition the key hashes to, and decodes to its event.
	d, err := event.NewDecoder(event.Config{MaxKeyLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	var total int
	for part := range 3 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: "events", Partition: part, MaxWait: 200 * time.Millisecond})
		end, err := r.ReadLag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range end {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ev, rs := d.Decode(m.Value, 0)
			if rs != event.ReasonNone || ev.Key != string(m.Key) || murmurPartition(ev.Key, 3) != part {
				t.Fatalf("partition %d record %s key %s: %v", part, m.Value, m.Key, rs)
			}
			total++
		}
		r.Close()
	}
	if total != len(evs) {
		t.Errorf("read back %d records, want %d", total, len(evs))
	}
}

// Records of a few KB (an OTLP request of 50 spans, a long access-log line) fill a batch of
// BatchSize records past the broker's largest message (Kafka's message.max.bytes, 1 MB by
// default, as the embedded broker's): the producer closes its batches before that size, so
// the broker takes every record. (It failed a batch of such records before: slide produce
// --otlp flat out lost 670 of 345,555 records as Message Size Too Large.)
func TestProducerBatchesFitTheBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A long timeout, so batches close by size alone: 1,000 records of 5 KB, 5 MB a batch
	// if nothing closed it sooner.
	p, err := NewProducer(ProducerConfig{Brokers: b.Addrs(), BatchTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 5000)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	const n = 1000
	for range n {
		if err := p.Send(ctx, []byte("k"), value); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Sent != n || st.Failed != 0 || st.LastErr != nil {
		t.Fatalf("stats %+v, want %d sent and none failed", st, n)
	}
}

func TestBrokerConfig(t *testing.T) {
	for name, c := range map[string]BrokerConfig{
		"no port":        {Addr: "127.0.0.1"},
		"bad advertised": {Advertise: "somewhere"},
		"advertised :0":  {Advertise: "example.com:0"},
		"partitions":     {Partitions: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if err := (BrokerConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Advertise: "localhost:19092"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Addrs(); len(got) != 1 || got[0] != "localhost:19092" {
		t.Errorf("Addrs = %v, want the advertised address", got)
	}
}

// At a rate the emitter cannot follow, Run hands over small batches and skips what it could
// not send instead of building up a second's worth of events: memory stays flat however high
// the rate asked for.
func TestDemoRunHighRateStaysSmall(t *testing.T) {
	g, err := NewDemoGen(Demo{Rate: 1e9, Keys: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var largest int
	var got int64
	sent, err := g.Run(ctx, func(b []window.Event) error {
		largest = max(largest, len(b))
		got += int64(len(b))
		time.Sleep(5 * time.Millisecond) // a producer at its in-flight cap
		return nil
	})
	if err != nil || sent != got {
		t.Fatalf("Run = %d, %v; emit saw %d", sent, err, got)
	}
	if largest > genChunk {
		t.Errorf("emit got a batch of %d events, want at most %d", largest, genChunk)
	}
	if got == 0 || got > 100*genChunk {
		t.Errorf("emit took %d events in 200 ms at 5 ms a batch", got)
	}
}
