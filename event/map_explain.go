package event

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// Explain says why md refuses line, as Decoder.Explain does for slide's own events: the
// field and what is wrong with it (`no field "duration"`, `field "duration": "fast" is not a
// number`); when the map's metrics are refused for different things, each once, joined by
// "; " (a Format is asked about a line, not about one of its events); "" when every metric's
// event decodes. It decodes line again and allocates: call it for a refused line only.
func (md *MapDecoder) Explain(line []byte) string {
	if !md.scan(line) {
		if len(line) >= math.MaxInt32 {
			return "invalid JSON: input of 2 GiB or more"
		}
		var sc textparse.Scanner // the scanner's own words for what is wrong
		for sc.Reset(line); sc.Next(); {
		}
		if err := sc.Err(); err != nil {
			if len(line) >= schemaFrame && line[0] == 0 {
				return schemaFrameOnly(line)
			}
			return "invalid JSON: " + err.Error()
		}
		return "invalid JSON"
	}
	var said []string
	for i := range md.ms {
		if _, r := md.event(line, i, 0); r != ReasonNone {
			if s := md.explain(line, r); !slices.Contains(said, s) {
				said = append(said, s)
			}
		}
	}
	return strings.Join(said, "; ")
}

// explain says md.bad, the last refusal of event, whose reason was r.
func (md *MapDecoder) explain(line []byte, r Reason) string {
	b := md.bad
	m := &md.ms[b.metric]
	path := md.paths[b.leaf]
	v := md.vals[b.leaf]
	field := "field " + strconv.Quote(path) + ": "
	switch v.Kind {
	case textparse.Absent:
		if b.what == badLabel {
			break
		}
		return `no field ` + strconv.Quote(path)
	case textparse.Null:
		return field + "null"
	}
	s := v.Bytes(line)
	switch b.what {
	case badKey:
		switch v.Kind {
		case textparse.String:
			if v.Escaped {
				var lossy bool
				if s, lossy = md.d.unquote(s); lossy {
					return field + "not valid UTF-8"
				}
			}
			if len(s) == 0 {
				return field + "empty"
			}
		case textparse.Number, textparse.True, textparse.False:
		default:
			return field + kindName(v.Kind) + ", not a key"
		}
		if len(s) > md.d.maxKey {
			return field + strconv.Itoa(len(s)) + " bytes, more than " + strconv.Itoa(md.d.maxKey)
		}
		return field + whyNotName(s)
	case badLabel:
		label := "label " + strconv.Quote(b.label) + ": " + field
		switch v.Kind {
		case textparse.String, textparse.Number, textparse.True, textparse.False:
		default:
			return label + kindName(v.Kind) + ", not text"
		}
		if v.Escaped {
			var lossy bool
			if s, lossy = md.d.unquote(s); lossy {
				return label + "value not valid UTF-8"
			}
		}
		if len(s) > window.MaxLabelValueLen {
			return label + "value of " + strconv.Itoa(len(s)) + " bytes, more than " + strconv.Itoa(window.MaxLabelValueLen)
		}
		return label + "value " + whyNotName(s)
	case badValue:
		switch v.Kind {
		case textparse.Number:
			if _, err := textparse.ParseFloat(s); err != nil {
				return field + clip(s) + " is beyond float64"
			}
			return field + clip(s) + " times " + strconv.FormatFloat(m.scale, 'g', -1, 64) + " is beyond float64"
		case textparse.String:
			if r == ReasonInvalidValue {
				return field + quote(s) + " is beyond float64"
			}
			if v.Escaped {
				s, _ = md.d.unquote(s)
			}
			return field + quote(s) + " is not a number"
		}
		return field + kindName(v.Kind) + ", not a number"
	case badTS:
		unit := "ms"
		for u, p := range mapUnits {
			if p == m.unit && u != "" {
				unit = u
			}
		}
		if v.Kind == textparse.String {
			if v.Escaped {
				s, _ = md.d.unquote(s)
			}
			return field + quote(s) + " is neither RFC 3339 nor a number of " + unit
		}
		if v.Kind == textparse.Number {
			return field + clip(s) + " is not a time in " + unit + " (no exponent, within ±2^53 ms)"
		}
		return field + kindName(v.Kind) + ", not RFC 3339 or a number"
	}
	return r.String()
}

// tsUnit is the unit, as a power of ten to milliseconds, in which the map reads the ts of
// metric's events (the first metric of that name), for Intake.Explain's unit hint.
func (md *MapDecoder) tsUnit(metric string) int {
	for i := range md.ms {
		if md.ms[i].metric == metric {
			return md.ms[i].unit
		}
	}
	return 0
}
