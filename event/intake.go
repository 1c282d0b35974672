package event

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/slide-metrics/slide/window"
)

// Intake takes bodies of events into a window.Store under the store's admission rules: each
// body read by a Format (slide's JSON by default, a *Decoder: the rules of the package doc;
// WithFormat picks another), each event observed, and each refusal, the format's or the
// store's, named by its Reason (ReasonOf). POST /v1/events gives it a request's body (Take);
// ingest gives it each Kafka record's value (TakeRecord), so the two doors accept and refuse
// the same events for the same reasons.
//
// An Intake is safe for concurrent use: Take draws a Format from a pool, TakeRecord uses the
// caller's. Neither allocates per event once the event's series and its names exist (a Format
// of a type outside this package costs nothing per event either, its refusals being handed
// on after its body is read). The zero value is not usable; call NewIntake.
type Intake struct {
	store     *window.Store
	cfg       Config
	newFormat func() (Format, error)
	formats   sync.Pool // Format, for Take
	deferreds sync.Pool // *deferred, for a Format of another type
}

// NewIntake returns an Intake into store whose formats follow cfg and opts, or their error.
func NewIntake(store *window.Store, cfg Config, opts ...IntakeOption) (*Intake, error) {
	if store == nil {
		return nil, errors.New("event: nil store")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("intake config: %w", err)
	}
	in := &Intake{store: store, cfg: cfg}
	in.newFormat = func() (Format, error) { return NewDecoder(cfg) }
	for _, o := range opts {
		o(in)
	}
	f, err := in.newFormat()
	if err != nil {
		return nil, fmt.Errorf("intake format: %w", err)
	}
	in.formats.Put(f)
	in.formats.New = func() any { return in.NewFormat() }
	in.deferreds.New = func() any { return newDeferred() }
	return in, nil
}

// NewFormat returns a Format of the intake's, for a caller of TakeRecord (one per goroutine:
// ingest keeps one per partition, whose names its intern table then holds).
func (in *Intake) NewFormat() Format {
	f, err := in.newFormat()
	if err != nil { // NewIntake made one: a constructor that fails later is broken
		panic("event: the intake's format constructor failed after it succeeded: " + err.Error())
	}
	return f
}

// NewDecoder returns a Decoder (slide's JSON) with the intake's Config, whatever the intake's
// Format.
func (in *Intake) NewDecoder() *Decoder {
	d, _ := NewDecoder(in.cfg) // NewIntake validated the config
	return d
}

// Result is what became of the events of one body: how many the store accepted, how many
// were refused for each Reason (Refused[ReasonNone] is 0), and the first refusal of each
// Reason said in full: where it is (its Format's Locator: "line N", N counting every line of
// the body from 1, blank ones too, for a line-based format) and its detail (Intake.Explain);
// "" for a Reason nothing was refused for. Parts counts the parts of the body that had an
// event refused, each once: a line, a span, or a log record (whose line may give several
// events, as an event map's list of blocks does): what an OTLP partial success counts.
type Result struct {
	Accepted int
	Refused  [NumReasons]int
	First    [NumReasons]string
	Parts    int
}

// Take records the events of body (NDJSON for slide's JSON: one event a line, blank lines
// skipped) at now (unix ms): the ts of an event without one, and the store's now
// (window.Store.ObserveAt). The events carry no feed, so no partition's revocation drops
// their series. Take does not retain body.
func (in *Intake) Take(body []byte, now int64) Result {
	f := in.formats.Get().(Format)
	defer in.formats.Put(f)
	var res Result
	var last []byte // the part refused last: a part's events are handed over one after another
	res.Accepted, _ = in.take(f, body, now, nil, 0, func(line []byte, r Reason) {
		if res.Refused[r] == 0 { // the first of its reason: explained, once per reason at most
			res.First[r] = where(f, body, line) + ": " + in.Explain(f, line, r, now, nil)
		}
		res.Refused[r]++
		if res.Parts == 0 || len(line) != len(last) || len(line) > 0 && &line[0] != &last[0] {
			res.Parts++
		}
		last = line
	})
	return res
}

// Record is where a Kafka record's events come from.
type Record struct {
	// TS is the record's timestamp, unix ms: the ts of an event without one, and what future and
	// late are judged against while it agrees with now (window.Source), so every replay
	// of the log refuses the same events.
	TS int64
	// Feed is carried by every event (window.FeedOf of the record's partition).
	Feed window.Feed
}

// TakeRecord records the events of a Kafka record's value (for slide's JSON one object, or
// NDJSON) with f, at now, as events of rec (window.Store.ObserveFrom), and calls refused with
// each part refused and its Reason: ReasonExpired for an event in its window at the record's
// time and out of it at now. It returns how many events the store accepted and how many the
// value held (0: a tombstone, or only blank lines). refused must not retain part.
//
// A JSON value framed for Confluent Schema Registry (magic byte 0 and a 4-byte schema id
// before the JSON, as KafkaJsonSchemaSerializer and Connect's JsonSchemaConverter write it) is
// read past its frame, for slide's JSON and an --event-map's: JSON text never starts with a
// 0 byte, so the frame cannot be mistaken. The schema is not fetched: the fields are read by
// name, as for an unframed record. A frame before something else (Avro or Protobuf through
// the registry) stays, and the refusal's detail names it.
func (in *Intake) TakeRecord(f Format, value []byte, now int64, rec Record, refused func(part []byte, r Reason)) (accepted, events int) {
	if len(value) > schemaFrame && value[0] == 0 && jsonAfterFrame(value[schemaFrame]) && readsJSON(f) { // a branch a record
		value = value[schemaFrame:]
	}
	src := window.Source{RecordTS: rec.TS}
	return in.take(f, value, now, &src, rec.Feed, refused)
}

// take is Take and TakeRecord: each event decoded by f (the default ts src's record time, else
// now) and observed at now, against src when there is one. The package's formats are called
// by their types, so that the callbacks stay on the stack (a func handed to an interface
// escapes); another type goes through a pooled deferred.
func (in *Intake) take(f Format, body []byte, now int64, src *window.Source, feed window.Feed, refused func([]byte, Reason)) (accepted, events int) {
	obs := observer{in: in, now: now, feed: feed}
	defaultTS := now
	if src != nil {
		defaultTS = src.RecordTS
		obs.src, obs.hasSrc = *src, true
	}
	switch f := f.(type) {
	case *Decoder:
		events = f.DecodeLines(body, defaultTS, func(line []byte, ev window.Event, r Reason) {
			if r = obs.event(ev, r); r != ReasonNone {
				refused(line, r)
			}
		})
	case *SpanDecoder:
		if !f.emit { // (a part given back while refused runs is DecodeLines')
			events = f.observeAll(body, &obs, refused)
			break
		}
		events = f.DecodeLines(body, defaultTS, func(span []byte, ev window.Event, r Reason) {
			if r = obs.event(ev, r); r != ReasonNone {
				refused(span, r)
			}
		})
	default:
		d := in.deferreds.Get().(*deferred)
		d.obs = obs
		events = f.DecodeLines(body, defaultTS, d.fn)
		obs.accepted = d.obs.accepted
		for i, rf := range d.refusals {
			refused(rf.part, rf.r)
			d.refusals[i] = refusal{}
		}
		d.refusals, d.obs = d.refusals[:0], observer{}
		in.deferreds.Put(d)
	}
	return obs.accepted, events
}

// Framed returns part, a part TakeRecord refused of record value, with the bytes before it
// back to the start of value when value is framed for Confluent Schema Registry and only
// whitespace lies between the frame and part: the record as its producer wrote it (schema id
// included), for a dead letter. Any other part is returned as it is.
func Framed(value, part []byte) []byte {
	if len(value) <= schemaFrame || len(part) == 0 || value[0] != 0 || !jsonAfterFrame(value[schemaFrame]) {
		return part
	}
	body := value[schemaFrame:]
	at := cap(body) - cap(part) // part's offset in body, when it shares body's backing array
	if at < 0 || at >= len(body) || &body[at] != &part[0] || at+len(part) > len(body) || len(bytes.TrimLeft(body[:at], " \t\r\n")) > 0 {
		return part
	}
	return value[:schemaFrame+at+len(part)]
}

// schemaFrame is the length of Confluent Schema Registry's wire-format header: magic byte 0,
// then the schema id, a big-endian int32.
const schemaFrame = 5

// readsJSON reports whether f reads JSON text: slide's events or an --event-map's.
func readsJSON(f Format) bool {
	switch f.(type) {
	case *Decoder, *MapDecoder:
		return true
	}
	return false
}

// jsonAfterFrame reports whether c can start the JSON text after a frame: an object, or the
// whitespace before one.
func jsonAfterFrame(c byte) bool { return c == '{' || c == ' ' || c == '\n' || c == '\r' || c == '\t' }
