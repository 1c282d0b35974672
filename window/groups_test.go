package window

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"
)

// labelledStore holds metric "latency_ms": 400 series of 20 keys, each with a random subset
// of route, method and code (so every by-label is absent from some series), and the bare
// keys too, fed by 4 partitions, with integer values so that sums are exact in any order.
func labelledStore(t testing.TB) (*Store, int64) {
	t.Helper()
	s := newTestStore(t, StoreConfig{})
	now := t0 + 299_999
	rng := rand.New(rand.NewPCG(27, 2))
	routes := []string{"/pay", "/login", "/search"}
	methods := []string{"GET", "POST"}
	codes := []string{"200", "404", "500", "503"}
	for i := range 400 {
		key := "tenant-" + strconv.Itoa(i%20)
		var kv []string
		if i >= 20 {
			if rng.IntN(4) > 0 {
				kv = append(kv, "route", routes[rng.IntN(len(routes))])
			}
			if rng.IntN(4) > 0 {
				kv = append(kv, "method", methods[rng.IntN(len(methods))])
			}
			if rng.IntN(4) > 0 {
				kv = append(kv, "code", codes[rng.IntN(len(codes))])
			}
		}
		series := seriesOf(t, key, kv...)
		for range 1 + rng.IntN(40) {
			ev := Event{TS: now - rng.Int64N(290_000), Metric: "latency_ms", Key: series, Value: float64(1 + rng.IntN(2000)), Feed: FeedOf(int32(i % 4))}
			if err := s.ObserveAt(now, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, now
}

// groupSelector is sel's key and matchers with each by-label equal to the group's value:
// the selector of exactly the group's series.
func groupSelector(t testing.TB, key string, ms []Matcher, labels []Label) *Selector {
	t.Helper()
	ms = slices.Clone(ms)
	for _, l := range labels {
		ms = append(ms, Matcher{l.Name, MatchEqual, l.Value})
	}
	sel, err := CompileSelector(key, ms)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// Each group of ReadGroups is exactly ReadMerged of the group's own selector, and the groups
// partition the selected series.
func TestReadGroupsEqualReadMerged(t *testing.T) {
	s, now := labelledStore(t)
	qs := []float64{0, 0.5, 0.95, 0.99, 1}
	for _, c := range []struct {
		key string
		ms  []Matcher
		by  []string
	}{
		{"", nil, []string{"code"}},
		{"", nil, []string{"route", "code"}},
		{"", nil, []string{"code", "route"}},
		{"tenant-*", []Matcher{{"route", MatchEqual, "/pay"}}, []string{"method"}},
		{"", []Matcher{{"code", MatchRegexp, "5.."}}, []string{"key"}},
		{"tenant-3", nil, []string{"route", "method", "code"}},
		{"", []Matcher{{"method", MatchNotEqual, ""}}, nil},
		{"", nil, []string{"zone"}},
	} {
		sel, err := CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		for _, win := range []time.Duration{time.Minute, 5 * time.Minute} {
			groups, err := s.ReadGroups(now, "latency_ms", sel, c.by, win, qs, nil)
			if err != nil {
				t.Fatalf("%q %v by %v: %v", c.key, c.ms, c.by, err)
			}
			all, err := s.ReadMerged(now, "latency_ms", sel.Match, win, qs)
			if err != nil {
				t.Fatal(err)
			}
			series, count := 0, uint64(0)
			for i, g := range groups {
				if len(g.Labels) != len(c.by) {
					t.Fatalf("labels %v by %v", g.Labels, c.by)
				}
				for j, l := range g.Labels {
					if l.Name != c.by[j] {
						t.Fatalf("labels %v by %v", g.Labels, c.by)
					}
				}
				if i > 0 && slices.Compare(valuesOf(groups[i-1].Labels), valuesOf(g.Labels)) >= 0 {
					t.Errorf("groups out of order: %v before %v", groups[i-1].Labels, g.Labels)
				}
				want, err := s.ReadMerged(now, "latency_ms", groupSelector(t, c.key, c.ms, g.Labels).Match, win, qs)
				if err != nil {
					t.Fatalf("group %v: %v", g.Labels, err)
				}
				if !sameAgg(g.Agg, want) || g.Agg.Series != want.Series {
					t.Errorf("%q %v by %v, group %v: %+v, ReadMerged of its selector %+v", c.key, c.ms, c.by, g.Labels, g.Agg, want)
				}
				series += g.Agg.Series
				count += g.Agg.Count
			}
			if series != all.Series || count != all.Count {
				t.Errorf("%q %v by %v: groups hold %d series, %d events; the selector %d, %d", c.key, c.ms, c.by, series, count, all.Series, all.Count)
			}
			if len(c.by) == 0 && (len(groups) != 1 || !sameAgg(groups[0].Agg, all)) {
				t.Errorf("no by: %+v, want one group %+v", groups, all)
			}
		}
	}
}

func valuesOf(ls []Label) []string {
	vs := make([]string, len(ls))
	for i, l := range ls {
		vs[i] = l.Value
	}
	return vs
}

// A by-label some series lack groups them under "": the group of code="" is the series
// without code, beside those with it.
func TestReadGroupsAbsentLabel(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	now := t0 + 299_999
	for i, series := range []string{
		"tenant-1",
		seriesOf(t, "tenant-1", "route", "/pay"),
		seriesOf(t, "tenant-2", "code", "500"),
		seriesOf(t, "tenant-2", "code", "500", "route", "/pay"),
		seriesOf(t, "tenant-3", "code", "200"),
	} {
		if err := s.ObserveAt(now, Event{TS: now, Metric: "m", Key: series, Value: float64(10 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
	}
	groups, err := s.ReadGroups(now, "m", nil, []string{"code"}, time.Minute, []float64{0.5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s=%q:%d series, sum %v", g.Labels[0].Name, g.Labels[0].Value, g.Agg.Series, g.Agg.Sum))
	}
	want := []string{`code="":2 series, sum 30`, `code="200":1 series, sum 50`, `code="500":2 series, sum 70`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups %q, want %q", got, want)
	}
	// A metric without labelled series and an exact key: one lookup, one group.
	if err := s.ObserveAt(now, Event{TS: now, Metric: "plain", Key: "tenant-1", Value: 7}); err != nil {
		t.Fatal(err)
	}
	sel, _ := CompileSelector("tenant-1", nil)
	groups, err = s.ReadGroups(now, "plain", sel, []string{"key", "code"}, time.Minute, nil, nil)
	if err != nil || len(groups) != 1 || !reflect.DeepEqual(groups[0].Labels, []Label{{"key", "tenant-1"}, {"code", ""}}) || groups[0].Agg.Sum != 7 {
		t.Errorf("plain tenant-1 by key,code: %+v %v", groups, err)
	}
	sel, _ = CompileSelector("tenant-1", []Matcher{{"code", MatchEqual, "500"}})
	if _, err := s.ReadGroups(now, "plain", sel, []string{"code"}, time.Minute, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("plain tenant-1 code=500: %v, want ErrNotFound", err)
	}
	if _, err := s.ReadGroups(now, "none", nil, []string{"code"}, time.Minute, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("no series: %v, want ErrNotFound", err)
	}
}

func TestReadGroupsRefusals(t *testing.T) {
	s, now := labelledStore(t)
	for _, c := range []struct {
		by   []string
		want error
	}{
		{[]string{"code", "code"}, ErrLabelTwice},
		{[]string{"__name__"}, ErrLabelName},
		{[]string{""}, ErrLabelName},
		{[]string{"a-b"}, ErrLabelName},
	} {
		if _, err := s.ReadGroups(now, "latency_ms", nil, c.by, time.Minute, nil, nil); !errors.Is(err, c.want) {
			t.Errorf("by %q: %v, want %v", c.by, err, c.want)
		}
		if _, err := s.ReadRangeGroups(now, "latency_ms", nil, c.by, time.Minute, time.Minute, nil, 0, nil); !errors.Is(err, c.want) {
			t.Errorf("range by %q: %v, want %v", c.by, err, c.want)
		}
	}
	if _, err := s.ReadGroups(now, "latency_ms", nil, []string{"code"}, 7*time.Second, nil, nil); !errors.Is(err, ErrBadWindow) {
		t.Errorf("bad window: %v", err)
	}
	if _, err := s.ReadGroups(now, "latency_ms", nil, []string{"code"}, time.Minute, []float64{2}, nil); !errors.Is(err, ErrBadQuantile) {
		t.Errorf("bad quantile: %v", err)
	}
}

// One group more than MaxGroups is refused, not answered; a range read over rings of many
// slots is refused sooner.
func TestReadGroupsTooMany(t *testing.T) {
	s := newTestStore(t, StoreConfig{MaxSeries: MaxGroups + 100, Metrics: map[string]RingConfig{"fine": {Slot: time.Second, Slots: 10_000}}})
	now := t0 + 299_999
	for i := range MaxGroups + 1 {
		if err := s.ObserveAt(now, Event{TS: now, Metric: "m", Key: seriesOf(t, "k", "id", strconv.Itoa(i)), Value: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReadGroups(now, "m", nil, []string{"id"}, time.Minute, nil, nil); !errors.Is(err, ErrTooManyGroups) {
		t.Errorf("%d groups: %v, want ErrTooManyGroups", MaxGroups+1, err)
	}
	sel, _ := CompileSelector("", []Matcher{{"id", MatchNotEqual, "0"}})
	if g, err := s.ReadGroups(now, "m", sel, []string{"id"}, time.Minute, nil, nil); err != nil || len(g) != MaxGroups {
		t.Errorf("%d groups: %d, %v", MaxGroups, len(g), err)
	}
	g, err := NewGroupPartials([]string{"id"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MergeGroupPartials(now, "m", func(string, int32) bool { return true }, time.Minute, g); !errors.Is(err, ErrTooManyGroups) {
		t.Errorf("partials: %v", err)
	}
	if err := g.Add([]string{"new"}, &Partial{}); !errors.Is(err, ErrTooManyGroups) {
		t.Errorf("Add past MaxGroups: %v", err)
	}
	limit := maxRangeCells / 10_000
	for i := range limit + 1 {
		if err := s.ObserveAt(now, Event{TS: now, Metric: "fine", Key: seriesOf(t, "k", "id", strconv.Itoa(i)), Value: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ReadRangeGroups(now, "fine", nil, []string{"id"}, time.Minute, time.Minute, nil, 0, nil); !errors.Is(err, ErrTooManyGroups) {
		t.Errorf("range, %d groups of 10,000 slots: %v, want ErrTooManyGroups", limit+1, err)
	}
	if _, err := s.ReadGroups(now, "fine", nil, []string{"id"}, time.Minute, nil, nil); err != nil {
		t.Errorf("window read, %d groups of 10,000 slots: %v", limit+1, err)
	}
	// A caller's cap below the read's own bound stops the scan at the first group past it.
	visited := 0
	if _, err := s.ReadRangeGroups(now, "fine", nil, []string{"id"}, time.Minute, time.Minute, nil, 3, func() bool { visited++; return false }); !errors.Is(err, ErrGroupLimit) || visited != 4 {
		t.Errorf("range capped at 3 groups of %d: %v after %d series, want ErrGroupLimit after 4", limit+1, err, visited)
	}
}

// pointEnds returns the ends (To) of points.
func pointEnds(points []Agg) []int64 {
	ends := make([]int64, len(points))
	for i, p := range points {
		ends[i] = p.To
	}
	return ends
}

// Each group of ReadRangeGroups is exactly ReadRangeMerged of the group's own selector.
func TestReadRangeGroupsEqualReadRangeMerged(t *testing.T) {
	s, now := labelledStore(t)
	qs := []float64{0.5, 0.99}
	sel, _ := CompileSelector("tenant-*", []Matcher{{"route", MatchNotEqual, "/search"}})
	by := []string{"route", "code"}
	for _, shape := range [][2]time.Duration{{time.Minute, 10 * time.Second}, {10 * time.Second, 10 * time.Second}, {5 * time.Minute, time.Minute}} {
		groups, err := s.ReadRangeGroups(now, "latency_ms", sel, by, shape[0], shape[1], qs, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ends, err := RangeEnds(s.RingConfig("latency_ms"), now, shape[0], shape[1]); err != nil || !slices.Equal(ends, pointEnds(groups[0].Points)) {
			t.Fatalf("%v: RangeEnds %v (%v), the points end at %v", shape, ends, err, pointEnds(groups[0].Points))
		}
		flat, err := s.ReadGroups(now, "latency_ms", sel, by, shape[0], qs, nil)
		if err != nil || len(flat) != len(groups) {
			t.Fatalf("%d range groups, %d groups: %v", len(groups), len(flat), err)
		}
		for i, g := range groups {
			if !reflect.DeepEqual(g.Labels, flat[i].Labels) {
				t.Fatalf("range group %v, group %v", g.Labels, flat[i].Labels)
			}
			want, err := s.ReadRangeMerged(now, "latency_ms", groupSelector(t, "tenant-*", []Matcher{{"route", MatchNotEqual, "/search"}}, g.Labels).Match, shape[0], shape[1], qs)
			if err != nil || len(want) != len(g.Points) {
				t.Fatalf("group %v: %d points, want %d (%v)", g.Labels, len(g.Points), len(want), err)
			}
			for j := range want {
				if !sameAgg(g.Points[j], want[j]) || g.Points[j].Series != want[j].Series {
					t.Errorf("%v group %v point %d: %+v, want %+v", shape, g.Labels, j, g.Points[j], want[j])
				}
			}
			// The last point is the window read.
			if last := g.Points[len(g.Points)-1]; last.Count != flat[i].Agg.Count || last.Max != flat[i].Agg.Max || !slices.Equal(last.Quantiles, flat[i].Agg.Quantiles) {
				t.Errorf("group %v: last point %+v, window %+v", g.Labels, last, flat[i].Agg)
			}
		}
	}
}

// Grouped partials of disjoint sets of series (a cluster's instances: here partitions),
// merged, and then passed through Sorted and Add (a peer's answer, encoded and decoded),
// answer exactly what ReadGroups over all of them answers.
func TestGroupPartialsMergeEqualsReadGroups(t *testing.T) {
	s, now := labelledStore(t)
	qs := []float64{0.5, 0.95}
	by := []string{"code", "route"}
	sel, _ := CompileSelector("", []Matcher{{"method", MatchNotEqual, "POST"}})
	want, err := s.ReadGroups(now, "latency_ms", sel, by, 5*time.Minute, qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var parts []*GroupPartials
	for p := range int32(4) {
		g, err := NewGroupPartials(by, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MergeGroupPartials(now, "latency_ms", func(k string, pt int32) bool { return pt == p && sel.Match(k) }, 5*time.Minute, g); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, g)
	}
	// Instance 0 merges 1 directly; 2 and 3 arrive as decoded answers.
	if err := parts[0].Merge(parts[1]); err != nil {
		t.Fatal(err)
	}
	for _, o := range parts[2:] {
		for _, pg := range o.Sorted() {
			p := pg.Partial // a copy, as a decoder makes
			if err := parts[0].Add(slices.Clone(pg.Values), &p); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := parts[0].Groups(s.Indexer("latency_ms"), qs)
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Labels, want[i].Labels) || !sameAgg(got[i].Agg, want[i].Agg) || got[i].Agg.Series != want[i].Agg.Series {
			t.Errorf("group %v: %+v, want %v %+v", got[i].Labels, got[i].Agg, want[i].Labels, want[i].Agg)
		}
	}
	other, _ := NewGroupPartials([]string{"route"}, true)
	if err := parts[0].Merge(other); err == nil {
		t.Error("merged groups by other labels")
	}
	if err := parts[0].Add([]string{"x"}, &Partial{}); err == nil {
		t.Error("added one value to groups by two labels")
	}
}

// Grouping a series allocates nothing once its group exists.
func TestGroupFoldAllocatesNothing(t *testing.T) {
	s, now := labelledStore(t)
	g, _ := NewGroupPartials([]string{"route", "code"}, false)
	all := func(string, int32) bool { return true }
	if err := s.MergeGroupPartials(now, "latency_ms", all, time.Minute, g); err != nil {
		t.Fatal(err)
	}
	var se *series
	for x := range s.eachSeries() {
		if HasLabels(x.key) {
			se = x
			break
		}
	}
	if n := testing.AllocsPerRun(100, func() { g.fold(se, now, 6) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
