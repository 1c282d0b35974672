package event

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/slide-metrics/slide/window"
)

// Intake takes bodies of events into a window.Store under the store's admission rules: each
// line decoded by a Decoder (the rules of the package doc), each event observed, and each
// refusal, the decoder's or the store's, named by its Reason (ReasonOf). POST /v1/events
// gives it a request's body (Take); ingest gives it each Kafka record's value (TakeRecord),
// so the two doors accept and refuse the same events for the same reasons.
//
// An Intake is safe for concurrent use: Take draws a Decoder from a pool, TakeRecord uses the
// caller's. Neither allocates per event once the event's series and its names exist. The zero
// value is not usable; call NewIntake.
type Intake struct {
	store *window.Store
	cfg   Config
	decs  sync.Pool // *Decoder, for Take
}

// NewIntake returns an Intake into store whose decoders follow cfg, or cfg's error.
func NewIntake(store *window.Store, cfg Config) (*Intake, error) {
	if store == nil {
		return nil, errors.New("event: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("intake config: %w", err)
	}
	in := &Intake{store: store, cfg: cfg}
	in.decs.New = func() any { return in.NewDecoder() }
	return in, nil
}

// NewDecoder returns a Decoder with the intake's Config, for a caller of TakeRecord (one per
// goroutine: ingest keeps one per partition, whose names its intern table then holds).
func (in *Intake) NewDecoder() *Decoder {
	d, _ := NewDecoder(in.cfg) // NewIntake validated the config
	return d
}

// Result is what became of the events of one body: how many the store accepted, how many
// were refused for each Reason (Refused[ReasonNone] is 0), and the first refusal of each
// Reason said in full: "line N: " and its detail (Intake.Explain), N counting every line of
// the body from 1, blank ones too; "" for a Reason nothing was refused for.
type Result struct {
	Accepted int
	Refused  [NumReasons]int
	First    [NumReasons]string
}

// Take records the events of body, NDJSON (one event a line, blank lines skipped), at now
// (unix ms): the ts of an event without one, and the store's now (window.Store.ObserveAt).
// The events carry no feed, so no partition's revocation drops their series. Take does not
// retain body.
func (in *Intake) Take(body []byte, now int64) Result {
	d := in.decs.Get().(*Decoder)
	defer in.decs.Put(d)
	var res Result
	res.Accepted, _ = in.take(d, body, now, nil, 0, func(line []byte, r Reason) {
		if res.Refused[r] == 0 { // the first of its reason: explained, once per reason at most
			res.First[r] = "line " + strconv.Itoa(lineNumber(body, line)) + ": " + in.Explain(d, line, r, now, nil)
		}
		res.Refused[r]++
	})
	return res
}

// lineNumber is the number, from 1, of the line of body that line is: line is a subslice of
// body (DecodeLines cuts it from it), so their capacities say where it starts.
func lineNumber(body, line []byte) int {
	return bytes.Count(body[:cap(body)-cap(line)], []byte{'\n'}) + 1
}

// Record is where a Kafka record's events come from.
type Record struct {
	// TS is the record's timestamp, unix ms: the ts of an event without one, and what future
	// and late are judged against while it agrees with now (window.Source), so every replay
	// of the log refuses the same events.
	TS int64
	// Feed is carried by every event (window.FeedOf of the record's partition).
	Feed window.Feed
}

// TakeRecord records the events of a Kafka record's value (one JSON object, or NDJSON) with d,
// at now, as events of rec (window.Store.ObserveFrom), and calls refused with each line
// refused and its Reason: ReasonExpired for an event in its window at the record's time and
// out of it at now. It returns how many events the store accepted and how many the value
// held (0: a tombstone, or only blank lines). refused must not retain line.
func (in *Intake) TakeRecord(d *Decoder, value []byte, now int64, rec Record, refused func(line []byte, r Reason)) (accepted, events int) {
	src := window.Source{RecordTS: rec.TS}
	return in.take(d, value, now, &src, rec.Feed, refused)
}

// take is Take and TakeRecord: each line decoded by d (the default ts src's record time, else
// now) and observed at now, against src when there is one.
func (in *Intake) take(d *Decoder, body []byte, now int64, src *window.Source, feed window.Feed, refused func([]byte, Reason)) (accepted, events int) {
	defaultTS := now
	if src != nil {
		defaultTS = src.RecordTS
	}
	events = d.DecodeLines(body, defaultTS, func(line []byte, ev window.Event, r Reason) {
		if r == ReasonNone {
			var err error
			if src != nil {
				// The store judges the event's time once, in its ring, against the record.
				ev.Feed = feed
				err = in.store.ObserveFrom(now, *src, &ev)
			} else {
				err = in.store.ObserveAt(now, ev)
			}
			if err == nil {
				accepted++
				return
			}
			r = ReasonOf(err)
		}
		refused(line, r)
	})
	return accepted, events
}
