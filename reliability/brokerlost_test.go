package reliability_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// TestBrokerRestartedEmpty is the sixth probe: `slide broker` SIGKILLed and
// restarted with an empty log while slide serves. slide held offsets of the old log, beyond
// the new log's end; it logged "offset out of range, skipping … to=<log end>" and never
// counted the events produced meanwhile. Now each partition resets to the restore span of
// the new log, counts the reset in slide_ingest_offset_resets_total{reason="log_truncated"},
// and every event of both logs is in the windows.
func TestBrokerRestartedEmpty(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	startBroker := func(name string) *proctest.Proc {
		p := proctest.Start(t, name, slideBin, "broker", "--addr", addr, "--partitions", "4")
		if _, err := p.WaitOutput("broker listening on ", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := startBroker("broker-1")
	s := startSlide(t, "serve", addr, "lost-log", "--session-timeout", "3s")
	o := newOracle()
	tr := newTraffic(t, addr, o, 20, 7)
	tr.run(t, context.Background(), 2*time.Second, 10) // 1,000 events/s
	tr.close(t)
	n1 := o.count()
	eventually(t, 20*time.Second, "serve to count the first log", func() bool {
		return s.metric(t, "slide_ingest_events_total") == float64(n1) && s.caughtUp(t)
	})

	// serve is frozen while the broker dies, comes back empty and takes new events, so it
	// meets the new log only when all of them are in it (as when reconnecting takes long).
	if err := syscall.Kill(s.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	first.Kill()
	_ = first.Wait(5 * time.Second)
	startBroker("broker-2") // same address, empty log
	o2 := newOracle()
	tr2 := newTraffic(t, addr, o2, 20, 8)
	tr2.run(t, context.Background(), time.Second, 10) // fewer than before: every old offset is past the new end
	tr2.close(t)
	if err := syscall.Kill(s.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	total := n1 + o2.count()
	eventually(t, 20*time.Second, "serve to count the events written to the new log", func() bool {
		return s.metric(t, "slide_ingest_events_total") >= float64(total)
	})
	if got := s.metric(t, "slide_ingest_events_total"); got != float64(total) {
		t.Errorf("events counted %v, want %d (%d before the restart, %d after)", got, total, n1, total-n1)
	}
	if r := s.metric(t, "slide_ingest_offset_resets_total", `reason="log_truncated"`); r < 1 {
		t.Errorf("slide_ingest_offset_resets_total{reason=log_truncated} = %v, want at least 1", r)
	}
	var a windowAnswer
	if err := proctest.GetJSON(s.base+"/v1/window?metric="+metric+"&key=k-*&window=5m", &a); err != nil || a.Count != total {
		t.Errorf("windows hold %d events (%v), want all %d of both logs", a.Count, err, total)
	}
	t.Logf("%d events before the broker lost its log, %d after; all counted", n1, total-n1)
}
