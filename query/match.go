package query

// Label selection of the read routes (issue #27). match= holds PromQL label matchers as
// PromQL writes them inside a selector's braces (route="/pay",code=~"5.."), read by
// Prometheus' own parser and compiled with key= into a window.Selector; by= names the labels
// a grouped read (/v1/window, /v1/range) answers one aggregate per group of.

import (
	"context"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/internal/suggest"
	"github.com/slide-metrics/slide/jsonenc"
	"github.com/slide-metrics/slide/promsel"
	"github.com/slide-metrics/slide/window"
)

// MaxMatchBytes is the longest match= the read routes accept (promsel.MaxBytes).
const MaxMatchBytes = promsel.MaxBytes

// maxBy bounds the labels of by=.
const maxBy = 16

// parseMatch reads match= (empty: no matchers) with promsel, the parser usage rules'
// match: shares. __name__ is refused: the metric is metric=.
func parseMatch(s string) ([]window.Matcher, error) {
	ms, err := promsel.Parse(s, "metric=")
	if err != nil {
		return nil, badParam("match", "%s", strings.TrimPrefix(err.Error(), promsel.ErrMatchers.Error()+": "))
	}
	return ms, nil
}

// selectorParam compiles key (a key, a glob, or "" for any key) and match= into the
// selector a read filters series with, and returns match='s matchers too (a cluster read
// sends them to the other instances).
func selectorParam(v url.Values, key string) (*window.Selector, []window.Matcher, error) {
	ms, err := parseMatch(v.Get("match"))
	if err != nil {
		return nil, nil, err
	}
	sel, err := window.CompileSelector(key, ms)
	if err != nil {
		return nil, nil, badParam("match", "%s", clip(strings.TrimPrefix(err.Error(), "window: ")))
	}
	return sel, ms, nil
}

// byParam reads by=label,label (window.CheckBy): nil when absent or empty.
func byParam(v url.Values) ([]string, error) {
	s := v.Get("by")
	if s == "" {
		return nil, nil
	}
	by := strings.Split(s, ",")
	if len(by) > maxBy {
		return nil, badParam("by", "%d labels, at most %d", len(by), maxBy)
	}
	for i := range by {
		by[i] = strings.TrimSpace(by[i])
	}
	if err := window.CheckBy(by); err != nil {
		return nil, badParam("by", "%s: want label names separated by commas, such as by=route,code", clip(strings.TrimPrefix(err.Error(), "window: ")))
	}
	return by, nil
}

// appendSelection writes the members that say how series were selected and grouped, each
// preceded by a comma: "match" when given, "by" when grouped. An answer without them is
// byte for byte what it was before labels.
func appendSelection(b []byte, match string, by []string) []byte {
	if match != "" {
		b = append(b, `,"match":`...)
		b = jsonenc.AppendString(b, match)
	}
	if by != nil {
		b = append(b, `,"by":[`...)
		for i, name := range by {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, name)
		}
		b = append(b, ']')
	}
	return b
}

// appendLabels writes "labels":{name:value,...} of a group: a label a group's series do not
// have (value "") is left out, as Prometheus drops empty labels, so a group of the series
// without code shows no "code".
func appendLabels(b []byte, ls []window.Label) []byte {
	b = append(b, `"labels":{`...)
	n := 0
	for _, l := range ls {
		if l.Value == "" {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = jsonenc.AppendString(b, l.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, l.Value)
	}
	return append(b, '}')
}

// appendSeriesKey writes "key" of a listed series (/v1/top, /v1/series): its key label, and
// ,"labels":{...} after it when the series has labels besides key. An unlabelled series is
// written as before labels, and so is a string no door could have written as a labelled
// series (window.CheckSeries: a key holding a 0xFF byte, restored from an old snapshot).
func appendSeriesKey(b []byte, series string) []byte {
	b = append(b, `"key":`...)
	if !window.HasLabels(series) || window.CheckSeries(series, len(series)) != nil {
		return jsonenc.AppendString(b, series)
	}
	b = jsonenc.AppendString(b, window.SeriesKeyOf(series))
	b = append(b, `,"labels":{`...)
	n := 0
	window.EachLabel(series, func(name, value string) bool {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = jsonenc.AppendString(b, name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, value)
		return true
	})
	return append(b, '}')
}

// groupValues is the values of series string series' by-labels, as window groups it ("" for
// a label it has not).
func groupValues(series string, by []string) []string {
	vs := make([]string, len(by))
	for i, name := range by {
		vs[i] = window.LabelValue(series, name)
	}
	return vs
}

// appendAbsentBy appends a "warnings" entry for each by= label that no group has: a name no
// selected series carries (by=service where the service is the key) groups every series into
// one group without it, as PromQL's sum by does, silently there; here the answer says so and
// where the names are. labelsOf is group i's labels. more are further warnings of the read,
// written after those (one "warnings" member holds them all).
func appendAbsentBy(b []byte, metric string, by []string, n int, labelsOf func(i int) []window.Label, more ...string) []byte {
	first := true
	for _, name := range by {
		found := false
		for i := 0; i < n && !found; i++ {
			found = groupHas(labelsOf(i), name)
		}
		if found || n == 0 {
			continue
		}
		if first {
			b = append(b, `,"warnings":[`...)
		} else {
			b = append(b, ',')
		}
		first = false
		hint := "no selected series of " + metric + " has the label " + strconv.Quote(name) + ", so it groups nothing: /v1/series?metric=" + metric + " lists the labels"
		if name != "key" {
			hint += ", and by=key groups by the series' key"
		}
		b = jsonenc.AppendString(b, hint)
	}
	for _, m := range more {
		if first {
			b = append(b, `,"warnings":[`...)
		} else {
			b = append(b, ',')
		}
		first = false
		b = jsonenc.AppendString(b, m)
	}
	if !first {
		b = append(b, ']')
	}
	return b
}

// groupHas reports whether ls gives label name a value.
func groupHas(ls []window.Label, name string) bool {
	for _, l := range ls {
		if l.Name == name && l.Value != "" {
			return true
		}
	}
	return false
}

// absentLabel says, for a read of metric that match= left empty, which matcher names a
// label no series of metric has where a value is required (http_rout="/cart" for
// http_route, or an attribute --span-dimensions does not name): ": no series of M has the
// label …", with the nearest label and the labels there are; "" when every such label is
// found. One pass over the metric's series (every instance's in a cluster), taken only on
// this 404.
func (s *Server) absentLabel(ctx context.Context, metric string, ms []window.Matcher) string {
	var need []string
	for _, m := range ms {
		sel, err := window.CompileSelector("", []window.Matcher{m})
		if m.Name != window.KeyLabel && err == nil && !sel.Match("k") { // "k": a series without the label
			need = append(need, m.Name)
		}
	}
	if len(need) == 0 {
		return ""
	}
	var series []string
	if c := s.cluster(); c != nil {
		ids, missing, err := c.Keys(ctx, metric, "", nil, nil, 0)
		if err != nil || len(missing) > 0 {
			return "" // a partition unread may hold the label
		}
		for _, id := range ids {
			series = append(series, id.Key)
		}
	} else {
		series = s.store.Keys(metric, "")
	}
	have := map[string]bool{}
	for _, sr := range series {
		window.EachLabel(sr, func(n, _ string) bool { have[n] = true; return true })
	}
	for _, name := range need {
		if have[name] {
			continue
		}
		names := slices.Sorted(maps.Keys(have))
		msg := ": no series of " + metric + " has the label " + quote(clip(name))
		if len(names) == 0 {
			return msg + "; its series have no labels but key"
		}
		if ordered, near := suggest.Closest(name, names); near > 0 {
			msg += " (did you mean " + quote(ordered[0]) + "?)"
		}
		if len(names) > 20 {
			names = append(names[:20], "…")
		}
		return msg + "; its labels: " + strings.Join(names, ", ") + " (/v1/series?metric=" + metric + " lists them)"
	}
	return ""
}
