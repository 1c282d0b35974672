package sketch

import "errors"

// Sentinel errors. Callers branch on them with errors.Is; the returned errors
// wrap them with detail.
var (
	// ErrValue is returned by CheckValue for NaN and ±Inf, which Bins.Add ignores.
	ErrValue = errors.New("sketch: value cannot be recorded")
	// ErrCorrupt is returned by decoders for input they cannot trust.
	ErrCorrupt = errors.New("sketch: corrupt encoding")
	// ErrKind is returned by Kind.Validate and ParseKind for an unknown family
	// or an out-of-range precision.
	ErrKind = errors.New("sketch: invalid kind")
)
