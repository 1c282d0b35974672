package ingest

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/slide-metrics/slide/window"
)

// AppendEvent appends ev as one JSON line (without the newline) in the form Decoder reads:
//
//	{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5}
//
// with ,"count":n added when Count > 1. Strings are escaped as JSON requires (invalid UTF-8
// becomes \ufffd); the value is the shortest decimal that reads back as the same float64.
// A NaN or infinite value is written as the bare token NaN, Infinity or -Infinity, which
// is not JSON: the decoder refuses it as ReasonInvalidValue, as it should.
func AppendEvent(dst []byte, ev window.Event) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, ev.TS, 10)
	dst = append(dst, `,"key":`...)
	dst = appendJSONString(dst, ev.Key)
	dst = append(dst, `,"metric":`...)
	dst = appendJSONString(dst, ev.Metric)
	dst = append(dst, `,"value":`...)
	switch {
	case math.IsNaN(ev.Value):
		dst = append(dst, "NaN"...)
	case math.IsInf(ev.Value, 1):
		dst = append(dst, "Infinity"...)
	case math.IsInf(ev.Value, -1):
		dst = append(dst, "-Infinity"...)
	default:
		dst = strconv.AppendFloat(dst, ev.Value, 'g', -1, 64)
	}
	if ev.Count > 1 {
		dst = append(dst, `,"count":`...)
		dst = strconv.AppendUint(dst, ev.Count, 10)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
