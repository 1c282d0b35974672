package window

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// series builds a series string from key and name=value pairs (any order).
func seriesOf(tb testing.TB, key string, kv ...string) string {
	tb.Helper()
	var ls []Label
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, Label{kv[i], kv[i+1]})
	}
	SortLabels(ls)
	b, err := AppendSeries(nil, key, ls)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestSelectorMatch(t *testing.T) {
	bare := "tenant-1"
	pay := seriesOf(t, "tenant-1", "route", "/pay", "code", "503", "method", "GET")
	ok := seriesOf(t, "tenant-2", "route", "/pay", "code", "200")
	login := seriesOf(t, "tenant-1", "route", "/login", "span_kind", "SPAN_KIND_CLIENT")
	all := []string{bare, pay, ok, login}
	for _, c := range []struct {
		name string
		key  string
		ms   []Matcher
		want []string // of all
	}{
		{"nothing", "", nil, all},
		{"exact key: every series of the key", "tenant-1", nil, []string{bare, pay, login}},
		{"key glob on the key only", "tenant-*", nil, all},
		{"key glob anchored at the key's end", "*-1", nil, []string{bare, pay, login}},
		{"key label", "", []Matcher{{"key", MatchEqual, "tenant-2"}}, []string{ok}},
		{"key label regexp", "", []Matcher{{"key", MatchRegexp, "tenant-[12]"}}, all},
		{"key label !=", "", []Matcher{{"key", MatchNotEqual, "tenant-1"}}, []string{ok}},
		{"key parameter and key label", "tenant-*", []Matcher{{"key", MatchNotRegexp, ".*2"}}, []string{bare, pay, login}},
		{"equal", "", []Matcher{{"route", MatchEqual, "/pay"}}, []string{pay, ok}},
		{"not equal includes absent", "", []Matcher{{"route", MatchNotEqual, "/pay"}}, []string{bare, login}},
		{"empty: absent", "", []Matcher{{"code", MatchEqual, ""}}, []string{bare, login}},
		{"not empty: present", "", []Matcher{{"code", MatchNotEqual, ""}}, []string{pay, ok}},
		{"regexp anchored", "", []Matcher{{"code", MatchRegexp, "5.."}}, []string{pay}},
		{"regexp anchored at both ends", "", []Matcher{{"code", MatchRegexp, "0"}}, nil},
		{"regexp prefix needs .*", "", []Matcher{{"code", MatchRegexp, "5"}}, nil},
		{"regexp any includes absent", "", []Matcher{{"code", MatchRegexp, ".*"}}, all},
		{"regexp non-empty", "", []Matcher{{"code", MatchRegexp, ".+"}}, []string{pay, ok}},
		{"regexp matching empty includes absent", "", []Matcher{{"code", MatchRegexp, "2..|"}}, []string{bare, ok, login}},
		{"not regexp includes absent", "", []Matcher{{"code", MatchNotRegexp, "5.."}}, []string{bare, ok, login}},
		{"alternation", "", []Matcher{{"route", MatchRegexp, "/login|/pay"}}, []string{pay, ok, login}},
		{"issue example", "", []Matcher{{"route", MatchEqual, "/pay"}, {"span_kind", MatchNotEqual, "SPAN_KIND_CLIENT"}, {"code", MatchRegexp, "5.."}}, []string{pay}},
		{"two matchers on one label", "", []Matcher{{"code", MatchRegexp, "[25].."}, {"code", MatchNotEqual, "200"}}, []string{pay}},
		{"label sorting after every label", "", []Matcher{{"zzz", MatchEqual, ""}, {"aaa", MatchEqual, ""}}, all},
		{"exact key and labels", "tenant-1", []Matcher{{"route", MatchRegexp, "/p.*"}}, []string{pay}},
		{"exact key and absent label", "tenant-1", []Matcher{{"route", MatchEqual, ""}}, []string{bare}},
	} {
		sel, err := CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []string
		for _, s := range all {
			if sel.Match(s) {
				got = append(got, s)
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: matched %q, want %q", c.name, got, c.want)
		}
	}
	var nilSel *Selector
	if !nilSel.Match(pay) {
		t.Error("a nil selector matches nothing")
	}
}

func TestSelectorExactKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		ms   []Matcher
		want string // "" for none
	}{
		{"tenant-1", nil, "tenant-1"},
		{"tenant-1", []Matcher{{"code", MatchEqual, "500"}}, "tenant-1"},
		{"tenant-*", nil, ""},
		{"", nil, ""},
		{"", []Matcher{{"key", MatchEqual, "tenant-2"}}, "tenant-2"},
		{"", []Matcher{{"key", MatchRegexp, "tenant-2"}}, "tenant-2"},
		{"", []Matcher{{"key", MatchRegexp, "tenant-2|tenant-3"}}, ""},
		{"", []Matcher{{"key", MatchNotEqual, "tenant-2"}}, ""},
		{"", []Matcher{{"key", MatchEqual, ""}}, ""},
	} {
		sel, err := CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		k, ok := sel.ExactKey()
		if ok != (c.want != "") || k != c.want {
			t.Errorf("%q %v: ExactKey %q %v, want %q", c.key, c.ms, k, ok, c.want)
		}
	}
}

func TestCompileSelectorRefusals(t *testing.T) {
	for _, m := range []Matcher{
		{"code", MatchRegexp, "5.("},
		{"code", MatchNotRegexp, "*"},
		{"code", MatchRegexp, "\xff"},
		{"__name__", MatchEqual, "latency_ms"},
		{"", MatchEqual, "x"},
		{"1code", MatchEqual, "x"},
		{"http-route", MatchEqual, "x"},
		{"code", MatchOp(9), "x"},
	} {
		_, err := CompileSelector("", []Matcher{{"route", MatchEqual, "/pay"}, m})
		if !errors.Is(err, ErrMatcher) || !strings.Contains(err.Error(), m.String()) {
			t.Errorf("%v: %v, want ErrMatcher naming it", m, err)
		}
	}
	// A value that parses alone is anchored whole, even if it could close the group.
	sel, err := CompileSelector("", []Matcher{{"code", MatchRegexp, `\Qa)|(b`}})
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Match(seriesOf(t, "k", "code", "a)|(b")) || sel.Match(seriesOf(t, "k", "code", "a")) {
		t.Error(`\Q…: not the quoted literal`)
	}
}

// TestMatcherFastPaths checks which shape each expression compiles to, and that it
// answers what the regexp answers on values made for it.
func TestMatcherFastPaths(t *testing.T) {
	values := []string{"", "5", "50", "500", "503", "5031", "x500", "foo", "foobar", "barfoo", "xfoox", "fo",
		"GET", "POST", "get", "é", "éé", "aé", "\xff", "\xff\xff", "5\xff\xff", "/api/v1/pay", "/api/v2/pay", "a|b", "a", "b", "ab"}
	for _, c := range []struct {
		re   string
		kind matchKind
	}{
		{"", kindEqual},
		{"foo", kindEqual},
		{"(foo)", kindEqual},
		{"a|b", kindSet},
		{"GET|POST|PUT", kindSet},
		{"a|", kindSet},
		{"(GET|POST)", kindSet},
		{"a0|a1|a2|a3|a4|a5|a6|a7|a8|a9|b0|b1|b2|b3|b4|b5|b6", kindSet},
		{".*", kindAny},
		{"(.*)", kindAny},
		{".*?", kindAny},
		{".+", kindNonEmpty},
		{"foo.*", kindPrefix},
		{".*foo", kindSuffix},
		{".*foo.*", kindContains},
		{"5..", kindSeq},
		{"5.{2}", kindSeq},
		{".5.", kindSeq},
		{"foo.+", kindSeq},
		{"a.b.*", kindSeq},
		{"/api/v.*/pay", kindRegexp},
		{"(?i)get", kindRegexp},
		{"[25]..", kindRegexp},
		{"\uFFFD", kindRegexp},
		{"\\x{FFFD}.*", kindRegexp},
		{"^foo$", kindRegexp},
		{"(?-s:.)*", kindRegexp},
		{"a\\|b", kindEqual},
	} {
		vm, err := compileMatcher(Matcher{"l", MatchRegexp, c.re})
		if err != nil {
			t.Fatalf("%q: %v", c.re, err)
		}
		if vm.kind != c.kind {
			t.Errorf("%q: kind %d, want %d", c.re, vm.kind, c.kind)
		}
		plain := regexp.MustCompile("^(?s:" + c.re + ")$")
		for _, v := range values {
			if got, want := vm.match(v), plain.MatchString(v); got != want {
				t.Errorf("%q on %q: %v, regexp says %v", c.re, v, got, want)
			}
		}
	}
}

// TestSelectorMatchesRegexp is the differential test: over generated series strings and
// matchers, Match answers what the plain regexps over each label's value answer.
func TestSelectorMatchesRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	names := []string{"code", "method", "route", "zone"}
	vals := []string{"200", "204", "500", "503", "GET", "POST", "/pay", "/payments", "/login", "eu-1", "é", "a.b"}
	exprs := []string{"", ".*", ".+", "5..", "2.*", ".*0", ".*a.*", "GET|POST", "/pay|/login", "/pay.*", "(?i)get", "[0-9]+", "é|a.b", "a\\.b", "..", ".{3}", "(5|2)0.", "/p.y.*"}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	for range 2000 {
		kv := []string{}
		for _, n := range names {
			if rng.IntN(3) > 0 {
				kv = append(kv, n, pick(vals))
			}
		}
		key := fmt.Sprintf("tenant-%d", rng.IntN(3))
		s := seriesOf(t, key, kv...)
		ms := make([]Matcher, 1+rng.IntN(3))
		for i := range ms {
			ms[i] = Matcher{Name: pick(append(names, "key")), Op: MatchOp(rng.IntN(4)), Value: pick(append(exprs, vals...))}
		}
		sel, err := CompileSelector("", ms)
		if err != nil {
			t.Fatal(err)
		}
		want := true
		for _, m := range ms {
			v := LabelValue(s, m.Name)
			var ok bool
			switch m.Op {
			case MatchEqual, MatchNotEqual:
				ok = v == m.Value
			default:
				ok = regexp.MustCompile("^(?s:" + m.Value + ")$").MatchString(v)
			}
			if m.Op == MatchNotEqual || m.Op == MatchNotRegexp {
				ok = !ok
			}
			want = want && ok
		}
		if got := sel.Match(s); got != want {
			t.Fatalf("%v on %q: %v, want %v", ms, s, got, want)
		}
	}
}

func TestSelectorMatchAllocatesNothing(t *testing.T) {
	sel, err := CompileSelector("tenant-*", []Matcher{
		{"route", MatchEqual, "/pay"}, {"code", MatchRegexp, "5.."}, {"method", MatchRegexp, "GET|POST"},
		{"zone", MatchRegexp, "eu-.*|us-[0-9]"}, {"span_kind", MatchNotEqual, "SPAN_KIND_CLIENT"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := seriesOf(t, "tenant-7", "route", "/pay", "code", "503", "method", "GET", "zone", "us-1")
	if n := testing.AllocsPerRun(100, func() {
		if !sel.Match(s) {
			t.Fatal("no match")
		}
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// FuzzSelectorMatch holds the string fast paths to the regexp they stand for: for any
// expression that compiles, a matcher answers on any value what ^(?s:expr)$ answers, and a
// selector on a series holding the value as a label (or not holding it, for "").
func FuzzSelectorMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"5..", "503"}, {"5..", "5031"}, {"GET|POST", "POST"}, {".*", ""}, {".+", ""}, {"foo.*", "foobar"},
		{".*foo", "barfoo"}, {".*foo.*", "xfoox"}, {"/api/v.*/pay", "/api/v1/pay"}, {"a|", ""}, {"(?i)get", "GET"},
		{"5.{2}", "5é\xff"}, {"\uFFFD", "\xff"}, {"a.b.*", "a\xffbc"}, {"SPAN_KIND_CLIENT", "SPAN_KIND_SERVER"},
		{`\Qa)|(b`, "a)|(b"}, {"(a|b)+", "abab"}, {"^x$", "x"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, expr, v string) {
		vm, err := compileMatcher(Matcher{"l", MatchRegexp, expr})
		if err != nil {
			return
		}
		if got, want := vm.match(v), vm.re.MatchString(v); got != want {
			t.Fatalf("%q on %q: %v (kind %d), regexp says %v", expr, v, got, vm.kind, want)
		}
		// The same through a selector, the value as a series' label (absent when "").
		if strings.IndexByte(v, LabelSep) >= 0 {
			return
		}
		series := "k"
		if v != "" {
			series += "\xffl=" + v
		}
		sel, err := CompileSelector("", []Matcher{{"l", MatchNotRegexp, expr}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sel.Match(series), !vm.re.MatchString(v); got != want {
			t.Fatalf("!~%q on %q: %v, regexp says %v", expr, series, got, want)
		}
	})
}

// readSelected reads sel as a reader without the exact-key path would: ReadMerged.
func readSelectedScan(s *Store, now int64, metric string, sel *Selector, w time.Duration, qs []float64) (Agg, error) {
	return s.ReadMerged(now, metric, sel.Match, w, qs)
}

func TestReadSelected(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	now := t0 + 299_999
	obs := func(metric, series string, v float64, feed int32) {
		t.Helper()
		if err := s.ObserveAt(now, Event{TS: now - 1000, Metric: metric, Key: series, Value: v, Feed: FeedOf(feed)}); err != nil {
			t.Fatal(err)
		}
	}
	qs := []float64{0.5, 0.99}
	// plain has no labelled series: an exact key is one lookup.
	obs("plain", "tenant-1", 10, 0)
	obs("plain", "tenant-2", 20, 0)
	obs("labelled", "tenant-1", 10, 0)
	obs("labelled", seriesOf(t, "tenant-1", "route", "/pay"), 30, 1)
	obs("labelled", seriesOf(t, "tenant-1", "route", "/login"), 40, 1)
	obs("labelled", seriesOf(t, "tenant-2", "route", "/pay"), 50, 2)
	if n := s.LabelledSeries("plain"); n != 0 {
		t.Fatalf("plain: %d labelled series", n)
	}
	if n := s.LabelledSeries("labelled"); n != 3 {
		t.Fatalf("labelled: %d labelled series, want 3", n)
	}
	for _, c := range []struct {
		metric, key string
		ms          []Matcher
		count       uint64
		series      int
	}{
		{"plain", "tenant-1", nil, 1, 1},
		{"plain", "tenant-1", []Matcher{{"route", MatchEqual, ""}}, 1, 1},
		{"plain", "tenant-1", []Matcher{{"route", MatchEqual, "/pay"}}, 0, 0},
		{"plain", "", []Matcher{{"key", MatchEqual, "tenant-2"}}, 1, 1},
		{"plain", "tenant-*", nil, 2, 2},
		{"labelled", "tenant-1", nil, 3, 3},
		{"labelled", "tenant-1", []Matcher{{"route", MatchEqual, ""}}, 1, 1},
		{"labelled", "", []Matcher{{"route", MatchEqual, "/pay"}}, 2, 2},
		{"labelled", "tenant-*", []Matcher{{"route", MatchRegexp, "/p.*"}}, 2, 2},
	} {
		sel, err := CompileSelector(c.key, c.ms)
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.ReadSelected(now, c.metric, sel, time.Minute, qs, nil)
		if c.series == 0 {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s %q %v: %v, want ErrNotFound", c.metric, c.key, c.ms, err)
			}
			continue
		}
		want, werr := readSelectedScan(s, now, c.metric, sel, time.Minute, qs)
		if err != nil || werr != nil || a.Count != c.count || a.Series != c.series || !sameAgg(a, want) {
			t.Errorf("%s %q %v: %+v %v, want count %d of %d series, as the scan %+v", c.metric, c.key, c.ms, a, err, c.count, c.series, want)
		}
		pts, err := s.ReadRangeSelected(now, c.metric, sel, time.Minute, 10*time.Second, qs, nil)
		wpts, _ := s.ReadRangeMerged(now, c.metric, sel.Match, time.Minute, 10*time.Second, qs)
		if err != nil || len(pts) != len(wpts) || !sameAgg(pts[len(pts)-1], wpts[len(wpts)-1]) {
			t.Errorf("%s %q %v: range %v, want %v", c.metric, c.key, c.ms, err, wpts)
		}
	}
	// The count follows the series: a refused event's new series, a dropped feed, eviction.
	if err := s.ObserveAt(now, Event{TS: now - 10*60_000, Metric: "labelled", Key: seriesOf(t, "tenant-9", "route", "/x"), Value: 1}); !errors.Is(err, ErrLate) {
		t.Fatal(err)
	}
	if n := s.LabelledSeries("labelled"); n != 3 {
		t.Fatalf("after a refused event: %d labelled series, want 3", n)
	}
	s.DropPartition(1)
	if n := s.LabelledSeries("labelled"); n != 1 {
		t.Fatalf("after dropping feed 1: %d labelled series, want 1", n)
	}
	s.Evict(now + 10*60_000)
	if n := s.LabelledSeries("labelled"); n != 0 || s.Len() != 0 {
		t.Fatalf("after eviction: %d labelled series, %d series", n, s.Len())
	}
}

// Routes, methods and codes of the labelled benchmark and budget stores.
var (
	benchRoutes  = []string{"/pay", "/login", "/search", "/api/v1/orders"}
	benchMethods = []string{"GET", "POST"}
	benchCodes   = []string{"200", "404", "500", "503"}
)

// fillLabelled is fillSparse with each series' key followed, when labelled, by three labels
// (route, method and code, as an OTLP span's attributes give them): the same events, the
// same keys, only the series strings differ.
func fillLabelled(tb testing.TB, n, events int, labelled bool) (*Store, int64) {
	tb.Helper()
	s, err := NewStore(StoreConfig{MaxSeries: n})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(19, 19))
	now := t0 + 299_999
	var buf []byte
	for i := range n {
		key := fmt.Sprintf("tenant-%d", i)
		if labelled {
			buf, err = AppendSeries(buf[:0], key, []Label{
				{"code", benchCodes[i%4]}, {"method", benchMethods[i/4%2]}, {"route", benchRoutes[i/8%4]},
			})
			if err != nil {
				tb.Fatal(err)
			}
			key = string(buf)
		}
		ev := Event{Metric: "latency_ms", Key: key, Feed: FeedOf(int32(i % 8))}
		for j := range events {
			ev.TS = t0 + int64(j*30/events)*10_000 + int64(rng.IntN(10_000))
			ev.Value = 1 + 500*rng.Float64()
			if err := s.ObserveAt(now, ev); err != nil {
				tb.Fatalf("series %d event %d: %v", i, j, err)
			}
		}
	}
	return s, now
}

// labelledBytesPerSeries is the heap growth after GC per series of fillLabelled.
func labelledBytesPerSeries(tb testing.TB, n, events int, labelled bool) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, _ := fillLabelled(tb, n, events, labelled)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestLabelledSeriesMemoryBudget holds issue #27's budget: a series with three labels
// besides its key costs at most 64 bytes of heap more than the same series with its key
// alone (the series string is the only difference: no label is kept apart).
func TestLabelledSeriesMemoryBudget(t *testing.T) {
	bare := labelledBytesPerSeries(t, 100_000, 3, false)
	labelled := labelledBytesPerSeries(t, 100_000, 3, true)
	t.Logf("key alone %.0f B/series, key and 3 labels %.0f B/series: %+.0f B", bare, labelled, labelled-bare)
	if labelled-bare > 64 {
		t.Errorf("3 labels cost %.0f B/series more than a key alone, budget 64", labelled-bare)
	}
}

// An event into an existing labelled series allocates nothing, as into one without labels.
func TestObserveLabelledAllocatesNothing(t *testing.T) {
	s := newTestStore(t, StoreConfig{})
	ev := Event{TS: t0, Metric: "latency_ms", Key: seriesOf(t, "tenant-1", "route", "/pay", "method", "GET", "code", "200"), Value: 20}
	for range 100 {
		if err := s.ObserveAt(t0, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { _ = s.ObserveAt(t0, ev) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
