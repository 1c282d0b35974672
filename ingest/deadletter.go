package ingest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/time/rate"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkarange"
)

// Dead-letter record headers. The record's key is the refused record's key, its value the
// refused line (one line of an NDJSON record; with its Schema Registry frame, if it had one), its timestamp the refused record's; after
// these headers come the refused record's own (a trace id, a producer's name), but for any
// named slide.* (a dead letter produced again: its old reason is not this refusal's) and any
// that would take the letter past half the largest batch.
const (
	HeaderReason    = "slide.reason"     // the Reason label, e.g. "invalid_json": the code tools filter on
	HeaderDetail    = "slide.detail"     // what is wrong, for people: `no field "value"` (event.Intake.Explain)
	HeaderTopic     = "slide.topic"      // topic of the refused record
	HeaderPartition = "slide.partition"  // its partition, decimal
	HeaderOffset    = "slide.offset"     // its offset, decimal
	HeaderLineBytes = "slide.line_bytes" // on a letter that does not copy its line (too large): the line's size, decimal
)

// deadLetters writes refused lines to the dead-letter topic from one goroutine, so a slow
// or failing dead-letter topic slows the consumer down (the queue is bounded) instead of
// losing track of what was refused. flush lets the committer wait until everything before
// an offset is written, so a committed offset never skips an unwritten dead letter.
type deadLetters struct {
	w   *kafka.Writer
	ch  chan kafka.Message
	log *slog.Logger
	lim *rate.Limiter // error logs
	m   *metrics

	queued atomic.Uint64 // messages handed to send

	mu      sync.Mutex
	settled uint64        // messages written or given up on; guarded by mu
	changed chan struct{} // closed and replaced whenever settled grows; guarded by mu

	done chan struct{}
}

const deadLetterQueue = 1024

func newDeadLetters(w *kafka.Writer, log *slog.Logger, m *metrics) *deadLetters {
	d := &deadLetters{
		w:       w,
		ch:      make(chan kafka.Message, deadLetterQueue),
		log:     log,
		lim:     rate.NewLimiter(rate.Every(time.Second), 5),
		m:       m,
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go d.run()
	return d
}

// send queues one dead letter, blocking while the queue is full. If ctx ends while it waits
// the letter is dropped, counted as an error and logged. A letter the queue has room for is
// queued even when ctx has ended: a partition's worker finishes the batch in hand after a
// revocation or a stop, and those records are in its final snapshot and commit, so no later
// owner refuses them again (a select on both dropped about half of them).
func (d *deadLetters) send(ctx context.Context, msg kafka.Message) {
	d.queued.Add(1)
	select {
	case d.ch <- msg:
		return
	default:
	}
	select {
	case d.ch <- msg:
	case <-ctx.Done():
		d.m.deadLetterErrors.Inc()
		if d.lim.Allow() {
			d.log.Error("ingest: dead letter dropped: the queue was full when the partition stopped", "topic", d.w.Topic, "queue", deadLetterQueue)
		}
		d.settle(1)
	}
}

func (d *deadLetters) run() {
	defer close(d.done)
	batch := make([]kafka.Message, 0, 128)
	for msg := range d.ch {
		batch = append(batch[:0], msg)
	drain:
		for len(batch) < cap(batch) {
			select {
			case m, ok := <-d.ch:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		// Writes outlive shutdown on purpose: letters already queued are written before
		// the final commit. The writer's own timeouts and retries bound the call.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := d.w.WriteMessages(ctx, batch...)
		cancel()
		failed := len(batch)
		var we kafka.WriteErrors
		switch {
		case err == nil:
			failed = 0
		case errors.As(err, &we) && len(we) == len(batch):
			failed = we.Count() // the letters of the other partitions' batches were written
		}
		d.m.deadLetters.Add(float64(len(batch) - failed))
		if failed > 0 {
			d.m.deadLetterErrors.Add(float64(failed))
			if d.lim.Allow() {
				d.log.Error("ingest: writing dead letters", "topic", d.w.Topic, "letters", failed, "err", err)
			}
		}
		d.settle(uint64(len(batch)))
	}
}

func (d *deadLetters) settle(n uint64) {
	d.mu.Lock()
	d.settled += n
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// flush waits until every letter queued before the call is written or given up on.
func (d *deadLetters) flush(ctx context.Context) error {
	target := d.queued.Load()
	d.mu.Lock()
	for d.settled < target {
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		d.mu.Lock()
	}
	d.mu.Unlock()
	return nil
}

// close writes what is queued and closes the writer. No send may follow.
func (d *deadLetters) close() error {
	close(d.ch)
	<-d.done
	return d.w.Close()
}

// letter builds the dead letter for line of record m refused for r, as detail says. A line
// too large to copy into a record the dead-letter topic takes (a record of one line near the
// broker's limit, whose letter the headers make larger still) is not copied: the letter
// points at its record by its headers and gives the line's size in HeaderLineBytes.
func letter(m *kafka.Message, line []byte, r event.Reason, detail string) kafka.Message {
	l := kafka.Message{
		Key:  bytes.Clone(m.Key), // m's bytes are its chunk's, reused once the chunk is applied
		Time: m.Time,
		Headers: []kafka.Header{
			{Key: HeaderReason, Value: []byte(r.String())},
			{Key: HeaderDetail, Value: []byte(detail)},
			{Key: HeaderTopic, Value: []byte(m.Topic)},
			{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(m.Partition), 10)},
			{Key: HeaderOffset, Value: strconv.AppendInt(nil, m.Offset, 10)},
		},
	}
	for _, h := range m.Headers {
		if strings.HasPrefix(h.Key, "slide.") || letterSize(&l)+10+len(h.Key)+len(h.Value) > kafkarange.MaxBatchBytes/2 {
			continue
		}
		l.Headers = append(l.Headers, kafka.Header{Key: h.Key, Value: bytes.Clone(h.Value)}) // m's bytes are its chunk's
	}
	if letterSize(&l)+len(line) <= kafkarange.MaxBatchBytes {
		l.Value = append([]byte(nil), line...)
	} else {
		n := strconv.Itoa(len(line))
		l.Headers[1].Value = []byte(detail + "; the line's " + n + " bytes are not copied (past the largest dead letter): read them from the record the " + HeaderTopic + ", " + HeaderPartition + " and " + HeaderOffset + " headers name")
		l.Headers = append(l.Headers, kafka.Header{Key: HeaderLineBytes, Value: []byte(n)})
	}
	return l
}

// letterSize bounds what kafka-go counts a letter as against a writer's BatchBytes: its key,
// value and headers with room for their lengths and the record's fields.
func letterSize(l *kafka.Message) int {
	n := 32 + len(l.Key) + len(l.Value)
	for _, h := range l.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}
