package backtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// accessLog is n requests of a few keys, as a server that logs each one when it ends stamps
// it: by its start, in the order of their ends (each takes up to slowest), and the same
// requests sorted by start.
func accessLog(n int, slowest time.Duration) (asLogged, sorted string) {
	rng := rand.New(rand.NewPCG(7, 11))
	type req struct {
		start, end time.Time
		key        string
	}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	reqs := make([]req, n)
	for i := range reqs {
		start := t0.Add(time.Duration(i) * 7 * time.Millisecond)
		reqs[i] = req{start, start.Add(time.Duration(rng.Int64N(int64(slowest)))), fmt.Sprintf("u%d", rng.IntN(5))}
	}
	write := func() string {
		var b strings.Builder
		b.WriteString("ts,key\n")
		for _, r := range reqs {
			fmt.Fprintf(&b, "%s,%s\n", r.start.Format(time.RFC3339Nano), r.key)
		}
		return b.String()
	}
	sorted = write()
	slices.SortStableFunc(reqs, func(a, b req) int { return a.end.Compare(b.end) })
	return write(), sorted
}

func replayReordered(t *testing.T, cfg Config, log string, within time.Duration) ([]Report, error) {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := NewReorder(within, func(req Request) error { return r.Replay(context.Background(), req) })
	if err := ReadLog(strings.NewReader(log), o.Add); err != nil {
		return nil, err
	}
	if err := o.Flush(); err != nil {
		return nil, err
	}
	return r.Reports(), nil
}

// TestReorderReplaysALogWrittenAtEachEnd: a log stamped with starts and written at ends (up to
// 3 s later) replays with a reorder window of 3 s exactly as the same log sorted; a window
// shorter than the disorder stops at a line, saying how far back it is and the window.
func TestReorderReplaysALogWrittenAtEachEnd(t *testing.T) {
	cfg := Config{Policies: []limiter.Policy{
		{Name: "log", Algorithm: limiter.SlidingLog, Limit: 40, Window: time.Second},
		{Name: "bucket", Algorithm: limiter.TokenBucket, Capacity: 30, RefillPerSecond: 25},
	}}
	asLogged, sorted := accessLog(20_000, 3*time.Second)
	if _, err := replayLog(t, cfg, asLogged); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("the log as written, not reordered: %v, want ErrUnsorted", err)
	}
	want, err := replayLog(t, cfg, sorted)
	if err != nil {
		t.Fatal(err)
	}
	if want[0].Denied == 0 || want[1].Denied == 0 {
		t.Fatalf("nothing denied (%+v): the comparison would prove little", want)
	}
	got, err := replayReordered(t, cfg, asLogged, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reordered replay:\n%+v\nwant the sorted log's\n%+v", got, want)
	}
	_, err = replayReordered(t, cfg, asLogged, 500*time.Millisecond)
	if !errors.Is(err, ErrUnsorted) || !strings.Contains(err.Error(), "line ") || !strings.Contains(err.Error(), "reorder window 500ms") {
		t.Errorf("a window shorter than the disorder: %v, want ErrUnsorted naming the line and the window", err)
	}
}

// TestReorderKeepsEqualTimesInLogOrder: requests of one instant are handed on as the log has
// them, so a replay that names policies per line is the sorted log's.
func TestReorderKeepsEqualTimesInLogOrder(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	var got []int64
	o := NewReorder(time.Second, func(r Request) error { got = append(got, r.Line); return nil })
	for i, d := range []time.Duration{500, 0, 500, 0, 2000, 500} {
		if err := o.Add(Request{Time: t0.Add(d * time.Millisecond), Line: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{2, 4, 1, 3, 6, 5}; !slices.Equal(got, want) {
		t.Errorf("handed on lines %v, want %v", got, want)
	}
}
