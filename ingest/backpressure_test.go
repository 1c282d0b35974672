package ingest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/window"
)

// A producer faster than its broker waits: with the broker holding every produce request,
// MaxInFlight records go out and the next Send blocks until its context ends; once the
// broker answers, sending resumes and every record is acknowledged.
func TestProducerBackpressure(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	k := c.Kfake()
	k.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		k.SleepControl(func() { <-release })
		return nil, nil, false // then the broker handles it as usual
	})
	p, err := NewProducer(ProducerConfig{Brokers: []string{c.Addr}, MaxInFlight: 100, BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]window.Event, 50)
	for i := range evs {
		evs[i] = window.Event{TS: 1, Metric: "m", Key: "k", Value: 1}
	}
	ctx := context.Background()
	for range 2 { // 100 records: the cap
		if err := p.SendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := p.SendEvents(short, evs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a send past MaxInFlight with the broker stalled returned %v, want it to block until the deadline", err)
	}
	free()
	for range 4 {
		if err := p.SendEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Sent != 300 || st.Failed != 0 {
		t.Errorf("stats %+v, want 300 sent", st)
	}
}
