package event

import (
	"github.com/slide-metrics/slide/textparse"
	"github.com/slide-metrics/slide/window"
)

// An event's labels member, {"route":"/pay","code":"200"}, is read into the decoder's
// scratch (labelScratch: spans of one reused buffer, never a map or a string per label),
// sorted by name, and written after the key as the event's series string, window's encoding
// (window.AppendSeries), which is interned as keys are: an event of a series the decoder has
// seen allocates nothing. Both paths read a labels object here, the member loop validating
// it as it reads and the scanner path after the scanner validated it, so that they take and
// refuse the same labels.

// labelSpan is one label as read: its name is buf[start:mid], its value buf[mid:end].
type labelSpan struct{ start, mid, end int32 }

// labelScratch is the labels of the event being decoded, reused by every event.
type labelScratch struct {
	ls     [window.MaxLabels]labelSpan
	n      int
	buf    []byte // the names and values, unescaped
	series []byte // the series string being written
	bad    labelBad
}

// labelBad is what readLabels refused, set only on a refusal (Decoder.Explain reads it): the
// label's name is buf[name:nameEnd].
type labelBad struct {
	why           labelWhy
	name, nameEnd int32
}

type labelWhy uint8

const (
	labelBadName labelWhy = iota + 1
	labelTwice
	labelTooMany
	labelNotString
	labelLossy
	labelTooLong
	labelBadValue
)

// refuse records why the label named buf[start:end] is refused and returns r.
func (l *labelScratch) refuse(start, end int, why labelWhy, r Reason) (int, Reason) {
	l.bad = labelBad{why: why, name: int32(start), nameEnd: int32(end)}
	return 0, r
}

func (l *labelScratch) name(k int) []byte { p := l.ls[k]; return l.buf[p.start:p.mid] }

// memberLabels reads the labels member's value at b[i] for the member loop (decode_fast.go),
// recording it in d.f as the scanner would, and returns the index after it, or −1 where the
// loop gives up: not null or an object, not JSON, or refused.
func (d *Decoder) memberLabels(b []byte, i int) int {
	var j int
	switch b[i] {
	case 'n':
		if j = nullEnd(b, i); j < 0 {
			return -1
		}
		d.f[fLabels] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Null}
		d.lab.n = 0
	case '{':
		n, r := d.readLabels(b[i:])
		if r != ReasonNone {
			return -1
		}
		j = i + n
		d.f[fLabels] = textparse.Value{Start: int32(i), End: int32(j), Kind: textparse.Object}
	default:
		return -1
	}
	return j
}

// readLabels reads the labels object at the start of obj into d.lab by the rules of the
// package doc, member by member, and returns the length of its text. The first member that
// breaks a rule names the refusal: a name that is not a label name (window.ValidLabelName,
// after unescaping) or that an earlier member gave, a member past window.MaxLabels, a value
// that is not a string or that unescapes lossily are ReasonBadField; a value longer than
// window.MaxLabelValueLen bytes is ReasonKeyTooLong, one failing window.ValidName
// ReasonBadField. An empty value is allowed: the label is absent. It validates the object as
// it goes (a flat object of strings needs no SkipValue first): text that is not JSON is
// ReasonInvalidJSON, which only the member loop sees, as the scanner path reads objects the
// scanner validated.
func (d *Decoder) readLabels(obj []byte) (int, Reason) {
	l := &d.lab
	l.n, l.buf = 0, l.buf[:0]
	n := len(obj)
	i := textparse.SkipSpace(obj, 1)
	if i < n && obj[i] == '}' {
		return i + 1, ReasonNone
	}
	for {
		if i >= n || obj[i] != '"' {
			return 0, ReasonInvalidJSON
		}
		j, esc := textparse.ScanString(obj, i+1)
		if j < 0 {
			return 0, ReasonInvalidJSON
		}
		start := len(l.buf)
		if esc {
			l.buf, _ = textparse.Unquote(l.buf, obj[i+1:j]) // lossy is not ASCII: refused next
		} else {
			l.buf = append(l.buf, obj[i+1:j]...)
		}
		name := l.buf[start:]
		if !window.ValidLabelNameBytes(name) {
			return l.refuse(start, len(l.buf), labelBadName, ReasonBadField)
		}
		for k := range l.n {
			if string(l.name(k)) == string(name) {
				return l.refuse(start, len(l.buf), labelTwice, ReasonBadField)
			}
		}
		if l.n == len(l.ls) {
			return l.refuse(start, len(l.buf), labelTooMany, ReasonBadField)
		}
		if i = textparse.SkipSpace(obj, j+1); i >= n || obj[i] != ':' {
			return 0, ReasonInvalidJSON
		}
		if i = textparse.SkipSpace(obj, i+1); i >= n || obj[i] != '"' {
			// not a string (or not JSON: the scanner path's to say)
			return l.refuse(start, len(l.buf), labelNotString, ReasonBadField)
		}
		if j, esc = textparse.ScanString(obj, i+1); j < 0 {
			return 0, ReasonInvalidJSON
		}
		mid := len(l.buf)
		if esc {
			var lossy bool
			if l.buf, lossy = textparse.Unquote(l.buf, obj[i+1:j]); lossy {
				// values are bytes, as keys are: never rewritten to U+FFFD
				return l.refuse(start, mid, labelLossy, ReasonBadField)
			}
		} else {
			l.buf = append(l.buf, obj[i+1:j]...)
		}
		if r, why := checkLabelValue(l.buf[mid:]); r != ReasonNone {
			return l.refuse(start, mid, why, r)
		}
		l.ls[l.n] = labelSpan{int32(start), int32(mid), int32(len(l.buf))}
		l.n++
		if i = textparse.SkipSpace(obj, j+1); i >= n {
			return 0, ReasonInvalidJSON
		}
		switch obj[i] {
		case '}':
			return i + 1, ReasonNone
		case ',':
			i = textparse.SkipSpace(obj, i+1)
		default:
			return 0, ReasonInvalidJSON
		}
	}
}

// seriesOf returns the series string of key and the labels readLabels read, interned: key
// itself when every label's value is empty.
func (d *Decoder) seriesOf(key string) string {
	l := &d.lab
	for i := 1; i < l.n; i++ { // an insertion sort by name: at most window.MaxLabels
		for j := i; j > 0 && string(l.name(j)) < string(l.name(j-1)); j-- {
			l.ls[j], l.ls[j-1] = l.ls[j-1], l.ls[j]
		}
	}
	s := append(l.series[:0], key...)
	for _, p := range l.ls[:l.n] {
		s = appendSeriesLabel(s, l.buf[p.start:p.mid], l.buf[p.mid:p.end])
	}
	l.series = s
	if len(s) == len(key) {
		return key
	}
	v, h, ok := d.intern.lookup(s)
	if !ok {
		v = d.intern.add(s, h)
	}
	return v
}

// checkLabelValue is the rule of a label's value, after unescaping: at most
// window.MaxLabelValueLen bytes (ReasonKeyTooLong), and window.ValidName unless empty
// (ReasonBadField). Every format's labels are held to it.
func checkLabelValue(v []byte) (Reason, labelWhy) {
	if len(v) > window.MaxLabelValueLen {
		return ReasonKeyTooLong, labelTooLong
	}
	if len(v) > 0 && !window.ValidNameBytes(v) {
		return ReasonBadField, labelBadValue
	}
	return ReasonNone, 0
}

// appendSeriesLabel appends label name=value to the series string s in window's encoding
// (window.AppendSeries): nothing for an empty value, which is no label.
func appendSeriesLabel[N string | []byte](s []byte, name N, value []byte) []byte {
	if len(value) == 0 {
		return s
	}
	s = append(s, window.LabelSep)
	s = append(s, name...)
	s = append(s, '=')
	return append(s, value...)
}
