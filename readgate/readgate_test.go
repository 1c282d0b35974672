package readgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/readgate"
)

// TestGate: a read past the cap waits in line and starts when a slot frees; a wait that
// reaches its deadline is refused with ErrBusy naming the setting and counted; a client
// that leaves is not a refusal. The metrics exist at 0 before any read.
func TestGate(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := readgate.New(readgate.Config{Max: 1, Setting: "--read-max-concurrency", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 4 {
		t.Fatalf("%d metrics before any read (%v), want 4 at 0", n, err)
	}
	metric := func(name string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	done, err := g.Start(context.Background())
	if err != nil || metric("slide_http_reads_running") != 1 {
		t.Fatalf("first read: %v, running %v", err, metric("slide_http_reads_running"))
	}
	past, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := g.Start(past); !errors.Is(err, readgate.ErrBusy) || !strings.Contains(err.Error(), "--read-max-concurrency") {
		t.Errorf("a wait past its deadline: %v, want ErrBusy naming the flag", err)
	}
	gone, leave := context.WithCancel(context.Background())
	leave()
	if _, err := g.Start(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("a client gone while waiting: %v, want context.Canceled", err)
	}
	if r := metric("slide_http_reads_refused_total"); r != 1 {
		t.Errorf("refused %v, want 1 (the deadline, not the client that left)", r)
	}
	started := make(chan func())
	go func() {
		d, err := g.Start(context.Background())
		if err != nil {
			t.Error(err)
		}
		started <- d
	}()
	for deadline := time.Now().Add(20 * time.Second); metric("slide_http_reads_queued") != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second read never queued")
		}
	}
	select {
	case <-started:
		t.Fatal("a second read started while the only slot was held")
	default:
	}
	done()
	(<-started)()
	if r, q := metric("slide_http_reads_running"), metric("slide_http_reads_queued"); r != 0 || q != 0 {
		t.Errorf("after both ended: running %v, queued %v", r, q)
	}
	if _, err := readgate.New(readgate.Config{}); err == nil {
		t.Error("a gate of 0 slots was built")
	}
}
