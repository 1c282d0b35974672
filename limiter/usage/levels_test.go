package usage_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/limithttp"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// orgRule is a 1 h sum quota of cost with three levels: org 1000, team 500, user 200.
func orgRule() usage.Rule {
	return usage.Rule{Name: "org-quota", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour,
		Levels: usage.RuleLevels{Separator: "/", Max: [limiter.MaxLevels]float64{1000, 500, 200}, N: 3}}
}

// TestRuleLevelsDenyAtTheFirstLevelOver: steps at fixed instants, each adding cost events
// (ObserveAt) and then deciding keys. A level's aggregate is its prefix's series and every
// series under it, so another user's or another team's usage counts at the levels they
// share, and never at the levels they do not.
func TestRuleLevelsDenyAtTheFirstLevelOver(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, orgRule())
	type want struct {
		key     string
		allowed bool
		level   string
		limit   int64
		left    int64 // Remaining
	}
	for i, s := range []struct {
		at     time.Duration // from t0
		events map[string]float64
		want   []want
	}{
		{at: time.Minute, // nothing recorded: every level allowed, the user's level nearest its max
			want: []want{{"org-1/team-a/user-7", true, "", 200, 200}}},
		{at: 2 * time.Minute, events: map[string]float64{"org-1/team-a/user-7": 150, "org-1/team-a/user-8": 100},
			// user-7: org 250 of 1000, team 250 of 500, user 150 of 200: 50 left at the user.
			want: []want{{"org-1/team-a/user-7", true, "", 200, 50}, {"org-1/team-a/user-8", true, "", 200, 100}}},
		{at: 3 * time.Minute, events: map[string]float64{"org-1/team-a/user-7": 60},
			// user-7 at 210 > 200: denied at its own level, named by the full key; user-8 of the
			// same team is not (team 310 of 500).
			want: []want{{"org-1/team-a/user-7", false, "org-1/team-a/user-7", 200, 0}, {"org-1/team-a/user-8", true, "", 200, 100}}},
		{at: 4 * time.Minute, events: map[string]float64{"org-1/team-a/user-9": 190, "org-1/team-a": 10},
			// The team: 210 + 100 + 190 + its own key's 10 = 510 > 500. user-8 (100 of 200) is
			// denied at the team; a new user of the team too; team-b is not.
			want: []want{{"org-1/team-a/user-8", false, "org-1/team-a", 500, 0}, {"org-1/team-a/user-1", false, "org-1/team-a", 500, 0},
				{"org-1/team-b/user-1", true, "", 200, 200}}},
		{at: 5 * time.Minute, events: map[string]float64{"org-1/team-b/user-1": 190, "org-1/team-c/user-1": 190, "org-1": 120},
			// The org: 510 + 190 + 190 + 120 = 1010 > 1000: every key of org-1 is denied at
			// "org-1", first from the top, though team-b's user has 10 left; org-10, whose
			// keys start with "org-1" too, is another org and allowed.
			want: []want{{"org-1/team-b/user-1", false, "org-1", 1000, 0}, {"org-1/team-a/user-7", false, "org-1", 1000, 0},
				{"org-10/team-a/user-7", true, "", 200, 200}}},
		{at: 6 * time.Minute, events: map[string]float64{"org-2/team-x/user-1": 300},
			// A key of two parts is checked at the levels it has, its last as the team: the
			// team's total (its user's 300) against 500. A key of one part: the org's 300 of
			// 1000. The user itself is over 200.
			want: []want{{"org-2/team-x", true, "", 500, 200}, {"org-2", true, "", 1000, 700},
				{"org-2/team-x/user-1", false, "org-2/team-x/user-1", 200, 0}}},
		{at: 7 * time.Minute, events: map[string]float64{"org-2/team-x/user-2": 250},
			// Now the team is over: the two-part key is denied at its own level. Another
			// team is allowed, its answer the org's (550 of 1000), nearer its max than its own.
			want: []want{{"org-2/team-x", false, "org-2/team-x", 500, 0}, {"org-2/team-y", true, "", 1000, 450}}},
	} {
		now := t0.Add(s.at)
		for k, v := range s.events {
			observe(t, st, now, "cost", k, v, 1)
		}
		for _, w := range s.want {
			d := check(t, c, w.key, now)
			if d.Allowed != w.allowed || d.Level != w.level || d.Limit != w.limit || d.Remaining != w.left || d.Policy != "org-quota" {
				t.Errorf("step %d, %s: allowed %v level %q limit %d remaining %d (policy %q); want %v %q %d %d",
					i, w.key, d.Allowed, d.Level, d.Limit, d.Remaining, d.Policy, w.allowed, w.level, w.limit, w.left)
			}
			if !d.Allowed && d.RetryAfter <= 0 {
				t.Errorf("step %d, %s: denied without a RetryAfter: %+v", i, w.key, d)
			}
		}
	}
}

// TestRuleLevelsRetryAfterIsTheLevels: a level's RetryAfter is the rule's for that level's
// series: the team's 600, recorded at t0+1m (400) and t0+2m (200), is back to 200 ≤ 500
// when the first minute's slot leaves the hour, at t0+1h1m, whoever of the team asks.
func TestRuleLevelsRetryAfterIsTheLevels(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, orgRule())
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-1", 150, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-2", 150, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a", 100, 1)
	observe(t, st, t0.Add(2*time.Minute), "cost", "org-1/team-a/user-3", 200, 1)
	now := t0.Add(10 * time.Minute)
	d := check(t, c, "org-1/team-a/user-4", now)
	if d.Allowed || d.Level != "org-1/team-a" || d.RetryAfter != t0.Add(61*time.Minute).Sub(now) {
		t.Fatalf("team over: %+v; want denied at org-1/team-a, RetryAfter %v", d, t0.Add(61*time.Minute).Sub(now))
	}
	if d := check(t, c, "org-1/team-a/user-4", t0.Add(61*time.Minute)); !d.Allowed {
		t.Fatalf("at the RetryAfter: %+v, want allowed", d)
	}
}

// TestRuleLevelsOnACalendarDay: levels with a calendar window reset at the boundary, the
// denial's RetryAfter the time to it.
func TestRuleLevelsOnACalendarDay(t *testing.T) {
	st := tieredStore(t)
	r := calendarRule(window.CalendarDay, "UTC", 0)
	r.Max, r.Levels = 0, usage.RuleLevels{Separator: ".", Max: [limiter.MaxLevels]float64{100, 50}, N: 2}
	c := mustChecker(t, st, r)
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	observe(t, st, day.Add(time.Hour), "cost", "acme.eu", 60, 1)
	now := day.Add(2 * time.Hour)
	d := check(t, c, "acme.eu", now)
	if d.Allowed || d.Level != "acme.eu" || d.RetryAfter != 22*time.Hour {
		t.Fatalf("%+v: want denied at acme.eu until midnight (22h)", d)
	}
	if d := check(t, c, "acme.us", now); !d.Allowed || d.Remaining != 40 {
		t.Fatalf("acme.us: %+v, want allowed with the org's 40 left", d)
	}
}

func TestRuleLevelsParsing(t *testing.T) {
	rules, err := usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {separator: \"/\", max: [50000, 20000, 5000]}}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if l := rules[0].Levels; l.N != 3 || l.Separator != "/" || l.Max != [limiter.MaxLevels]float64{50000, 20000, 5000} || rules[0].Max != 0 {
		t.Fatalf("levels %+v max %v", l, rules[0].Max)
	}
	rules, err = usage.ParseRules([]byte("rules:\n  - {name: q, metric: cost, agg: count, window: calendar_day, timezone: Europe/Paris, levels: {max: [10, 5]}}\n"), "p.yaml")
	if err != nil || rules[0].Levels.Separator != "/" || rules[0].Levels.N != 2 {
		t.Fatalf("a calendar rule with levels, default separator: %+v, %v", rules, err)
	}
	for _, c := range []struct{ yaml, msg string }{
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h,\n     levels: {separator: \"\", max: [3, 2]}}\n", `p.yaml:3: rule "q": levels: separator must be 1 to 4 printable characters`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {max: [5, 4, 3, 2, 1]}}\n", "p.yaml:2: rule \"q\": levels: max: want a list of 1 to 4 maxima"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {max: [5, 0]}}\n", "levels: max 0 of level 2 must be a finite number above 0"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {max: [5, -1]}}\n", "levels: max -1 of level 2 must be a finite number above 0"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {max: [5, lots]}}\n", `levels: max: level 2: must be a number, not "lots"`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {max: []}}\n", "levels: max: want a list of 1 to 4 maxima"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {separator: /}}\n", "levels: max: missing"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {limits: [5]}}\n", `levels: unknown field "limits"`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: [5, 3]}\n", `levels: want {separator: "/", max: [50000, 20000, 5000]}`},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, max: 9, levels: {max: [5]}}\n", "max: a rule with levels takes no max"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, key: \"{key}/pay\", levels: {max: [5]}}\n", "levels: split the request's key: key must be {key}"},
		{"rules:\n  - {name: q, metric: cost, agg: p95, window: 1h, levels: {max: [5]}}\n", "levels: take count, sum, avg, min, max or rate, not a quantile (p95)"},
		{"rules:\n  - {name: q, metric: cost, agg: sum, window: 1h, levels: {separator: \"a b\", max: [5]}}\n", "separator must be 1 to 4 printable characters"},
	} {
		_, err := usage.ParseRules([]byte(c.yaml), "p.yaml")
		if !errors.Is(err, usage.ErrInvalidRule) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: err %v, want ErrInvalidRule containing %q", c.yaml, err, c.msg)
		}
	}
}

// TestRuleLevelsRefusePlans: a plan cannot set the max of a rule with levels (one max per
// level); SetPlans says so with the plan file's line and keeps no plans.
func TestRuleLevelsRefusePlans(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, orgRule())
	s, err := limiter.NewService(limiter.Config{Checkers: []limiter.Checker{c}})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := limiter.ParsePlans([]byte("plans:\n  pro: {org-quota: {max: 5000}}\nkeys:\n  org-1: pro\n"), "plans.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = s.SetPlans(ps)
	if err == nil || !strings.Contains(err.Error(), "plans.yaml:2") || !strings.Contains(err.Error(), `rule "org-quota" has levels`) {
		t.Fatalf("SetPlans: %v; want a refusal naming plans.yaml:2 and the rule's levels", err)
	}
	if _, err := c.CheckMax(context.Background(), "org-1", t0, 1, 5000); err == nil {
		t.Fatal("CheckMax on a rule with levels decided")
	}
}

// TestRuleLevelsThroughAllow: POST /v1/allow names the level that denied.
func TestRuleLevelsThroughAllow(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, orgRule())
	now := t0.Add(5 * time.Minute)
	s, err := limiter.NewService(limiter.Config{Checkers: []limiter.Checker{c}, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-1", 190, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-2", 190, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-3", 190, 1)
	h := limithttp.AllowHandler(s)
	post := func(key string) (int, map[string]any) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/allow", strings.NewReader(`{"policy":"org-quota","key":"`+key+`"}`)))
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v: %s", key, err, w.Body)
		}
		return w.Code, out
	}
	code, out := post("org-1/team-a/user-4")
	if code != http.StatusTooManyRequests || out["allowed"] != false || out["level"] != "org-1/team-a" || out["policy"] != "org-quota" {
		t.Fatalf("team over: %d %v; want 429 naming level org-1/team-a", code, out)
	}
	if code, out := post("org-1/team-b/user-4"); code != http.StatusOK || out["allowed"] != true || out["level"] != nil {
		t.Fatalf("another team: %d %v; want 200 and no level", code, out)
	}
}

// TestRuleLevelsThroughTheCluster: with the usage split over two instances, a rule with
// levels reads each level through the cluster Reader (the prefix and prefix/* merged) and
// decides as one store holding all of it decides: the same level, Remaining and RetryAfter.
func TestRuleLevelsThroughTheCluster(t *testing.T) {
	local, peer, whole := newStore(t), newStore(t), newStore(t)
	for i, ev := range []struct {
		key string
		v   float64
	}{{"org-1/team-a/user-1", 150}, {"org-1/team-a", 200}, {"org-1/team-a/user-2", 160}, {"org-1/team-b/user-1", 120}, {"org-1", 30}} {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		observe(t, []*window.Store{local, peer}[i%2], at, "cost", ev.key, ev.v, 1)
		observe(t, whole, at, "cost", ev.key, ev.v, 1)
	}
	now := t0.Add(10 * time.Minute)
	owner := mustChecker(t, whole, orgRule())
	c := mustChecker(t, local, orgRule())
	usage.SetReader([]limiter.Checker{c}, &peerReader{local: local, peer: peer, staleMs: 300, unavail: map[string]int{}})
	for _, k := range []string{"org-1/team-a/user-3", "org-1/team-b/user-1", "org-1/team-c", "org-1", "org-2/team-a/user-1"} {
		want, got := check(t, owner, k, now), check(t, c, k, now)
		if got.Allowed != want.Allowed || got.Level != want.Level || got.Remaining != want.Remaining || got.Limit != want.Limit ||
			got.RetryAfter != want.RetryAfter || !got.Remote || got.Stale != 300*time.Millisecond {
			t.Errorf("%s: through the cluster %+v, one store %+v", k, got, want)
		}
	}
	if d := check(t, owner, "org-1/team-a/user-3", now); d.Allowed || d.Level != "org-1/team-a" {
		t.Fatalf("team-a's 510 of 500 (its users' 310, its own 200) is over: %+v, want denied at org-1/team-a", d)
	}
}

// TestRuleLevelsQuota: GET /v1/quota's numbers for a rule with levels: the decision's, and
// each level's limit, used and remaining, every level read even past one that is over.
func TestRuleLevelsQuota(t *testing.T) {
	st := newStore(t)
	c := mustChecker(t, st, orgRule())
	s, err := limiter.NewService(limiter.Config{Checkers: []limiter.Checker{c}})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-7", 120, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-a/user-8", 300, 1)
	observe(t, st, t0.Add(time.Minute), "cost", "org-1/team-b/user-1", 700, 1)
	q, err := s.Quota(context.Background(), "org-quota", "org-1/team-a/user-7", t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Used is what the window holds, past the limit too: the org's 1,120, not 1,000.
	want := []limiter.LevelQuota{{Level: "org-1", Limit: 1000, Used: 1120}, {Level: "org-1/team-a", Limit: 500, Used: 420, Remaining: 80},
		{Level: "org-1/team-a/user-7", Limit: 200, Used: 120, Remaining: 80}}
	if q.Limit != 1000 || q.Used != 1120 || q.Remaining != 0 || len(q.Levels) != len(want) {
		t.Fatalf("quota %+v; want the org's denial (limit 1000, 1120 used, none left) and three levels", q)
	}
	for i, w := range want {
		g := q.Levels[i]
		if g.Level != w.Level || g.Limit != w.Limit || g.Used != w.Used || g.Remaining != w.Remaining || !g.Reset.After(t0) {
			t.Errorf("level %d: %+v, want %+v", i, g, w)
		}
	}
	// A rule without levels, over by 51 of 50 (slide query quota said used 50).
	flat := mustChecker(t, st, usage.Rule{Name: "tokens", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour, Max: 50})
	s, err = limiter.NewService(limiter.Config{Checkers: []limiter.Checker{flat}})
	if err != nil {
		t.Fatal(err)
	}
	observe(t, st, t0.Add(time.Minute), "cost", "trial-x", 51, 1)
	if q, err := s.Quota(context.Background(), "tokens", "trial-x", t0.Add(2*time.Minute)); err != nil || q.Limit != 50 || q.Used != 51 || q.Remaining != 0 {
		t.Errorf("quota %+v, %v; want limit 50, used 51, none left", q, err)
	}
}

// TestRuleLevelsWithMatch: a rule with levels and match: reads at each level only the
// series its matchers select, compared by their key label: the org's /pay cost, not its
// /search cost.
func TestRuleLevelsWithMatch(t *testing.T) {
	st := newStore(t)
	series := func(key, route string) string {
		b, err := window.AppendSeries(nil, key, []window.Label{{Name: "route", Value: route}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := orgRule()
	r.Match = `route="/pay"`
	c := mustChecker(t, st, r)
	observe(t, st, t0, "cost", series("org-1/team-a/user-1", "/pay"), 190, 1)
	observe(t, st, t0, "cost", series("org-1/team-b/user-1", "/pay"), 190, 1)
	observe(t, st, t0, "cost", series("org-1/team-c/user-1", "/search"), 5000, 1)
	observe(t, st, t0, "cost", "org-1/team-d/user-1", 5000, 1)
	now := t0.Add(time.Second)
	per, keys, err := c.CheckLevels(context.Background(), "org-1/team-a/user-1", now)
	if err != nil || len(per) != 3 || keys[1] != "org-1/team-a" {
		t.Fatalf("levels %+v %v %v", per, keys, err)
	}
	for i, left := range []int64{620, 310, 10} { // only /pay counts: 380, 190, 190
		if !per[i].Allowed || per[i].Remaining != left {
			t.Errorf("level %s: %+v, want allowed with %d left", keys[i], per[i], left)
		}
	}
	observe(t, st, now, "cost", series("org-1/team-c/user-1", "/pay"), 190, 1)
	observe(t, st, now, "cost", series("org-1/team-d/user-1", "/pay"), 190, 1)
	observe(t, st, now, "cost", series("org-1/team-e/user-1", "/pay"), 190, 1)
	observe(t, st, now, "cost", series("org-1/team-f/user-1", "/pay"), 190, 1)
	if d := check(t, c, "org-1/team-a/user-2", now.Add(time.Second)); d.Allowed || d.Level != "org-1" {
		t.Fatalf("the org's /pay at 950 + 190: %+v, want denied at org-1 (the /search 10000 never counted)", d)
	}
}

// TestRuleLevelsMatchScan: random keys of one to four levels, random events over two
// hours; every level of CheckLevels (read through the store's level index, from its cache
// when nothing changed) holds the usage a scan of every series of the metric finds under
// the level's prefix.
func TestRuleLevelsMatchScan(t *testing.T) {
	st := newStore(t)
	const max = 1e9
	c := mustChecker(t, st, usage.Rule{Name: "q", Metric: "cost", Agg: usage.Agg{Kind: usage.KindSum}, Window: time.Hour,
		Levels: usage.RuleLevels{Separator: "/", Max: [limiter.MaxLevels]float64{max, max, max}, N: 3}})
	rng := rand.New(rand.NewPCG(29, 3))
	key := func() string {
		parts := make([]string, 1+rng.IntN(4))
		for i := range parts {
			parts[i] = string(rune('a' + rng.IntN(3)))
		}
		return strings.Join(parts, "/")
	}
	now := t0
	for range 400 {
		now = now.Add(time.Duration(rng.IntN(40)) * time.Second)
		observe(t, st, now, "cost", key(), float64(rng.IntN(20)), 1)
		for range 2 {
			k := key()
			ds, keys, err := c.CheckLevels(context.Background(), k, now)
			if err != nil {
				t.Fatal(err)
			}
			for i, lk := range keys {
				var p window.Partial
				p.NoBins = true
				err := st.MergePartial(now.UnixMilli(), "cost", func(s string, _ int32) bool {
					kk := window.SeriesKeyOf(s)
					return kk == lk || i < 2 && strings.HasPrefix(kk, lk+"/") // levels above the last read under
				}, time.Hour, &p)
				if err != nil {
					t.Fatal(err)
				}
				if want := int64(max - p.Sum); ds[i].Remaining != want {
					t.Fatalf("key %q level %q at %v: remaining %d, the scan's sum leaves %d", k, lk, now, ds[i].Remaining, want)
				}
			}
		}
	}
}
