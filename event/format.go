package event

import (
	"bytes"
	"strconv"

	"github.com/slide-metrics/slide/window"
)

// Format reads a body (a Kafka record's value, a POST /v1/events body, a backtest input) into events.
type Format interface {
	// DecodeLines calls fn once per event of body with the part of body it came from (a line, a span's bytes), the event and its Reason; returns how many.
	DecodeLines(body []byte, defaultTS int64, fn func(part []byte, ev window.Event, r Reason)) int
	// Explain says in one short line why part was refused (as Decoder.Explain does).
	Explain(part []byte) string
}

// A Format keeps state between bodies (its intern table), so it is used by one goroutine at a
// time: an Intake makes one per goroutine with its constructor (WithFormat), ingest keeps one per
// partition (Intake.NewFormat) and POST /v1/events draws them from a pool (Take). DecodeLines
// must not retain fn, body or its parts, and must never panic, whatever body holds. A part
// handed to fn and given back to DecodeLines decodes to the same event and Reason: Intake.Explain
// decodes a refused part again to say the event's time against the store's bounds.
//
// *Decoder, slide's JSON, is the default Format and every Intake's without WithFormat.

// IntakeOption configures an Intake (NewIntake).
type IntakeOption func(*Intake)

// WithFormat makes the intake read bodies with the Formats newFormat returns, one per
// goroutine, instead of slide's JSON (*Decoder of the intake's Config). NewIntake calls it
// once and refuses the intake with its error.
func WithFormat(newFormat func() (Format, error)) IntakeOption {
	return func(in *Intake) { in.newFormat = newFormat }
}

// Locator is an optional method of a Format: where part is in body, for Result.First ("span 3",
// "the record"). A Format without it is line-based: "line N", counting every line from 1.
type Locator interface {
	Where(body, part []byte) string
}

// where says where part is in body, by f's Locator or as a line number.
func where(f Format, body, part []byte) string {
	if l, ok := f.(Locator); ok {
		return l.Where(body, part)
	}
	return "line " + strconv.Itoa(lineNumber(body, part))
}

// lineNumber is the number, from 1, of the line of body that line is: line is a subslice of
// body (DecodeLines cuts it from it), so their capacities say where it starts.
func lineNumber(body, line []byte) int {
	return bytes.Count(body[:cap(body)-cap(line)], []byte{'\n'}) + 1
}

// observer observes the events of one body into the intake's store: take's per-event step.
type observer struct {
	in       *Intake
	now      int64
	src      window.Source
	hasSrc   bool
	feed     window.Feed
	accepted int
}

// event observes ev when the format accepted it and returns the Reason it ends with.
func (o *observer) event(ev window.Event, r Reason) Reason {
	if r != ReasonNone {
		return r
	}
	var err error
	if o.hasSrc {
		// The store judges the event's time once, in its ring, against the record.
		ev.Feed = o.feed
		err = o.in.store.ObserveFrom(o.now, o.src, &ev)
	} else {
		err = o.in.store.ObserveAt(o.now, ev)
	}
	if err == nil {
		o.accepted++
		return ReasonNone
	}
	return ReasonOf(err)
}

// refusal is one part a Format of a type take does not know refused, kept until the body is
// decoded (deferred).
type refusal struct {
	part []byte
	r    Reason
}

// deferred is take's state for a Format of another type than the package's: its callback is
// bound once (fn), so that handing it to the interface allocates nothing, and the refusals are
// handed to the caller's callback after DecodeLines returns, so that the caller's callback is
// never stored where it would escape.
type deferred struct {
	obs      observer
	refusals []refusal
	fn       func([]byte, window.Event, Reason)
}

func newDeferred() *deferred {
	d := &deferred{}
	d.fn = d.event
	return d
}

func (d *deferred) event(part []byte, ev window.Event, r Reason) {
	if r = d.obs.event(ev, r); r != ReasonNone {
		d.refusals = append(d.refusals, refusal{part, r})
	}
}
