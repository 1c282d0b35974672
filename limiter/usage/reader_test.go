package usage_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// peerReader answers usage reads as a cluster would: the local store plus a peer's store
// whose part is staleMs old; missing partitions when set.
type peerReader struct {
	local, peer *window.Store
	staleMs     int64
	missing     []int32
	unavail     map[string]int
}

func (r *peerReader) Local() bool { return false }

func (r *peerReader) Read(_ context.Context, now int64, metric, series string, win time.Duration, qs []float64) (window.Agg, int64, []int32, error) {
	var p window.Partial
	for _, s := range []*window.Store{r.local, r.peer} {
		var q window.Partial
		if err := s.MergePartial(now, metric, func(k string, _ int32) bool { return window.MatchKey(series, k) }, win, &q); err != nil {
			return window.Agg{}, 0, nil, err
		}
		p.Merge(&q)
	}
	if p.Series == 0 && len(r.missing) == 0 {
		return window.Agg{}, r.staleMs, nil, window.ErrNotFound
	}
	return p.Agg(r.local.Indexer(metric), qs), r.staleMs, r.missing, nil
}

func (r *peerReader) Unavailable(caller string) { r.unavail[caller]++ }

// A usage rule on an instance that holds none of a tenant's usage still denies it: it
// reads the peer's part, says how stale it is, and finds the same RetryAfter as the owner.
func TestRuleReadsThroughTheCluster(t *testing.T) {
	local, peer := newStore(t), newStore(t)
	for i := range 12 {
		observe(t, peer, t0.Add(time.Duration(i)*time.Minute), "cost", "tenant-1", 100, 1)
	}
	now := t0.Add(12 * time.Minute)
	r := usage.Rule{Name: "quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000}
	owner := mustChecker(t, peer, r)
	want := check(t, owner, "tenant-1", now)

	c := mustChecker(t, local, r)
	if d := check(t, c, "tenant-1", now); !d.Allowed {
		t.Fatalf("without a reader the non-owner denies: %+v, but it holds none of the usage", d)
	}
	rd := &peerReader{local: local, peer: peer, staleMs: 420, unavail: map[string]int{}}
	usage.SetReader([]limiter.Checker{c}, rd)
	got := check(t, c, "tenant-1", now)
	if got.Allowed || got.RetryAfter != want.RetryAfter || got.ResetAfter != want.ResetAfter || !got.Remote || got.Stale != 420*time.Millisecond {
		t.Errorf("through the cluster %+v, owner %+v, want the owner's denial with Remote and Stale 420ms", got, want)
	}
	if js := limithttp.NewDecisionJSON(got); js.StaleMs == nil || *js.StaleMs != 420 {
		t.Errorf("JSON stale_ms %v, want 420", js.StaleMs)
	}
	if d := check(t, c, "tenant-2", now); !d.Allowed || !d.Remote {
		t.Errorf("unknown tenant: %+v, want allowed", d)
	}
}

// When partitions are missing the rule follows on_unavailable: open allows (degraded),
// closed fails with ErrBackendUnavailable; both are counted.
func TestRuleOnUnavailable(t *testing.T) {
	local, peer := newStore(t), newStore(t)
	observe(t, local, t0, "cost", "tenant-1", 10, 1)
	for _, mode := range []string{"", usage.UnavailableOpen, usage.UnavailableClosed} {
		r := usage.Rule{Name: "quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000, OnUnavailable: mode}
		c := mustChecker(t, local, r)
		rd := &peerReader{local: local, peer: peer, missing: []int32{4}, unavail: map[string]int{}}
		usage.SetReader([]limiter.Checker{c}, rd)
		d, err := c.Check(context.Background(), "tenant-1", t0, 1)
		if mode == usage.UnavailableClosed {
			if !errors.Is(err, limiter.ErrBackendUnavailable) || rd.unavail["usage_closed"] != 1 {
				t.Errorf("closed: %+v, %v; want ErrBackendUnavailable, counted", d, err)
			}
			continue
		}
		if err != nil || !d.Allowed || !d.Degraded || rd.unavail["usage_open"] != 1 {
			t.Errorf("%q: %+v, %v; want allowed and degraded, counted", mode, d, err)
		}
	}
}

func TestOnUnavailableParses(t *testing.T) {
	_, err := usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 5, on_unavailable: closed}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 5, on_unavailable: maybe}\n"), "p.yaml")
	if err == nil || !strings.Contains(err.Error(), "on_unavailable") {
		t.Errorf("on_unavailable: maybe: %v, want an error naming the field", err)
	}
}

// A partial window already over the quota denies (flagged) even under on_unavailable: open
// or closed: the missing part can only add to a non-negative sum.
func TestPartialWindowAlreadyOverDenies(t *testing.T) {
	local, peer := newStore(t), newStore(t)
	observe(t, peer, t0, "cost", "tenant-1", 1200, 1)
	for _, mode := range []string{usage.UnavailableOpen, usage.UnavailableClosed} {
		r := usage.Rule{Name: "quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000, OnUnavailable: mode}
		c := mustChecker(t, local, r)
		rd := &peerReader{local: local, peer: peer, missing: []int32{4}, unavail: map[string]int{}}
		usage.SetReader([]limiter.Checker{c}, rd)
		d, err := c.Check(context.Background(), "tenant-1", t0, 1)
		if err != nil || d.Allowed || !d.Degraded || d.RetryAfter <= 0 || rd.unavail["usage_denied_anyway"] != 1 {
			t.Errorf("%s: %+v, %v; want a degraded denial with a RetryAfter", mode, d, err)
		}
	}
	// An average can move either way: the rule's mode decides.
	r := usage.Rule{Name: "avg", Metric: "cost", Agg: usage.Agg{Kind: usage.KindAvg}, Window: time.Hour, Max: 1000}
	c := mustChecker(t, local, r)
	usage.SetReader([]limiter.Checker{c}, &peerReader{local: local, peer: peer, missing: []int32{4}, unavail: map[string]int{}})
	if d, err := c.Check(context.Background(), "tenant-1", t0, 1); err != nil || !d.Allowed || !d.Degraded {
		t.Errorf("avg over a partial window: %+v, %v; want allowed (open), degraded", d, err)
	}
}

// selectReader is peerReader that also reads by label matchers (usage.SelectReader).
type selectReader struct{ peerReader }

func (r *selectReader) ReadSelected(_ context.Context, now int64, metric, key string, ms []window.Matcher, win time.Duration, qs []float64) (window.Agg, int64, []int32, error) {
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return window.Agg{}, 0, nil, err
	}
	var p window.Partial
	for _, s := range []*window.Store{r.local, r.peer} {
		var q window.Partial
		if err := s.MergePartial(now, metric, func(k string, _ int32) bool { return sel.Match(k) }, win, &q); err != nil {
			return window.Agg{}, 0, nil, err
		}
		p.Merge(&q)
	}
	if p.Series == 0 {
		return window.Agg{}, r.staleMs, nil, window.ErrNotFound
	}
	return p.Agg(r.local.Indexer(metric), qs), r.staleMs, r.missing, nil
}

// A rule with match: reads through a cluster Reader only when it can select by labels
// (usage.SelectReader): then the peer's /pay series deny as the owner's would, and a
// Reader that cannot select fails the decision rather than read other series.
func TestMatchReadsThroughTheCluster(t *testing.T) {
	local, peer := newStore(t), newStore(t)
	pay, err := window.AppendSeries(nil, "tenant-1", []window.Label{{Name: "route", Value: "/pay"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		observe(t, peer, t0.Add(time.Duration(i)*time.Minute), "cost", string(pay), 100, 1)
	}
	observe(t, peer, t0, "cost", "tenant-1", 5000, 1) // not /pay: never counted
	now := t0.Add(12 * time.Minute)
	r := usage.Rule{Name: "quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 1000, Match: `route="/pay"`}
	want := check(t, mustChecker(t, peer, r), "tenant-1", now)
	if want.Allowed {
		t.Fatalf("the owner allows %+v", want)
	}
	c := mustChecker(t, local, r)
	usage.SetReader([]limiter.Checker{c}, &selectReader{peerReader{local: local, peer: peer, unavail: map[string]int{}}})
	if got := check(t, c, "tenant-1", now); got.Allowed || got.RetryAfter != want.RetryAfter || !got.Remote {
		t.Errorf("through the cluster %+v, owner %+v", got, want)
	}
	usage.SetReader([]limiter.Checker{c}, &peerReader{local: local, peer: peer, unavail: map[string]int{}})
	if _, err := c.Check(context.Background(), "tenant-1", now, 1); err == nil || !strings.Contains(err.Error(), "cannot select series by labels") {
		t.Errorf("through a Reader that cannot select: %v", err)
	}
}
