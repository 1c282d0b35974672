package window

import (
	"errors"
	"strings"
	"testing"
)

func TestSeriesString(t *testing.T) {
	ls := []Label{{"route", "/pay"}, {"code", "200"}, {"empty", ""}, {"method", "GET"}}
	SortLabels(ls)
	b, err := AppendSeries(nil, "tenant-1", ls)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if want := "tenant-1\xffcode=200\xffmethod=GET\xffroute=/pay"; s != want {
		t.Fatalf("series string %q, want %q", s, want)
	}
	if k := SeriesKeyOf(s); k != "tenant-1" {
		t.Errorf("key %q", k)
	}
	var got []string
	EachLabel(s, func(n, v string) bool { got = append(got, n+"="+v); return true })
	if strings.Join(got, ",") != "code=200,method=GET,route=/pay" {
		t.Errorf("labels %v", got)
	}
	for name, want := range map[string]string{"key": "tenant-1", "code": "200", "route": "/pay", "absent": "", "a": ""} {
		if v := LabelValue(s, name); v != want {
			t.Errorf("LabelValue(%q) = %q, want %q", name, v, want)
		}
	}
	if err := CheckSeries(s, 256); err != nil {
		t.Errorf("CheckSeries(%q): %v", s, err)
	}
	if b, _ := AppendSeries(nil, "tenant-1", nil); string(b) != "tenant-1" || HasLabels(string(b)) {
		t.Errorf("no labels: %q", b)
	}
}

func TestSeriesStringRefusals(t *testing.T) {
	long := strings.Repeat("v", MaxLabelValueLen+1)
	many := make([]Label, MaxLabels+1)
	for i := range many {
		many[i] = Label{string(rune('a'+i)) + "x", "1"}
	}
	for _, c := range []struct {
		ls   []Label
		want error
	}{
		{[]Label{{"key", "x"}}, ErrLabelName},
		{[]Label{{"__name__", "x"}}, ErrLabelName},
		{[]Label{{"1a", "x"}}, ErrLabelName},
		{[]Label{{"a-b", "x"}}, ErrLabelName},
		{[]Label{{"a", "x"}, {"a", "y"}}, ErrLabelTwice},
		{[]Label{{"a", long}}, ErrLabelValue},
		{[]Label{{"a", "\xff"}}, ErrLabelValue},
		{[]Label{{"a", "x\x00"}}, ErrLabelValue},
		{[]Label{{"a", "\u202e"}}, ErrLabelValue},
		{many, ErrLabelCount},
	} {
		if _, err := AppendSeries(nil, "k", c.ls); !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want %v", c.ls, err, c.want)
		}
	}
	for _, s := range []string{"", "k\xff", "k\xffa", "k\xff=1", "k\xffb=1\xffa=1", "k\xffa=1\xffa=2", "k\xffa=", "\xffa=1", "k\xff__x=1", "k\xffa=\x00"} {
		if CheckSeries(s, 256) == nil {
			t.Errorf("CheckSeries(%q) admitted it", s)
		}
	}
}

func TestValidLabelNameBytes(t *testing.T) {
	for _, n := range []string{"", "a", "_x", "route", "a1", "key", "keys", "__name__", "_", "1a", "a-b", "é"} {
		if got, want := ValidLabelNameBytes([]byte(n)), ValidLabelName(n); got != want {
			t.Errorf("ValidLabelNameBytes(%q) = %v, ValidLabelName says %v", n, got, want)
		}
	}
}

func TestAppendSeriesAllocatesNothing(t *testing.T) {
	ls := []Label{{"code", "200"}, {"route", "/pay"}}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		SortLabels(ls)
		buf, _ = AppendSeries(buf[:0], "tenant-1", ls)
		_ = SeriesKeyOf(string(buf))
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
