package query

import (
	"strconv"

	"github.com/slide-metrics/slide/jsonenc"
)

// The hot routes (/v1/window, /v1/top) build their JSON by appending to a pooled buffer:
// encoding/json would reflect over a map per response and cannot write NaN as null.

// appendKey appends "name": after a comma when the object already has a member.
func appendKey(b []byte, name string, first bool) []byte {
	if !first {
		b = append(b, ',')
	}
	b = jsonenc.AppendString(b, name)
	return append(b, ':')
}

func appendInt(b []byte, n int64) []byte   { return strconv.AppendInt(b, n, 10) }
func appendUint(b []byte, n uint64) []byte { return strconv.AppendUint(b, n, 10) }
