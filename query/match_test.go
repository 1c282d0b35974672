package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// labelled is one event of a labelled series: its key and labels (code "" is a series
// without code).
type labelled struct {
	key, route, code string
	ts               int64
	value            float64
}

// label reads the label name of l as the selectors do (absent: "").
func (l labelled) label(name string) string {
	switch name {
	case "key":
		return l.key
	case "route":
		return l.route
	case "code":
		return l.code
	}
	return ""
}

// observeLabelled records evs into e's store under their series strings, by the store's own
// door (TestPostLabelledEvents posts the same events to /v1/events), and returns them.
func observeLabelled(t *testing.T, e *env, metric string, evs []labelled) []labelled {
	t.Helper()
	for _, ev := range evs {
		var ls []window.Label
		if ev.route != "" {
			ls = append(ls, window.Label{Name: "route", Value: ev.route})
		}
		if ev.code != "" {
			ls = append(ls, window.Label{Name: "code", Value: ev.code})
		}
		window.SortLabels(ls)
		series, err := window.AppendSeries(nil, ev.key, ls)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.ObserveAt(e.clock.millis(), window.Event{TS: ev.ts, Metric: metric, Key: string(series), Value: ev.value}); err != nil {
			t.Fatalf("%+v: %v", ev, err)
		}
	}
	return evs
}

// labelledEvents is 600 events over 4 keys, 3 routes and 4 codes (a route and a code of
// them none: each key has an unlabelled series too), every combination present.
func labelledEvents(t *testing.T, e *env) []labelled {
	var evs []labelled
	keys := []string{"tenant-1", "tenant-2", "tenant-10", "ops"}
	routes := []string{"/pay", "/login", ""}
	codes := []string{"200", "503", "500", ""}
	for i := range 600 {
		evs = append(evs, labelled{
			key: keys[i%4], route: routes[i/4%3], code: codes[i/12%4],
			ts: t0 + int64(i)*10, value: float64(1 + (i*7919)%1000),
		})
	}
	return observeLabelled(t, e, "latency_ms", evs)
}

// TestPostLabelledEvents posts labelled events to /v1/events with their labels in the event's
// labels member (an absent code written as "" for half of them, which is no label) and reads
// them back with match= and by=: every answer is byte for byte that of the same events
// observed under their series strings, and a match= read is the oracle's.
func TestPostLabelledEvents(t *testing.T) {
	posted, direct := newEnv(t, nil), newEnv(t, nil)
	posted.clock.set(t0 + 9_999)
	direct.clock.set(t0 + 9_999)
	evs := labelledEvents(t, direct)
	var body bytes.Buffer
	for i, ev := range evs {
		labels := map[string]string{}
		if ev.route != "" {
			labels["route"] = ev.route
		}
		if ev.code != "" || i%2 == 0 {
			labels["code"] = ev.code
		}
		lb, err := json.Marshal(labels)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&body, `{"ts":%d,"key":%q,"metric":"latency_ms","value":%v,"labels":%s}`+"\n", ev.ts, ev.key, ev.value, lb)
	}
	if a := posted.post(body.Bytes()); a.Accepted != len(evs) || len(a.Rejected) != 0 {
		t.Fatalf("POST /v1/events: %+v, want %d accepted", a, len(evs))
	}
	for _, path := range []string{
		"/v1/window?metric=latency_ms&window=1m&match=" + url.QueryEscape(`route="/pay"`),
		"/v1/window?metric=latency_ms&window=1m&by=route&match=" + url.QueryEscape(`code=~"5.."`),
		"/v1/window?metric=latency_ms&window=1m&by=code,route&q=0.5,0.99",
		"/v1/window?metric=latency_ms&window=1m&key=ops&by=code",
		"/v1/range?metric=latency_ms&window=1m&step=10s&by=code",
		"/v1/top?metric=latency_ms&by=count&match=" + url.QueryEscape(`code="200"`),
		"/v1/series?metric=latency_ms&limit=1000&match=" + url.QueryEscape(`route!=""`),
	} {
		code, got, _ := posted.do("GET", path, nil)
		_, want, _ := direct.do("GET", path, nil)
		if code != 200 || !bytes.Equal(got, want) {
			t.Errorf("GET %s = %d\n %s\nwant\n %s", path, code, got, want)
		}
	}
	n, sum, lo, hi := labelOracle(evs, func(l labelled) bool { return l.route == "/pay" && l.code == "200" })
	var w windowAnswer
	posted.getJSON("/v1/window?metric=latency_ms&window=1m&match="+url.QueryEscape(`route="/pay",code="200"`), 200, &w)
	if w.Count != n || w.Sum != sum || *w.Min != lo || *w.Max != hi {
		t.Errorf("route=/pay code=200: %+v, want count %d sum %v min %v max %v", w, n, sum, lo, hi)
	}
}

// labelOracle is count, sum, min and max of the events keep accepts.
func labelOracle(evs []labelled, keep func(labelled) bool) (n uint64, sum, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, ev := range evs {
		if keep(ev) {
			n++
			sum += ev.value
			lo, hi = min(lo, ev.value), max(hi, ev.value)
		}
	}
	return
}

// sameAgg reports how two answers' aggregates differ, or "".
func sameAgg(a, b query.Stats) string {
	if a.Count != b.Count || a.Sum != b.Sum || !floatEq(a.Min, b.Min) || !floatEq(a.Max, b.Max) || !floatEq(a.Avg, b.Avg) || len(a.Quantiles) != len(b.Quantiles) {
		return fmt.Sprintf("count %d sum %v, want %d %v", a.Count, a.Sum, b.Count, b.Sum)
	}
	for q, v := range b.Quantiles {
		if !floatEq(a.Quantiles[q], v) {
			return fmt.Sprintf("q%s %v, want %v", q, a.Quantiles[q], v)
		}
	}
	return ""
}

// TestMatchEachOperator reads /v1/window with match= of each operator (and key=, exact or a
// glob, beside it) over labelled series: each answer is the exact oracle of the events of
// the series the matchers select, an absent label reading as "".
func TestMatchEachOperator(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 9_999)
	evs := labelledEvents(t, e)
	for _, c := range []struct {
		key, match string
		keep       func(labelled) bool
	}{
		{"", `route="/pay"`, func(l labelled) bool { return l.route == "/pay" }},
		{"", `route!="/pay"`, func(l labelled) bool { return l.route != "/pay" }},
		{"", `code=~"5.."`, func(l labelled) bool { return strings.HasPrefix(l.code, "5") }},
		{"", `code!~"5.."`, func(l labelled) bool { return !strings.HasPrefix(l.code, "5") }},
		{"", `code=""`, func(l labelled) bool { return l.code == "" }},
		{"", `code!=""`, func(l labelled) bool { return l.code != "" }},
		{"", `route=~"/(pay|login)",code="200"`, func(l labelled) bool { return l.route != "" && l.code == "200" }},
		{"", `key="ops"`, func(l labelled) bool { return l.key == "ops" }},
		{"", `key=~"tenant-.*",code=~"50[03]"`, func(l labelled) bool { return l.key != "ops" && strings.HasPrefix(l.code, "50") }},
		{"tenant-1", `code="503"`, func(l labelled) bool { return l.key == "tenant-1" && l.code == "503" }},
		{"tenant-1*", `route!~"/p.*"`, func(l labelled) bool {
			return strings.HasPrefix(l.key, "tenant-1") && !strings.HasPrefix(l.route, "/p")
		}},
		{"*-1", `route='/login'`, func(l labelled) bool { return l.key == "tenant-1" && l.route == "/login" }},
	} {
		n, sum, lo, hi := labelOracle(evs, c.keep)
		q := url.Values{"metric": {"latency_ms"}, "match": {c.match}, "window": {"1m"}}
		if c.key != "" {
			q.Set("key", c.key)
		}
		var w windowAnswer
		e.getJSON("/v1/window?"+q.Encode(), 200, &w)
		if w.Count != n || w.Sum != sum || *w.Min != lo || *w.Max != hi || w.Match != c.match || w.Key != c.key {
			t.Errorf("key=%s match=%s: %+v, want count %d sum %v min %v max %v", c.key, c.match, w, n, sum, lo, hi)
		}
	}
	var a errorAnswer
	e.getJSON("/v1/window?metric=latency_ms&match="+url.QueryEscape(`code="404"`), 404, &a)
	if !strings.Contains(a.Error.Message, `match="code=\"404\""`) {
		t.Errorf("404 message %q does not name match=", a.Error.Message)
	}
}

// TestKeyOnLabelledSeries holds key= to the key label on a metric with labelled series: an
// exact key merges every series of that key, a glob matches keys (never the labels after
// them), in /v1/window and /v1/range alike.
func TestKeyOnLabelledSeries(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 9_999)
	evs := labelledEvents(t, e)
	for _, key := range []string{"tenant-1", "ops", "tenant-1*", "*-1", "*"} {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(key), `\*`, ".*") + "$")
		n, sum, _, hi := labelOracle(evs, func(l labelled) bool { return re.MatchString(l.key) })
		var w windowAnswer
		e.getJSON("/v1/window?metric=latency_ms&window=1m&key="+url.QueryEscape(key), 200, &w)
		if w.Count != n || w.Sum != sum || *w.Max != hi {
			t.Errorf("key=%s: count %d sum %v max %v, want %d %v %v", key, w.Count, w.Sum, *w.Max, n, sum, hi)
		}
		var r rangeAnswer
		e.getJSON("/v1/range?metric=latency_ms&window=1m&step=1m&key="+url.QueryEscape(key), 200, &r)
		if len(r.Points) != 5 || r.Points[4].Count != n || r.Points[4].Sum != sum || r.Series != w.Series {
			t.Errorf("range key=%s: %d points, last %+v, series %d, want count %d sum %v series %d", key, len(r.Points), r.Points[len(r.Points)-1], r.Series, n, sum, w.Series)
		}
	}
	var a errorAnswer
	e.getJSON("/v1/window?metric=latency_ms&key=tenant-3", 404, &a)
	e.getJSON("/v1/window?metric=latency_ms&key=tenant-1&match="+url.QueryEscape(`code="404"`), 404, &a)
}

// groupedAnswer is a grouped /v1/window answer.
type groupedAnswer = query.WindowResponse

// groupSelector is the match= that selects exactly one group's series: its labels, and
// label="" for a by-label the group has not.
func groupSelector(base string, by []string, labels map[string]string) string {
	ms := []string{}
	if base != "" {
		ms = append(ms, base)
	}
	for _, name := range by {
		ms = append(ms, name+"="+strconv.Quote(labels[name]))
	}
	return strings.Join(ms, ",")
}

// TestGroupsEqualMatchReads reads by= over labelled series, with and without a match=: every
// group equals the match= read of its own selector exactly (count, sum, avg, min, max,
// quantiles, series, span), a group whose series lack a by-label leaves it out of
// "labels", the groups are sorted, and together they hold every selected series. /v1/range
// groups equal their match= ranges point by point.
func TestGroupsEqualMatchReads(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 9_999)
	evs := labelledEvents(t, e)
	for _, c := range []struct {
		key, match, by string
		groups         int
	}{
		{"", "", "code", 4},
		{"", `route="/pay"`, "code", 4},
		{"", `code=~"5.."`, "route,code", 6},
		{"tenant-*", "", "key", 3},
		{"", `route!=""`, "route,key", 8},
		{"tenant-1", "", "route", 3},
	} {
		by := strings.Split(c.by, ",")
		q := url.Values{"metric": {"latency_ms"}, "window": {"1m"}, "by": {c.by}, "q": {"0.5,0.99"}}
		if c.match != "" {
			q.Set("match", c.match)
		}
		if c.key != "" {
			q.Set("key", c.key)
		}
		var g groupedAnswer
		e.getJSON("/v1/window?"+q.Encode(), 200, &g)
		if len(g.Groups) != c.groups || !slices.Equal(g.By, by) || g.Match != c.match {
			t.Fatalf("%v: %d groups by %v, want %d: %+v", q, len(g.Groups), g.By, c.groups, g)
		}
		var total uint64
		var prev []string
		for i, grp := range g.Groups {
			vals := make([]string, len(by))
			for j, name := range by {
				v, ok := grp.Labels[name]
				if ok && v == "" {
					t.Errorf("%v group %d: empty label %s shown", q, i, name)
				}
				vals[j] = v
			}
			if i > 0 && slices.Compare(prev, vals) >= 0 {
				t.Errorf("%v: group %v after %v", q, vals, prev)
			}
			prev = vals
			total += grp.Count
			one := url.Values{"metric": {"latency_ms"}, "window": {"1m"}, "q": {"0.5,0.99"}, "match": {groupSelector(c.match, by, grp.Labels)}}
			if c.key != "" {
				one.Set("key", c.key)
			}
			var w windowAnswer
			e.getJSON("/v1/window?"+one.Encode(), 200, &w)
			if d := sameAgg(grp.Stats, w.Stats); d != "" || grp.Series != w.Series || grp.From != w.From || grp.To != w.To {
				t.Errorf("%v group %v: %s (series %d, want %d)", q, grp.Labels, d, grp.Series, w.Series)
			}
			// The range of the group is the range of its selector.
			rq, oneR := url.Values{}, url.Values{}
			for k, v := range q {
				rq[k] = v
			}
			for k, v := range one {
				oneR[k] = v
			}
			rq.Set("step", "10s")
			oneR.Set("step", "10s")
			var rg struct {
				Groups []struct {
					Labels map[string]string `json:"labels"`
					rangeAnswer
				} `json:"groups"`
			}
			e.getJSON("/v1/range?"+rq.Encode(), 200, &rg)
			var r rangeAnswer
			e.getJSON("/v1/range?"+oneR.Encode(), 200, &r)
			if len(rg.Groups) != len(g.Groups) {
				t.Fatalf("%v: %d range groups, %d window groups", rq, len(rg.Groups), len(g.Groups))
			}
			gr := rg.Groups[i]
			if fmt.Sprint(gr.Labels) != fmt.Sprint(grp.Labels) || gr.Series != r.Series || len(gr.Points) != len(r.Points) {
				t.Fatalf("%v group %v: range group %v of %d series, %d points; match read %d series, %d points", rq, grp.Labels, gr.Labels, gr.Series, len(gr.Points), r.Series, len(r.Points))
			}
			for k := range r.Points {
				a, b := gr.Points[k], r.Points[k]
				if a.From != b.From || a.Count != b.Count || a.Sum != b.Sum || !floatEq(a.Min, b.Min) || !floatEq(a.Max, b.Max) || !floatEq(a.Quantiles["0.99"], b.Quantiles["0.99"]) {
					t.Errorf("%v group %v point %d: %+v, want %+v", rq, grp.Labels, k, a, b)
				}
			}
		}
		q.Del("by")
		if c.key == "" && c.match == "" {
			q.Set("key", "*")
		}
		var all windowAnswer
		e.getJSON("/v1/window?"+q.Encode(), 200, &all)
		if total != all.Count {
			t.Errorf("%v: groups hold %d events, the selection %d", q, total, all.Count)
		}
	}
	// Absent labels: the series without code form their own group, shown without "code".
	var g groupedAnswer
	e.getJSON("/v1/window?metric=latency_ms&key=ops&by=code", 200, &g)
	if len(g.Groups) != 4 || len(g.Groups[0].Labels) != 0 || g.Groups[1].Labels["code"] != "200" {
		t.Errorf("ops by code: %+v", g.Groups)
	}
	n, _, _, _ := labelOracle(evs, func(l labelled) bool { return l.key == "ops" && l.code == "" })
	if g.Groups[0].Count != n {
		t.Errorf("ops without code: %d, want %d", g.Groups[0].Count, n)
	}
	if g.Warnings != nil {
		t.Errorf("ops by code, a label some series have: warnings %q", g.Warnings)
	}
	// A by= label no selected series has (the service is the key) groups nothing: one group
	// of them all, as PromQL's sum by, and a warning that says where the names are.
	var none groupedAnswer
	e.getJSON("/v1/window?metric=latency_ms&key=ops&by=code,service", 200, &none)
	if len(none.Groups) != 4 || len(none.Warnings) != 1 || !strings.Contains(none.Warnings[0], `has the label "service", so it groups nothing`) ||
		!strings.Contains(none.Warnings[0], "by=key") {
		t.Errorf("ops by code,service: %d groups, warnings %q", len(none.Groups), none.Warnings)
	}
	var rng struct {
		Groups   []json.RawMessage `json:"groups"`
		Warnings []string          `json:"warnings"`
	}
	e.getJSON("/v1/range?metric=latency_ms&window=1m&step=10s&by=service", 200, &rng)
	if len(rng.Groups) != 1 || len(rng.Warnings) != 1 || !strings.Contains(rng.Warnings[0], `"service"`) {
		t.Errorf("range by service: %d groups, warnings %q", len(rng.Groups), rng.Warnings)
	}
}

// TestMatchAndByRefused answers 400 naming match or by for a matcher that does not parse or
// compile, __name__, a label name no series can have, a bad or repeated by label and a
// grouping of too many groups.
func TestMatchAndByRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 9_999)
	labelledEvents(t, e)
	for _, c := range []struct{ path, param, says string }{
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`code=~"5.("`), "match", "missing closing )"},
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`code=`), "match", "parse error"},
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`code="5"} or {x="y"`), "match", "parse error"},
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`__name__="latency_ms"`), "match", "metric="},
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`"latency_ms"`), "match", "metric="},
		{"/v1/window?metric=latency_ms&match=" + url.QueryEscape(`"http.route"="/pay"`), "match", "label name"},
		{"/v1/range?metric=latency_ms&match=" + url.QueryEscape(`code=~"("`), "match", "missing closing )"},
		{"/v1/top?metric=latency_ms&match=" + url.QueryEscape(`__name__=~".*"`), "match", "metric="},
		{"/v1/series?metric=latency_ms&match=" + url.QueryEscape(`code=~"["`), "match", "missing closing ]"},
		{"/v1/window?metric=latency_ms&match=" + strings.Repeat("a", query.MaxMatchBytes+1), "match", "at most"},
		{"/v1/window?metric=latency_ms&by=__code", "by", "label name"},
		{"/v1/window?metric=latency_ms&by=code,route,code", "by", "given twice"},
		{"/v1/range?metric=latency_ms&by=1code", "by", "label name"},
		{"/v1/window?metric=latency_ms&key=ops&by=" + strings.Repeat("a,", 16) + "b", "by", "at most 16"},
		{"/v1/window?metric=latency_ms", "key", "required"},
	} {
		var a errorAnswer
		e.getJSON(c.path, 400, &a)
		if a.Error.Param != c.param || !strings.Contains(a.Error.Message, c.says) {
			t.Errorf("%s: param %q message %q, want %q saying %q", c.path, a.Error.Param, a.Error.Message, c.param, c.says)
		}
	}
	// One series per group over the limit: 400 naming by, with the limit.
	for i := range window.MaxGroups + 1 {
		if err := e.store.ObserveAt(e.clock.millis(), window.Event{TS: t0, Metric: "many", Key: "k" + strconv.Itoa(i), Value: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/v1/window?metric=many&by=key", "/v1/range?metric=many&by=key"} {
		var a errorAnswer
		e.getJSON(path, 400, &a)
		if a.Error.Param != "by" || !strings.Contains(a.Error.Message, "too many groups") {
			t.Errorf("%s: %+v", path, a.Error)
		}
	}
}

// TestTopAndSeriesShowLabels reads /v1/top and /v1/series over labelled series: match= and
// key= select them, and each entry shows its key and, when it has them, its labels, as
// strict decoding into the response types accepts.
func TestTopAndSeriesShowLabels(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.set(t0 + 9_999)
	evs := observeLabelled(t, e, "latency_ms", []labelled{
		{key: "tenant-1", route: "/pay", code: "503", ts: t0, value: 900},
		{key: "tenant-1", route: "/pay", code: "200", ts: t0, value: 20},
		{key: "tenant-2", route: "/pay", ts: t0, value: 30},
		{key: "tenant-2", route: "/login", code: "503", ts: t0, value: 700},
	})
	e.post(ndjson([]event{{ts: t0, key: "tenant-3", metric: "latency_ms", value: 5}}))
	strict := func(path string, v any) {
		t.Helper()
		code, b, _ := e.do("GET", path, nil)
		if code != 200 {
			t.Fatalf("GET %s = %d %s", path, code, b)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, b)
		}
	}
	var top query.TopResponse
	strict("/v1/top?metric=latency_ms&by=max&match="+url.QueryEscape(`code=~"5.."`), &top)
	if len(top.Top) != 2 || top.Series != 2 || top.Match != `code=~"5.."` ||
		top.Top[0].Key != "tenant-1" || fmt.Sprint(top.Top[0].Labels) != "map[code:503 route:/pay]" || top.Top[0].Value != 900 ||
		top.Top[1].Key != "tenant-2" || top.Top[1].Value != 700 {
		t.Errorf("top by max of 5xx: %+v", top)
	}
	top = query.TopResponse{}
	strict("/v1/top?metric=latency_ms&by=count&key=tenant-*", &top)
	if len(top.Top) != len(evs)+1 || top.Top[len(top.Top)-1].Key != "tenant-3" || top.Top[len(top.Top)-1].Labels != nil {
		t.Errorf("top of tenant-*: %+v", top)
	}
	top = query.TopResponse{}
	strict("/v1/top?metric=latency_ms&key=tenant-2&match="+url.QueryEscape(`code=""`), &top)
	if len(top.Top) != 1 || fmt.Sprint(top.Top[0].Labels) != "map[route:/pay]" {
		t.Errorf("top of tenant-2 without code: %+v", top)
	}
	type seriesAnswer struct {
		Match  string `json:"match"`
		Series []struct {
			Metric string            `json:"metric"`
			Key    string            `json:"key"`
			Labels map[string]string `json:"labels"`
		} `json:"series"`
		Next string `json:"next"`
	}
	var series seriesAnswer
	e.getJSON("/v1/series?metric=latency_ms&match="+url.QueryEscape(`route="/pay"`), 200, &series)
	if len(series.Series) != 3 || series.Match != `route="/pay"` || series.Series[0].Key != "tenant-1" || series.Series[0].Labels["code"] != "200" || series.Series[2].Labels["code"] != "" {
		t.Errorf("series of /pay: %+v", series)
	}
	e.getJSON("/v1/series?metric=latency_ms&limit=2&match="+url.QueryEscape(`key=~"tenant-.*"`), 200, &series)
	if len(series.Series) != 2 || series.Next == "" {
		t.Fatalf("first page: %+v", series)
	}
	next := series.Next
	series = seriesAnswer{}
	e.getJSON("/v1/series?metric=latency_ms&limit=2&cursor="+next+"&match="+url.QueryEscape(`key=~"tenant-.*"`), 200, &series)
	if len(series.Series) != 2 || series.Series[1].Key != "tenant-2" {
		t.Errorf("second page: %+v", series)
	}
	series = seriesAnswer{}
	e.getJSON("/v1/series?match="+url.QueryEscape(`code="503"`), 200, &series)
	if len(series.Series) != 2 {
		t.Errorf("series of every metric with code 503: %+v", series)
	}
	var w query.WindowResponse
	strict("/v1/window?metric=latency_ms&by=code&match="+url.QueryEscape(`route!=""`)+"&q=0.5", &w)
	if len(w.Groups) != 3 || w.Groups[0].Series != 1 || w.Groups[0].Quantiles["0.5"] == nil {
		t.Errorf("grouped window: %+v", w)
	}
}
