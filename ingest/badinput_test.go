package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// deadLetter is one record read back from the dead-letter topic.
type deadLetter struct {
	reason, line, source string
	detail               string // the slide.detail header
}

// readDeadLetters reads every record of topic.
func readDeadLetters(t *testing.T, c *kafkatest.Cluster, topic string) []deadLetter {
	t.Helper()
	var out []deadLetter
	for p, end := range logEnd(t, c, topic) {
		if end == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.Addr}, Topic: topic, Partition: int(p), MaxWait: 500 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("reading dead letters of partition %d: %v", p, err)
			}
			h := map[string]string{}
			for _, kv := range m.Headers {
				h[kv.Key] = string(kv.Value)
			}
			out = append(out, deadLetter{h[HeaderReason], string(m.Value), h[HeaderTopic] + "/" + h[HeaderPartition] + "/" + h[HeaderOffset], h[HeaderDetail]})
			if m.Offset+1 >= end {
				break
			}
		}
		cancel()
		r.Close()
	}
	slices.SortFunc(out, func(a, b deadLetter) int { return strings.Compare(a.reason+a.line, b.reason+b.line) })
	return out
}

// TestConsumerBadInput feeds one record of each kind of bad input between good events: each
// is counted under its reason, dead-lettered with the reason, and the stream after it is
// processed. A second consumer of the group replays the same records without counting or
// dead-lettering them again.
func TestConsumerBadInput(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 2, "events-dlq")
	t0 := time.Now()
	ms := t0.UnixMilli()
	good := func(i int) string {
		return fmt.Sprintf(`{"ts":%d,"key":"good","metric":"latency_ms","value":%d}`, ms-int64(i)*1000, i)
	}
	// detail is the slide.detail header's text, or its end where it starts with the event's ts.
	bad := []struct{ reason, line, detail string }{
		{"invalid_json", `not json`, "invalid JSON: no opening brace at byte 0"},
		{"missing_field", `{"metric":"latency_ms","value":1}`, `no field "key"`},
		{"bad_field", `{"key":"good","metric":"latency_ms","value":"fast"}`, `field "value": a string, not a number`},
		{"invalid_value", `{"key":"good","metric":"latency_ms","value":NaN}`, `field "value": NaN`},
		{"key_too_long", `{"key":"` + strings.Repeat("k", 300) + `","metric":"latency_ms","value":1}`, `field "key": 300 bytes, more than 256`},
		{"future", fmt.Sprintf(`{"ts":%d,"key":"good","metric":"latency_ms","value":1}`, ms+time.Hour.Milliseconds()), " is 1h0m0s ahead of the record (skew 10s)"},
		{"late", fmt.Sprintf(`{"ts":%d,"key":"good","metric":"latency_ms","value":1}`, ms-time.Hour.Milliseconds()), " is 1h0m0s behind the record (retention 5m0s)"},
		{"series_cap", fmt.Sprintf(`{"ts":%d,"key":"good","metric":"one_too_many","value":1}`, ms), `a new series of metric "one_too_many" over the series cap: the store holds its 1 series (--max-series, or what --max-memory sets)`},
	}
	// Everything is keyed "good", so it all lands in one partition, in this order.
	var msgs []kafka.Message
	n := 0
	add := func(value string) {
		msgs = append(msgs, kafka.Message{Key: []byte("good"), Value: []byte(value), Time: t0})
	}
	add(good(n))
	n++
	for _, b := range bad {
		add(b.line)
		add(good(n))
		n++
	}
	// One NDJSON record with a bad line between two good ones.
	add(good(n) + "\n" + `{"key":"good","value":2}` + "\n" + good(n+1))
	n += 2
	// An event that was in its window when produced, ten minutes ago, but is not now: it has
	// expired, refused and dead-lettered like the others (the tenth probe found it
	// counted apart and lost).
	old := t0.Add(-10 * time.Minute)
	expiredLine := fmt.Sprintf(`{"ts":%d,"key":"good","metric":"latency_ms","value":1}`, old.UnixMilli())
	msgs = append(msgs, kafka.Message{Key: []byte("good"), Time: old, Value: []byte(expiredLine)})
	add(good(n))
	n++
	// A tombstone (null value) and a record of blank lines: no event, counted, not refused.
	msgs = append(msgs, kafka.Message{Key: []byte("good"), Value: nil, Time: t0})
	add(" \n\r\n")
	add(good(n))
	n++
	c.Produce(t, msgs...)
	want := make([]deadLetter, 0, len(bad)+1)
	for _, b := range bad {
		want = append(want, deadLetter{reason: b.reason, line: b.line, detail: b.detail})
	}
	want = append(want, deadLetter{reason: "missing_field", line: `{"key":"good","value":2}`, detail: `no field "metric"`},
		deadLetter{reason: "expired", line: expiredLine, detail: " is 10m0s behind now (retention 5m0s)"})
	slices.SortFunc(want, func(a, b deadLetter) int { return strings.Compare(a.reason+a.line, b.reason+b.line) })

	cfg := testConfig(c, "bad")
	cfg.DeadLetterTopic = "events-dlq"
	cfg.RejectLogInterval = time.Hour // only the burst of 10 is logged
	cfg.Restore = time.Hour           // reach back to the expired event's record
	logs := &proctest.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	store := newTestStore(t, 1) // one series: the second metric hits the cap
	a := start(t, cfg, store, t0)
	eventually(t, 10*time.Second, "the first consumer to catch up", func() bool { return caughtUp(t, c, a) }, progress(a))
	a.stop(t) // commits and leaves

	wantCounts := `
# HELP slide_ingest_rejected_total Events refused, by reason (invalid_json, missing_field, bad_field, invalid_value, key_too_long, future, late, series_cap, too_large, expired, bad_record).
# TYPE slide_ingest_rejected_total counter
slide_ingest_rejected_total{reason="bad_field"} 1
slide_ingest_rejected_total{reason="bad_record"} 0
slide_ingest_rejected_total{reason="expired"} 1
slide_ingest_rejected_total{reason="future"} 1
slide_ingest_rejected_total{reason="invalid_json"} 1
slide_ingest_rejected_total{reason="invalid_value"} 1
slide_ingest_rejected_total{reason="key_too_long"} 1
slide_ingest_rejected_total{reason="late"} 1
slide_ingest_rejected_total{reason="missing_field"} 2
slide_ingest_rejected_total{reason="series_cap"} 1
slide_ingest_rejected_total{reason="too_large"} 0
`
	if err := testutil.CollectAndCompare(a.m.rejected, strings.NewReader(wantCounts)); err != nil {
		t.Error(err)
	}
	// The stream after every bad record was processed: all good events are in the window.
	agg, err := store.ReadAt(ms, "latency_ms", "good", 5*time.Minute, nil)
	if err != nil || agg.Count != uint64(n) || agg.Sum != float64(n*(n-1)/2) {
		t.Errorf("good series: %+v %v; want %d events summing to %d", agg, err, n, n*(n-1)/2)
	}
	if got := sum(a.m.events); got != float64(n) {
		t.Errorf("slide_ingest_events_total = %v, want %d", got, n)
	}
	if got := testutil.ToFloat64(a.m.expired); got != 1 {
		t.Errorf("slide_ingest_expired_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(a.m.tombstones); got != 2 {
		t.Errorf("slide_ingest_tombstones_total = %v, want 2 (a null value, a blank record)", got)
	}
	if !strings.Contains(logs.String(), `reason=missing_field detail="no field \"key\""`) {
		t.Errorf("no refusal logged with its detail:\n%s", logs)
	}
	if got := strings.Count(logs.String(), "event refused"); got != len(want) {
		t.Errorf("logged %d refusals, want %d (all within the burst)", got, len(want))
	}
	letters := readDeadLetters(t, c, "events-dlq")
	if len(letters) != len(want) {
		t.Fatalf("dead letters:\n%v\nwant\n%v", letters, want)
	}
	for i, l := range letters {
		if l.reason != want[i].reason || l.line != want[i].line || !strings.HasPrefix(l.source, "events/") {
			t.Errorf("dead letter %d = %+v, want reason %q line %q from events/…", i, l, want[i].reason, want[i].line)
		}
		// The detail says what is wrong; one that starts with the event's ts ends as told.
		if d := want[i].detail; l.detail != d && !(strings.HasPrefix(d, " ") && strings.HasPrefix(l.detail, "ts ") && strings.HasSuffix(l.detail, d)) {
			t.Errorf("dead letter %d (%s) detail %q, want %q", i, l.reason, l.detail, d)
		}
	}
	if got := testutil.ToFloat64(a.m.deadLetters); got != float64(len(want)) {
		t.Errorf("slide_ingest_dead_letters_total = %v, want %d", got, len(want))
	}

	// A new instance replays the partition: same windows, no new refusals counted and no
	// dead letters written twice: the records were below the committed offset.
	store2 := newTestStore(t, 1)
	cfg.Logger = nil
	b := start(t, cfg, store2, t0)
	eventually(t, 10*time.Second, "the second consumer to catch up", func() bool { return caughtUp(t, c, b) }, progress(b))
	b.stop(t)
	if got := sum(b.m.rejected); got != 0 {
		t.Errorf("replay counted %v refusals again", got)
	}
	if got := sum(b.m.restoreSkipped); got != float64(len(want)) {
		t.Errorf("slide_ingest_restore_skipped_total = %v, want %d", got, len(want))
	}
	if got := testutil.ToFloat64(b.m.expired); got != 1 {
		t.Errorf("replay: slide_ingest_expired_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(b.m.tombstones); got != 0 {
		t.Errorf("replay counted %v tombstones again", got)
	}
	if again := readDeadLetters(t, c, "events-dlq"); len(again) != len(want) {
		t.Errorf("replay wrote dead letters again: %d now, %d before", len(again), len(want))
	}
	agg2, err := store2.ReadAt(ms, "latency_ms", "good", 5*time.Minute, nil)
	if err != nil || agg2.Count != agg.Count || agg2.Sum != agg.Sum {
		t.Errorf("replayed good series: %+v %v; want %+v", agg2, err, agg)
	}
}
