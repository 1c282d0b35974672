package backtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

const quotaFile = `rules:
  - {name: tenant-quota, metric: cost, agg: sum, window: 1h, max: 1000}
`

// Usage rules replay from the metric events of the log, and agree with a live server whose
// store got the same events at the same times.
func TestUsageRulesReplay(t *testing.T) {
	_, rules, err := usage.ParseFile([]byte(quotaFile), "quota.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stores := window.StoreConfig{Ring: window.RingConfig{Slot: 10 * time.Second, Slots: 30},
		Metrics: map[string]window.RingConfig{"cost": {Slot: time.Minute, Slots: 60}}}
	log := `{"ts":"2025-11-30T10:00:00Z","key":"tenant-42","metric":"cost","value":600}
{"ts":"2025-11-30T10:10:00Z","key":"tenant-42","metric":"cost","value":500}
{"ts":"2025-11-30T10:10:00Z","key":"tenant-7","metric":"cost","value":30}
{"ts":"2025-11-30T10:20:00Z","key":"tenant-42"}
{"ts":"2025-11-30T10:20:00Z","key":"tenant-7"}
{"ts":"2025-11-30T10:59:30Z","key":"tenant-42"}
{"ts":"2025-11-30T11:05:00Z","key":"tenant-42"}
`
	type dec struct {
		allowed bool
		retry   int64
	}
	var got []dec
	r, err := New(Config{Rules: rules, Store: stores, OnDecision: func(_ Request, _ string, d limiter.Decision, err error) {
		if err != nil {
			t.Error(err)
		}
		got = append(got, dec{d.Allowed, int64((d.RetryAfter + time.Millisecond - 1) / time.Millisecond)})
	}})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []Request
	if err := ReadLog(strings.NewReader(log), func(req Request) error {
		reqs = append(reqs, req)
		return r.Replay(context.Background(), req)
	}); err != nil {
		t.Fatal(err)
	}
	// 10:20: tenant-42 has 1100 in the last hour (denied), tenant-7 30; 10:59:30 still 1100;
	// 11:05: the 10:00 slot has left, 500 remain.
	if len(got) != 4 || got[0].allowed || !got[1].allowed || got[2].allowed || !got[3].allowed {
		t.Fatalf("decisions %+v", got)
	}
	rep := r.Reports()[0]
	if rep.Policy != "tenant-quota" || rep.Allowed != 2 || rep.Denied != 2 || r.Events != 3 ||
		len(rep.TopDenied) != 1 || rep.TopDenied[0] != (KeyCount{Key: "tenant-42", Denied: 2}) {
		t.Fatalf("report %+v, %d events", rep, r.Events)
	}

	// The live server: the same events into its store, the same requests through POST
	// /v1/allow, its clock at each line's time.
	var mu sync.Mutex
	var now time.Time
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	live := stores
	live.Now = func() int64 { return clock().UnixMilli() }
	st, err := window.NewStore(live)
	if err != nil {
		t.Fatal(err)
	}
	checkers, err := usage.NewCheckers(st, rules)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := limiter.NewService(limiter.Config{Checkers: checkers, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(limithttp.AllowHandler(svc))
	defer srv.Close()
	i := 0
	for _, req := range reqs {
		mu.Lock()
		now = req.Time
		mu.Unlock()
		if req.Metric != "" {
			if err := st.Observe(window.Event{TS: req.Time.UnixMilli(), Metric: req.Metric, Key: req.Key, Value: req.Value, Count: 1}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		resp, err := srv.Client().Post(srv.URL+"/v1/allow", "application/json",
			strings.NewReader(fmt.Sprintf(`{"policy":"tenant-quota","key":%q}`, req.Key)))
		if err != nil {
			t.Fatal(err)
		}
		var body decisionJSON
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if (dec{body.Allowed, body.RetryAfterMS}) != got[i] {
			t.Fatalf("line %d: live %+v, replay %+v", req.Line, body, got[i])
		}
		i++
	}
}
