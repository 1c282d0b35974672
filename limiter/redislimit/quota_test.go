package redislimit_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/redistest"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/redislimit"
)

// Plans, levels and GET /v1/quota over memory and a real redis-server alike: each level's
// own plan sets its limit (org-1 and its teams and users are on pro), /v1/allow names the plan and the level that denied, and
// /v1/quota reports each level's numbers without charging anything.
func TestPlansLevelsQuota(t *testing.T) {
	srv := redistest.Start(t)
	b := newBackend(t, srv.Addr, redislimit.Config{ClientClock: true})
	for _, backend := range []limiter.BackendKind{limiter.BackendMemory, limiter.BackendRedis} {
		t.Run(backend.String(), func(t *testing.T) {
			ny, err := time.LoadLocation("America/New_York")
			if err != nil {
				t.Fatalf("time zone missing (install tzdata): %v", err)
			}
			p := limiter.Policy{Name: "org-budget-" + backend.String(), Algorithm: limiter.FixedWindow, Calendar: limiter.CalendarDay, Location: ny,
				Backend: backend, Levels: limiter.Levels{Separator: "/", N: 3, Limits: [limiter.MaxLevels]int64{5, 3, 2}}}
			now := time.Date(2026, 3, 8, 5, 30, 0, 0, time.UTC)
			s := newService(t, b, limiter.Config{Policies: []limiter.Policy{p}, Clock: func() time.Time { return now }})
			ps, err := limiter.ParsePlans([]byte("plans:\n  pro: {"+p.Name+": {levels: [50, 30, 3]}}\nkeys:\n  org-1: pro\n  \"org-1/*\": pro\n"), "plans.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPlans(ps); err != nil {
				t.Fatal(err)
			}
			h := limithttp.AllowHandler(s)
			allow := func(key string) limithttp.AllowResponse {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/allow", strings.NewReader(`{"policy":"`+p.Name+`","key":"`+key+`"}`)))
				var a limithttp.AllowResponse
				if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
					t.Fatalf("%s: %v %s", key, err, rec.Body)
				}
				return a
			}
			for i := 0; i < 3; i++ {
				if a := allow("org-1/team-a/user-7"); !a.Allowed || a.Plan != "pro" {
					t.Fatalf("request %d: %+v, want allowed on plan pro (its user level is 3)", i, a)
				}
			}
			if a := allow("org-1/team-a/user-7"); a.Allowed || a.Level != "org-1/team-a/user-7" || a.Plan != "pro" {
				t.Errorf("4th request: %+v, want denied at the user level on plan pro", a)
			}
			if a := allow("org-2/team-a/user-1"); !a.Allowed || a.Plan != "" || a.Limit != 2 {
				t.Errorf("org-2 has no plan: %+v, want the policy's own limits (user 2)", a)
			}
			qh := limithttp.QuotaHandler(s)
			quota := func() limithttp.QuotaJSON {
				rec := httptest.NewRecorder()
				qh.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/quota?policy="+p.Name+"&key=org-1/team-a/user-7", nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("/v1/quota: %d %s", rec.Code, rec.Body)
				}
				var q limithttp.QuotaJSON
				if err := json.Unmarshal(rec.Body.Bytes(), &q); err != nil {
					t.Fatal(err)
				}
				return q
			}
			q := quota()
			// 00:30 EST on the 23-hour day: the quota is whole again at 00:00 EDT, 04:00 UTC.
			const reset = "2026-03-09T04:00:00Z"
			want := limithttp.QuotaJSON{Policy: p.Name, Key: "org-1/team-a/user-7", Plan: "pro", Limit: 3, Used: 3, Remaining: 0, Reset: reset,
				Levels: []limithttp.LevelQuotaJSON{
					{Level: "org-1", Limit: 50, Used: 3, Remaining: 47, Reset: reset},
					{Level: "org-1/team-a", Limit: 30, Used: 3, Remaining: 27, Reset: reset},
					{Level: "org-1/team-a/user-7", Limit: 3, Used: 3, Remaining: 0, Reset: reset},
				}}
			if !equalJSON(q, want) {
				t.Errorf("/v1/quota:\n got %+v\nwant %+v", q, want)
			}
			if again := quota(); !equalJSON(again, q) {
				t.Errorf("a second /v1/quota differs (a peek charged something):\n%+v\n%+v", again, q)
			}
			if _, err := s.Quota(context.Background(), "nope", "k", now); err == nil {
				t.Error("Quota of an unknown policy: no error")
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
