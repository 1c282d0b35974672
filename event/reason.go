package event

import (
	"errors"

	"github.com/slide-metrics/slide/window"
)

// Reason says why an event was refused. It is the `reason` label of ingest's
// slide_ingest_rejected_total, the value of its dead-letter header (ingest.HeaderReason) and
// a key of POST /v1/events' "rejected" counts.
// The zero value, ReasonNone, means the event was accepted.
type Reason uint8

// Reasons an event is refused, in the order Decode checks them: a record that is not JSON
// is invalid_json whatever else is wrong with it; otherwise the fields are checked in the
// order key, metric, value, ts, count, labels and the first failure is the reason.
const (
	ReasonNone         Reason = iota // accepted
	ReasonInvalidJSON                // not JSON, not an object, or trailing bytes after it
	ReasonMissingField               // key, metric or value absent or null; key or metric ""
	ReasonBadField                   // a field of the wrong type: key/metric not a string or failing window.ValidName (invalid UTF-8, a C0 or C1 control, DEL, a bidi override or isolate), value not a number, ts neither an integer nor RFC 3339, count not an integer ≥ 1, labels not an object of valid label names and string values (a name twice, more than 16, a value failing window.ValidName)
	ReasonInvalidValue               // value NaN, ±Infinity, or beyond float64
	ReasonKeyTooLong                 // key or metric longer than Config.MaxKeyLen bytes, or a label value longer than window.MaxLabelValueLen (256)
	ReasonFuture                     // ts ahead of the record's timestamp (or of now) by more than the ring's skew
	ReasonLate                       // ts older than the metric's retention at the record's timestamp (or at now, over HTTP)
	ReasonSeriesCap                  // the event's series is new and the store is at its series cap, or its metric at window.StoreConfig.MaxSeriesPerMetric
	ReasonTooLarge                   // a Kafka record whose batch inflates beyond ingest's Config.MaxInflatedBytes (ingest's alone): dead-lettered as a pointer (headers, no value)
	ReasonExpired                    // within its window at the record's timestamp, out of it at now (lag, a skewed producer, a replay reaching further back than the metric keeps)
	ReasonBadRecord                  // a body that is not its format's, refused whole: OTLP protobuf that is malformed (a length past the record, a wire type its field cannot have, AnyValue nested deeper than 32), OTLP JSON that is not JSON or not a request's shape

	// NumReasons is how many Reasons there are, ReasonNone included: the length of an array
	// indexed by Reason (Result.Refused, ingest's counters).
	NumReasons
)

var reasonNames = [NumReasons]string{
	ReasonNone:         "none",
	ReasonInvalidJSON:  "invalid_json",
	ReasonMissingField: "missing_field",
	ReasonBadField:     "bad_field",
	ReasonInvalidValue: "invalid_value",
	ReasonKeyTooLong:   "key_too_long",
	ReasonFuture:       "future",
	ReasonLate:         "late",
	ReasonSeriesCap:    "series_cap",
	ReasonTooLarge:     "too_large",
	ReasonExpired:      "expired",
	ReasonBadRecord:    "bad_record",
}

// String is the metric label of r ("invalid_json", "late", ...).
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// RejectReasons lists every refusal reason (all but ReasonNone), e.g. to initialise the
// label values of a counter so that each reason is exported from the start.
func RejectReasons() []Reason {
	out := make([]Reason, 0, NumReasons-1)
	for r := ReasonNone + 1; r < NumReasons; r++ {
		out = append(out, r)
	}
	return out
}

// ReasonOf maps an error returned by window.Store.ObserveAt or ObserveFrom to its Reason: nil →
// ReasonNone, window.ErrLate → ReasonLate, window.ErrExpired → ReasonExpired, and so on. Any
// other error maps to ReasonBadField.
func ReasonOf(err error) Reason {
	switch {
	case err == nil:
		return ReasonNone
	case errors.Is(err, window.ErrLate):
		return ReasonLate
	case errors.Is(err, window.ErrFuture):
		return ReasonFuture
	case errors.Is(err, window.ErrExpired):
		return ReasonExpired
	case errors.Is(err, window.ErrSeriesCap):
		return ReasonSeriesCap
	case errors.Is(err, window.ErrInvalidValue):
		return ReasonInvalidValue
	case errors.Is(err, window.ErrEmptyKey):
		return ReasonMissingField
	default:
		return ReasonBadField
	}
}
