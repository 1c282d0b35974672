package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// deadlineBackend is a DeadlineDecider that allows everything, keeps the deadline it was
// handed, and says its answer arrived answerAfter past that deadline's start.
type deadlineBackend struct {
	timeout     time.Duration
	answerAfter time.Duration
	deadline    time.Time
}

func (d *deadlineBackend) Decide(ctx context.Context, reqs []BackendRequest, out []Decision) error {
	_, err := d.DecideBy(ctx, time.Now().Add(d.timeout), reqs, out)
	return err
}

func (d *deadlineBackend) DecideBy(_ context.Context, deadline time.Time, reqs []BackendRequest, out []Decision) (time.Time, error) {
	d.deadline = deadline
	for i := range reqs {
		out[i] = Decision{Allowed: true, Limit: 1, Remaining: 1}
	}
	if d.answerAfter == 0 {
		return time.Time{}, nil
	}
	return deadline.Add(d.answerAfter - d.timeout), nil
}

// TestDeadlineStartsAtThePresent: a DeadlineDecider's deadline is the policy's timeout
// after the present, whether the decision's now is the default clock's reading (which
// then starts it, without a clock read) or a fixed instant (the Service then reads the
// clock); with a custom clock, always the read clock. The latency observed ends at the
// backend's answered time when it gives one.
func TestDeadlineStartsAtThePresent(t *testing.T) {
	const timeout = 40 * time.Millisecond
	p := Policy{Name: "c", Algorithm: FixedWindow, Limit: 10, Window: time.Minute, Backend: BackendCluster, Timeout: timeout}
	fixed := time.Unix(1_764_489_600, 0)
	for _, c := range []struct {
		name  string
		clock func() time.Time
		now   func(s *Service) time.Time
	}{
		{"default clock, its reading", nil, (*Service).Now},
		{"default clock, a fixed instant", nil, func(*Service) time.Time { return fixed }},
		{"custom clock", func() time.Time { return fixed }, (*Service).Now},
	} {
		fb := &deadlineBackend{timeout: timeout}
		s, err := NewService(Config{Cluster: fb, Clock: c.clock, Policies: []Policy{p}}) // nil: the default clock
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		if _, err := s.AllowN(context.Background(), "c", "k", c.now(s), 1); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		after := time.Now()
		if lo, hi := before.Add(timeout), after.Add(timeout); fb.deadline.Before(lo) || fb.deadline.After(hi) {
			t.Errorf("%s: deadline %v; want between %v and %v (the timeout after the present)", c.name, fb.deadline, lo, hi)
		}
	}

	reg := prometheus.NewRegistry()
	fb := &deadlineBackend{timeout: timeout, answerAfter: 3 * time.Second}
	s, err := NewService(Config{Cluster: fb, Registerer: reg, Policies: []Policy{p}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allow(context.Background(), "c", "k"); err != nil {
		t.Fatal(err)
	}
	sum := histogramSum(t, reg, MetricBackendSeconds)
	if sum < 3 || sum > 3.001 {
		t.Errorf("latency observed %.6f s; want 3 s (the backend's answered time)", sum)
	}
}

func histogramSum(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no %s gathered", name)
	return 0
}
