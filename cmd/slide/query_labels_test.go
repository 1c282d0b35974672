package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/query"
	"github.com/slide-metrics/slide/window"
)

// labelledServer serves the query API over a store holding requests of two tenants,
// labelled by route and code (one series without a code), at 2025-11-30T08:01:00Z.
func labelledServer(t *testing.T) string {
	t.Helper()
	st, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 11, 30, 8, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	for i, r := range []struct {
		key, route, code string
		ms               float64
	}{
		{"tenant-1", "/pay", "200", 20}, {"tenant-1", "/pay", "200", 40}, {"tenant-2", "/pay", "200", 30},
		{"tenant-1", "/pay", "503", 900}, {"tenant-2", "/pay", "", 15}, {"tenant-2", "/login", "200", 5},
	} {
		ls := []window.Label{{Name: "route", Value: r.route}}
		if r.code != "" {
			ls = append(ls, window.Label{Name: "code", Value: r.code})
		}
		window.SortLabels(ls)
		series, err := window.AppendSeries(nil, r.key, ls)
		if err != nil {
			t.Fatal(err)
		}
		ts := t0.Add(time.Duration(i) * 10 * time.Second).UnixMilli()
		if err := st.ObserveAt(now.UnixMilli(), window.Event{TS: ts, Metric: "latency_ms", Key: string(series), Value: r.ms}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := query.New(query.Config{Store: st, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestQueryMatchAndBy runs slide query window, range, top and series with --match and --by
// over labelled series: a grouped window is one row a group with its labels in the first
// columns ("-" for a label its series lack), a grouped range one block a group, and top and
// series show each series' labels after its key.
func TestQueryMatchAndBy(t *testing.T) {
	addr := labelledServer(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"window", "--match", `route="/pay"`, "--by", "code", "--window", "1m", "--q", "p50"}, `latency_ms {route="/pay"} by code over 1m, [2025-11-30T08:00:10Z, 08:01:10Z)
  code  series  count  avg  min  max  rate/s  p50
     -       1      1   15   15   15    0.02   15
   200       2      2   35   30   40    0.04   30
   503       1      1  900  900  900    0.02  900
`},
		{[]string{"window", "--key", "tenant-1", "--match", `code=~"5.."`, "--window", "1m", "--q", "p99"}, `latency_ms tenant-1 {code=~"5.."} over 1m, [2025-11-30T08:00:10Z, 08:01:10Z)
series   1
count    1
sum      900
avg      900
min      900
max      900
rate/s   0.02
elapsed  50s
p99      900
`},
		{[]string{"range", "--match", `route="/pay"`, "--by", "key", "--window", "1m", "--step", "1m", "--q", "p50", "--plot", "max"}, `latency_ms {route="/pay"} by key: windows of 1m every 1m, 2 groups

{key="tenant-1"}: 2 series, [2025-11-30T07:56:10Z, 08:01:10Z)
   ▁█  max (max 900)
        to  count   rate/s    p50  max                       max
  07:57:10      0        0      -    -                          
  07:58:10      0        0      -    -                          
  07:59:10      0        0      -    -                          
  08:00:10      1  0.01667     20   20  █                       
  08:01:10      2     0.04  40.18  900  ████████████████████████

{key="tenant-2"}: 2 series, [2025-11-30T07:56:10Z, 08:01:10Z)
    █  max (max 30)
        to  count  rate/s  p50  max                       max
  07:57:10      0       0    -    -                          
  07:58:10      0       0    -    -                          
  07:59:10      0       0    -    -                          
  08:00:10      0       0    -    -                          
  08:01:10      2    0.04   15   30  ████████████████████████
`},
		{[]string{"top", "--by", "max", "--match", `route="/pay"`, "--q", "p50"}, `latency_ms: top 4 of 4 series by max over 5m, [2025-11-30T07:56:10Z, 08:01:10Z)
  #                                key  count    rate/s    p50  max
  1  tenant-1{code="503",route="/pay"}      1  0.003448    900  900
  2  tenant-1{code="200",route="/pay"}      2  0.006897  20.09   40
  3  tenant-2{code="200",route="/pay"}      1  0.003448     30   30
  4             tenant-2{route="/pay"}      1  0.003448     15   15
`},
		{[]string{"window", "--match", `route="/pay"`, "--by", "service", "--window", "1m", "--q", "p50"}, `latency_ms {route="/pay"} by service over 1m, [2025-11-30T08:00:10Z, 08:01:10Z)
warning: no selected series of latency_ms has the label "service", so it groups nothing: /v1/series?metric=latency_ms lists the labels, and by=key groups by the series' key
  service  series  count    avg  min  max  rate/s    p50
        -       4      4  246.2   15  900    0.08  29.89
`},
		// --by alone (sre.md: slide query window --metric latency_ms --by code): the title
		// names no selection, without the double space it had ("latency_ms  by code").
		{[]string{"window", "--by", "code", "--window", "1m", "--q", "p50"}, `latency_ms by code over 1m, [2025-11-30T08:00:10Z, 08:01:10Z)
  code  series  count  avg  min  max  rate/s    p50
     -       1      1   15   15   15    0.02     15
   200       3      3   25    5   40    0.06  29.89
   503       1      1  900  900  900    0.02    900
`},
		{[]string{"series", "--match", `code!="200"`}, `metric      key
latency_ms  tenant-1{code="503",route="/pay"}
latency_ms  tenant-2{route="/pay"}
`},
	} {
		out, errOut, err := runQuery(t, append(c.args, "--addr", addr, "--metric", "latency_ms")...)
		if c.args[0] == "series" {
			out, errOut, err = runQuery(t, append(c.args, "--addr", addr)...)
		}
		if err != nil {
			t.Fatalf("%v: %v %s", c.args, err, errOut)
		}
		if out != c.want {
			t.Errorf("slide query %s:\n%s\nwant\n%s", strings.Join(c.args, " "), out, c.want)
		}
	}
	_, _, err := runQuery(t, "window", "--addr", addr, "--metric", "latency_ms", "--match", `__name__="x"`)
	if err == nil || !strings.Contains(err.Error(), "metric=") {
		t.Errorf("--match __name__: %v", err)
	}
	_, _, err = runQuery(t, "window", "--addr", addr, "--metric", "latency_ms")
	if err == nil || !strings.Contains(err.Error(), "--match") {
		t.Errorf("no --key, --match or --by: %v", err)
	}
}
