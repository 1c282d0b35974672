package limiter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// scriptedCluster is a cluster backend (DeadlineDecider and OneDecider) answering every
// request with d, or failing with err.
type scriptedCluster struct {
	d   Decision
	err error
}

func (f *scriptedCluster) Decide(ctx context.Context, reqs []BackendRequest, out []Decision) error {
	_, err := f.DecideBy(ctx, time.Now().Add(time.Second), reqs, out)
	return err
}

func (f *scriptedCluster) DecideBy(_ context.Context, _ time.Time, reqs []BackendRequest, out []Decision) (time.Time, error) {
	if f.err != nil {
		return time.Time{}, f.err
	}
	for i := range reqs {
		out[i] = f.d
	}
	return time.Now(), nil
}

func (f *scriptedCluster) DecideOne(ctx context.Context, deadline time.Time, req BackendRequest) (Decision, time.Time, bool, error) {
	var out [1]Decision
	at, err := f.DecideBy(ctx, deadline, []BackendRequest{req}, out[:])
	return out[0], at, false, err
}

// TestLoneClusterCheckDecidesAsDecide: Decide of one check of a cluster policy (allowCluster,
// the short path, which AllowN takes too) answers what the general path (decide) answers
// for it, decision, error and out, for every failure mode, shadowed or not, whatever the
// backend does, and for bad input.
func TestLoneClusterCheckDecidesAsDecide(t *testing.T) {
	allowed := Decision{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: time.Second, Window: time.Minute, Policy: "c"}
	denied := Decision{Limit: 10, RetryAfter: time.Second, ResetAfter: time.Minute, Window: time.Minute, Policy: "c"}
	outcomes := []struct {
		name   string
		d      Decision
		err    error
		cancel bool
	}{
		{"allowed", allowed, nil, false},
		{"denied", denied, nil, false},
		{"timed out", Decision{}, fmt.Errorf("owner: %w", context.DeadlineExceeded), false},
		{"failed", Decision{}, errors.New("owner: refused"), false},
		{"caller gone", Decision{}, context.Canceled, true},
	}
	inputs := []struct {
		name string
		key  string
		cost int64
	}{{"ok", "tenant-1", 1}, {"bad key", "", 1}, {"negative cost", "tenant-1", -1}, {"cost over the limit", "tenant-1", 11}}
	at := time.Unix(1_764_489_630, 0) // one instant for both: FailLocal's memory decides by it
	for _, mode := range []FailureMode{FailOpen, FailClosed, FailLocal} {
		for _, shadow := range []bool{false, true} {
			p := Policy{Name: "c", Algorithm: FixedWindow, Limit: 10, Window: time.Minute, Backend: BackendCluster,
				OnBackendError: mode, Shadow: shadow, Timeout: time.Second}
			for _, o := range outcomes {
				for _, in := range inputs {
					name := fmt.Sprintf("%s shadow=%v %s %s", mode, shadow, o.name, in.name)
					var got [2]Decision
					var errs [2]error
					var outs [2][1]Decision
					for i := range 2 { // a Service each: FailLocal's memory counts
						s, err := NewService(Config{Cluster: &scriptedCluster{d: o.d, err: o.err}, Policies: []Policy{p}})
						if err != nil {
							t.Fatal(err)
						}
						if s.one == nil {
							t.Fatal("a DeadlineDecider and OneDecider backend: no short path")
						}
						ctx, cancel := context.WithCancel(context.Background())
						if o.cancel {
							cancel()
						}
						checks := []Charge{{Policy: "c", Key: in.key, Cost: in.cost}}
						if i == 0 {
							got[i], errs[i] = s.Decide(ctx, at, checks, outs[i][:])
						} else {
							got[i], errs[i] = s.decide(ctx, at, checks, outs[i][:])
						}
						cancel()
					}
					if !reflect.DeepEqual(got[0], got[1]) || fmt.Sprint(errs[0]) != fmt.Sprint(errs[1]) || outs[0] != outs[1] {
						t.Errorf("%s: the short path %+v, %v (out %+v); the general one %+v, %v (out %+v)", name, got[0], errs[0], outs[0], got[1], errs[1], outs[1])
					}
					if in.name == "ok" && !o.cancel {
						s, err := NewService(Config{Cluster: &scriptedCluster{d: o.d, err: o.err}, Policies: []Policy{p}})
						if err != nil {
							t.Fatal(err)
						}
						if d, err := s.AllowN(context.Background(), "c", in.key, at, in.cost); !reflect.DeepEqual(d, got[0]) || fmt.Sprint(err) != fmt.Sprint(errs[0]) {
							t.Errorf("%s: AllowN %+v, %v; Decide %+v, %v", name, d, err, got[0], errs[0])
						}
					}
				}
			}
		}
	}
}
