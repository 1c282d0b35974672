package batch

import (
	"context"
	"errors"
	"fmt"
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

// A group-by job steps its rows in chunks, group by group: the same results as the row order
// (a series output forces that), across chunk boundaries, with fewer and with more groups than
// rows in a chunk, and the same error (the earliest row's) when windows overflow.
func TestGroupByChunksMatchRowOrder(t *testing.T) {
	ctx := context.Background()
	noSeries := func(SeriesRow) error { return nil }
	run := func(data string, j Job, series func(SeriesRow) error) (Report, error) {
		return j.RunAll(ctx, strings.NewReader(data), "-", series)
	}
	defer func(n int) { groupChunk = n }(groupChunk)
	groupChunk = 500
	for _, groups := range []int{1, 30, 2_000} {
		data := ordersCSVText(genOrders(3*groupChunk+123, groups, uint64(groups)), ",")
		for _, j := range []Job{
			{Size: 2, Column: "amount", GroupBy: "region", Aggs: []string{AggSum, AggP95}},
			{Span: time.Minute, Column: "amount", GroupBy: "region", Aggs: []string{AggMax, AggAvg}, Best: BestMin, IDColumn: "order_id"},
		} {
			got, err := run(data, j, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, err := run(data, j, noSeries)
			if err != nil {
				t.Fatal(err)
			}
			// (printed: a group without a window has a NaN best, which DeepEqual never equals)
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Fatalf("%d groups, %+v: chunked and row order differ (%d vs %d results)", groups, j, len(got.Results), len(want.Results))
			}
		}
	}
	// Overflow: group b (created first, so stepped first in each chunk) overflows at a later
	// row than group a; the error is a's, as in row order.
	var b strings.Builder
	b.WriteString("g,v\n")
	for i := range 1000 {
		g, v := "b", "1"
		if i%2 == 1 {
			g = "a"
		}
		if g == "b" && i >= 900 || g == "a" && i >= 701 {
			v = "1.5e308"
		}
		fmt.Fprintf(&b, "%s,%s\n", g, v)
	}
	j := Job{Size: 3, Column: "v", GroupBy: "g"}
	_, err := run(b.String(), j, nil)
	_, want := run(b.String(), j, noSeries)
	if err == nil || want == nil || err.Error() != want.Error() || !errors.Is(err, ErrOverflow) || !strings.Contains(err.Error(), "row 703 ") {
		t.Fatalf("chunked %v\nrow order %v", err, want)
	}
}
