package promsel_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/promsel"
	"github.com/slide-metrics/slide/window"
)

func TestParse(t *testing.T) {
	ms, err := promsel.Parse(`route="/pay",span_kind!="SPAN_KIND_CLIENT",code=~"5..",method!~"GET|HEAD"`, "metric=")
	if err != nil {
		t.Fatal(err)
	}
	want := []window.Matcher{
		{Name: "route", Op: window.MatchEqual, Value: "/pay"},
		{Name: "span_kind", Op: window.MatchNotEqual, Value: "SPAN_KIND_CLIENT"},
		{Name: "code", Op: window.MatchRegexp, Value: "5.."},
		{Name: "method", Op: window.MatchNotRegexp, Value: "GET|HEAD"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %v, want %v", ms, want)
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("matcher %d: got %v, want %v", i, ms[i], want[i])
		}
	}
	if ms, err := promsel.Parse("", "metric="); ms != nil || err != nil {
		t.Errorf("empty: %v, %v; want none", ms, err)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, c := range []struct{ in, param, want string }{
		{`code=`, "metric=", "parse error"},
		{`code="5"} or {x="y"`, "metric=", "want PromQL label matchers"},
		{`__name__="latency_ms"`, "metric:", "the metric is given by metric:, not by a __name__ matcher"},
		{`"latency_ms"`, "metric=", "given by metric="},
		{strings.Repeat("a", promsel.MaxBytes+1), "metric=", "at most 4096"},
	} {
		_, err := promsel.Parse(c.in, c.param)
		if !errors.Is(err, promsel.ErrMatchers) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.40q): %v, want an ErrMatchers saying %q", c.in, err, c.want)
		}
	}
}
