package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// TestDeadLettersOfLargeLines: a refused line as large as the broker takes (a record of one
// line near its 1 MB limit) cannot be copied into a dead letter, whose headers make it
// larger than that: it is written as a pointer to its record (no value, its size in
// HeaderLineBytes), and the letters written with it are not lost. Before, kafka-go refused
// the batch the large letter was in as a whole, and every letter of it was counted as an
// error and never written.
func TestDeadLettersOfLargeLines(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1, "events-dlq")
	t0 := time.Now()
	huge := bytes.Repeat([]byte("x"), 1_048_450) // invalid JSON, one line, within the broker's limit
	var msgs []kafka.Message
	for i := range 40 { // a burst, so that letters share a write with the large one
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"bad":%d`, i), Time: t0})
	}
	msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: huge, Time: t0})
	for i := range 40 {
		msgs = append(msgs, kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"bad":%d`, 40+i), Time: t0})
	}
	for _, m := range msgs { // one record a batch: the large one fills the broker's largest
		c.Produce(t, m)
	}

	cfg := testConfig(c, "large-letters")
	cfg.DeadLetterTopic = "events-dlq"
	a := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 10*time.Second, "the consumer to catch up", func() bool { return caughtUp(t, c, a) }, progress(a))
	a.stop(t)

	if got := testutil.ToFloat64(a.m.deadLetterErrors); got != 0 {
		t.Errorf("slide_ingest_dead_letter_errors_total = %v, want 0", got)
	}
	if got := testutil.ToFloat64(a.m.deadLetters); got != float64(len(msgs)) {
		t.Errorf("slide_ingest_dead_letters_total = %v, want %d", got, len(msgs))
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.Addr}, Topic: "events-dlq", Partition: 0, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	end := logEnd(t, c, "events-dlq")[0]
	if end != int64(len(msgs)) {
		t.Fatalf("%d dead letters written, want %d", end, len(msgs))
	}
	pointers := 0
	for range end {
		m, err := r.ReadMessage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, kv := range m.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if h[HeaderReason] != "invalid_json" {
			t.Errorf("letter at %d: reason %q, want invalid_json", m.Offset, h[HeaderReason])
		}
		n, isPointer := h[HeaderLineBytes]
		if !isPointer {
			if len(m.Value) == 0 || len(m.Value) > 32 {
				t.Errorf("letter at %d: value of %d bytes, want the small line", m.Offset, len(m.Value))
			}
			continue
		}
		pointers++
		if n != strconv.Itoa(len(huge)) || len(m.Value) != 0 || h[HeaderOffset] != "40" {
			t.Errorf("pointer letter at %d: %s=%q, value %d bytes, offset %q; want %d, none, 40",
				m.Offset, HeaderLineBytes, n, len(m.Value), h[HeaderOffset], len(huge))
		}
		if want := "not copied"; !bytes.Contains([]byte(h[HeaderDetail]), []byte(want)) {
			t.Errorf("pointer letter's detail %q does not say the line was %s", h[HeaderDetail], want)
		}
	}
	if pointers != 1 {
		t.Errorf("%d pointer letters, want 1", pointers)
	}
}

// TestDeadLettersOfRecordsAppliedAfterRevocation: a partition's worker finishes the batch in
// hand after its context ends (a revocation, SIGTERM), and those records are in the final
// snapshot and the commit, so the next owner never refuses them again: their letters must be
// written although the context has ended. send chose at random between a free queue and the
// ended context, and dropped about half of them (found with `slide serve` scaled 3 -> 2
// under load: slide_ingest_dead_letter_errors_total 2, two refused lines never in the topic).
func TestDeadLettersOfRecordsAppliedAfterRevocation(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1, "events-dlq")
	w := &kafka.Writer{Addr: kafka.TCP(c.Addr), Topic: "events-dlq", BatchTimeout: 10 * time.Millisecond, RequiredAcks: kafka.RequireAll}
	m := newMetrics(newTestStore(t, 0))
	d := newDeadLetters(w, slog.New(slog.DiscardHandler), m)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	const n = 64 // well within the queue
	for i := range n {
		d.send(ended, kafka.Message{Key: []byte("k"), Value: fmt.Appendf(nil, `{"bad":%d`, i)})
	}
	if err := d.flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.close(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.deadLetterErrors); got != 0 {
		t.Errorf("slide_ingest_dead_letter_errors_total = %v, want 0", got)
	}
	if got := logEnd(t, c, "events-dlq")[0]; got != n {
		t.Errorf("%d dead letters written, want %d", got, n)
	}
}

// TestDeadLetterKeepsTheRecordsHeaders: a dead letter carries the refused record's headers
// after slide's own (an operator finds the trace id or producer that sent it), copied out of
// the chunk that is reused, except a slide.* header of a letter produced again (its reason is
// not this refusal's) and one too large for a letter. Before, every record header was lost.
func TestDeadLetterKeepsTheRecordsHeaders(t *testing.T) {
	trace := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	m := &kafka.Message{Topic: "events", Partition: 1, Offset: 7, Key: []byte{0xff, 0xfe}, Headers: []kafka.Header{
		{Key: "traceparent", Value: trace},
		{Key: HeaderReason, Value: []byte("late")},
		{Key: "empty", Value: nil},
		{Key: "huge", Value: bytes.Repeat([]byte("h"), kafkarange.MaxBatchBytes)},
	}}
	l := letter(m, []byte(`{"key":"a"}`), event.ReasonMissingField, `no field "value"`)
	copy(trace, "xx") // the chunk's bytes, reused for the next records
	var got []string
	for _, h := range l.Headers {
		got = append(got, h.Key+"="+string(h.Value))
	}
	want := []string{HeaderReason + "=missing_field", HeaderDetail + `=no field "value"`, HeaderTopic + "=events",
		HeaderPartition + "=1", HeaderOffset + "=7", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "empty="}
	if !slices.Equal(got, want) {
		t.Fatalf("letter headers\n%q\nwant\n%q", got, want)
	}
}

// TestDeadLetterOfAFramedRecordKeepsItsFrame: a record framed for Confluent Schema Registry
// (magic byte 0 and a schema id before the JSON) is read past its frame, and a refused one
// is dead-lettered as it was written, frame included: a consumer of the dead-letter topic
// with the serializer's deserializer (or a re-drive to the events topic) reads it, and the
// schema id is not lost. Before, the letter held the JSON alone.
func TestDeadLetterOfAFramedRecordKeepsItsFrame(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1, "events-dlq")
	t0 := time.Now()
	values := [][]byte{
		append([]byte{0, 0, 0, 0, 42}, `{"key":"tenant-1","metric":"latency_ms"}`...),     // no value: missing_field
		append([]byte{0, 0, 0, 1, 7}, "\n"+`{"key":"tenant-1","metric":"latency_ms"}`...), // whitespace after the frame
		[]byte(`{"key":"tenant-1","metric":"latency_ms"}`),                                // not framed
	}
	for _, v := range values {
		c.Produce(t, kafka.Message{Key: []byte("k"), Value: v, Time: t0})
	}
	cfg := testConfig(c, "framed-letters")
	cfg.DeadLetterTopic = "events-dlq"
	a := start(t, cfg, newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "the consumer to catch up", func() bool { return caughtUp(t, c, a) }, progress(a))
	a.stop(t)

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.Addr}, Topic: "events-dlq", Partition: 0, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	if end := logEnd(t, c, "events-dlq")[0]; end != int64(len(values)) {
		t.Fatalf("%d dead letters written, want %d", end, len(values))
	}
	for i, want := range values {
		m, err := r.ReadMessage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m.Value, want) {
			t.Errorf("letter %d: value %q, want the record's %q", i, m.Value, want)
		}
	}
}
