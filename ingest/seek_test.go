package ingest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// TestRestoreStartReadsWholeBatches holds the restore search to its answer (one past the
// last record stamped before the span that precedes the first record inside it) over record
// batches of different shapes, and to few fetches: a probe reads every record of the batch
// a fetch answers with, so the search settles inside a batch without fetching it again for
// each halving, and a log wholly inside the span answers at its first record.
func TestRestoreStartReadsWholeBatches(t *testing.T) {
	const (
		old = 'o' // two hours before now: before the span
		in  = 'n' // now: inside it
		fut = 'f' // an hour ahead: beyond the skew, tells nothing
	)
	run := func(kind byte, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = kind
		}
		return string(b)
	}
	small := make([]string, 50) // 50 batches of 7, the span starting at record 173
	for i := range small {
		for j := range 7 {
			if i*7+j < 173 {
				small[i] += "o"
			} else {
				small[i] += "n"
			}
		}
	}
	cases := []struct {
		name       string
		batches    []string
		want       int64
		maxFetches int
	}{
		{"all inside", []string{run(in, 200), run(in, 200), run(in, 200)}, 0, 1},
		{"all before", []string{run(old, 200), run(old, 200), run(old, 200)}, 600, 2},
		{"inside a batch", []string{run(old, 300), run(old, 150) + run(in, 150), run(in, 300)}, 450, 4},
		{"at a batch boundary", []string{run(old, 300), run(in, 300)}, 300, 2},
		{"one batch", []string{run(old, 1000) + run(in, 1000)}, 1000, 1},
		{"future head", []string{run(fut, 1), run(old, 300), run(in, 1)}, 301, 3},
		{"future records inside", []string{run(old, 100) + run(fut, 3) + run(old, 50) + run(in, 10)}, 153, 1},
		{"small batches", small, 173, 6},
	}
	cl := kafkatest.Start(t, "events", len(cases))
	now := time.Now()
	for p, tc := range cases {
		for _, b := range tc.batches {
			msgs := make([]kafka.Message, len(b))
			for i := range b {
				ts := now
				switch b[i] {
				case old:
					ts = now.Add(-2 * time.Hour)
				case fut:
					ts = now.Add(time.Hour)
				}
				msgs[i] = kafka.Message{Time: ts, Value: fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"m","value":1}`, ts.UnixMilli())}
			}
			cl.ProduceTo(t, p, msgs...)
		}
	}
	c, err := New(testConfig(cl, "search"), newTestStore(t, 0), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	end := logEnd(t, cl, cl.Topic)
	for p, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := &prober{c: c, id: int32(p)}
			defer pr.close()
			got, err := pr.search(context.Background(), 0, end[int32(p)], now.Add(-time.Hour), now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("restore start %d, want %d", got, tc.want)
			}
			if pr.fetches > tc.maxFetches {
				t.Errorf("%d fetches, want at most %d", pr.fetches, tc.maxFetches)
			}
			t.Logf("%d fetches over %d batches", pr.fetches, len(tc.batches))
		})
	}
}
