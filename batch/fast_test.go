package batch

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A single aggregate asked through Aggs on the fast path is that aggregate (not Agg's
// default sum), for count and time windows, and matches the row-by-row path.
func TestRunAllOneAggsFastPath(t *testing.T) {
	path := writeTemp(t, "orders.csv", []byte(ordersCSVText(genOrders(3000, 1, 5), ",")))
	for _, j := range []Job{
		{Size: 100, Column: "amount", Aggs: []string{AggMax}},
		{Size: 100, Column: "amount", Aggs: []string{AggP95}},
		{Span: time.Minute, Column: "amount", Aggs: []string{AggP99}},
		{Span: time.Minute, Column: "amount", Aggs: []string{AggMin}, Best: BestMin},
	} {
		got, err := runAllFile(t, j, path)
		if err != nil {
			t.Fatal(err)
		}
		jj := j
		jj.SkipBad = true // the row-by-row path
		want, err := runAllFile(t, jj, path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(keys(got), keys(want)) || got.Results[0].Agg != j.Aggs[0] ||
			got.Results[0].StartLine != want.Results[0].StartLine || got.Results[0].EndLine != want.Results[0].EndLine {
			t.Errorf("%+v:\n fast %+v\n slow %+v", j, got.Results, want.Results)
		}
	}
}

// A time window over a CSV file takes the fast path, whose unsorted-time error names the
// file line as the row-by-row path does.
func TestRunAllFastPathErrorLines(t *testing.T) {
	path := writeTemp(t, "unsorted.csv", []byte("ts,amount\n1000,1\n\n2000,1\n1500,2\n"))
	_, err := runAllFile(t, Job{Span: time.Second, Column: "amount"}, path)
	if err == nil || !strings.Contains(err.Error(), "row 2 (line 5)") {
		t.Fatalf("got %v, want row 2 (line 5)", err)
	}
	_, slow := runAllFile(t, Job{Span: time.Second, Column: "amount", IDColumn: "ts"}, path)
	if slow == nil || slow.Error() != err.Error() {
		t.Fatalf("fast %v\nslow %v", err, slow)
	}
}
