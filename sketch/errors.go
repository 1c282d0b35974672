package sketch

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the returned errors
// wrap them with detail.
var (
	// ErrEmpty is returned by a quantile query on a sketch that holds no value.
	ErrEmpty = errors.New("sketch: empty")
	// ErrQuantile is returned for a quantile outside [0, 1] (or NaN).
	ErrQuantile = errors.New("sketch: quantile out of [0, 1]")
	// ErrValue is returned for NaN, ±Inf, or a value (or count) the sketch
	// cannot hold, such as a negative value or one above Highest in HDR.
	ErrValue = errors.New("sketch: value cannot be recorded")
	// ErrKindMismatch is returned when merging sketches of different kinds or
	// precisions.
	ErrKindMismatch = errors.New("sketch: kind mismatch")
	// ErrCorrupt is returned by decoders for input they cannot trust.
	ErrCorrupt = errors.New("sketch: corrupt encoding")
	// ErrKind is returned by Kind.Validate and ParseKind for an unknown family
	// or an out-of-range precision.
	ErrKind = errors.New("sketch: invalid kind")
)
