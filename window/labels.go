package window

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// A series is a metric and a set of labels, of which key is one: the default one, which every
// series has. The store keeps a series under one byte string, its series string:
//
//	key                                           a series with no label but key
//	key 0xFF name1 '=' value1 0xFF name2 '=' value2 …   otherwise, the other labels sorted by name
//
// A byte 0xFF never appears in valid UTF-8, and keys and label values are valid UTF-8
// (ValidName), so the split is unambiguous; label names follow Prometheus
// ([a-zA-Z_][a-zA-Z0-9_]*, never "key", never starting with "__", which Prometheus reserves).
// A series without labels is byte for byte its key, so snapshots, peer answers, exports,
// rules and policies written before labels read the same. This file is the one place that
// writes or parses the encoding.

// LabelSep is the byte before each label of a series string.
const LabelSep = 0xFF

// KeyLabel is the name of the key label.
const KeyLabel = "key"

// Bounds on labels (issue #27): at most MaxLabels labels besides key, each value at most
// MaxLabelValueLen bytes.
const (
	MaxLabels        = 16
	MaxLabelValueLen = 256
)

// Label is one label of a series other than key.
type Label struct{ Name, Value string }

// Errors of AppendSeries.
var (
	ErrLabelName  = errors.New("window: invalid label name")
	ErrLabelValue = errors.New("window: invalid label value")
	ErrLabelCount = errors.New("window: too many labels")
	ErrLabelTwice = errors.New("window: label given twice")
)

// ValidLabelName reports whether name may name a label other than key: Prometheus' rule
// [a-zA-Z_][a-zA-Z0-9_]*, not "key", not starting with "__".
func ValidLabelName(name string) bool {
	if name == "" || name == KeyLabel || strings.HasPrefix(name, "__") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// ValidLabelNameBytes is ValidLabelName of b's bytes, without a copy (a decoder's label names
// are bytes of its input).
func ValidLabelNameBytes(b []byte) bool {
	return ValidLabelName(unsafe.String(unsafe.SliceData(b), len(b))) // ValidLabelName keeps nothing
}

// CheckLabelValue reports whether v may be a label value: the key rule (ValidName) and at
// most MaxLabelValueLen bytes. The empty value is allowed: a series with label l="" is, as in
// Prometheus, a series without l, and AppendSeries leaves it out.
func CheckLabelValue(v string) error {
	if len(v) > MaxLabelValueLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrLabelValue, len(v), MaxLabelValueLen)
	}
	if v != "" && !ValidName(v) {
		return fmt.Errorf("%w: not UTF-8, or holding a control or bidi character", ErrLabelValue)
	}
	return nil
}

// SortLabels sorts ls by name in place, without allocating (an insertion sort: at most
// MaxLabels labels).
func SortLabels(ls []Label) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Name < ls[j-1].Name; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// AppendSeries appends the series string of key and ls to dst. ls must be sorted by name
// (SortLabels); labels with an empty value are left out. It checks each name and value, their
// number and that no name is given twice; the key itself is the caller's to check
// (ValidName), as it is for a series without labels. It allocates only when dst must grow.
func AppendSeries(dst []byte, key string, ls []Label) ([]byte, error) {
	dst = append(dst, key...)
	n := 0
	for i, l := range ls {
		if !ValidLabelName(l.Name) {
			return dst, fmt.Errorf("%w: %q", ErrLabelName, clipName(l.Name))
		}
		if i > 0 && ls[i-1].Name == l.Name {
			return dst, fmt.Errorf("%w: %q", ErrLabelTwice, l.Name)
		}
		if err := CheckLabelValue(l.Value); err != nil {
			return dst, fmt.Errorf("label %q: %w", l.Name, err)
		}
		if l.Value == "" {
			continue
		}
		if n++; n > MaxLabels {
			return dst, fmt.Errorf("%w: more than %d besides key", ErrLabelCount, MaxLabels)
		}
		dst = append(dst, LabelSep)
		dst = append(dst, l.Name...)
		dst = append(dst, '=')
		dst = append(dst, l.Value...)
	}
	return dst, nil
}

// SeriesKeyOf is the key of series string s.
func SeriesKeyOf(s string) string {
	if i := strings.IndexByte(s, LabelSep); i >= 0 {
		return s[:i]
	}
	return s
}

// HasLabels reports whether series string s has labels besides key.
func HasLabels(s string) bool { return strings.IndexByte(s, LabelSep) >= 0 }

// EachLabel calls fn with each label of series string s other than key, in name order, until
// fn returns false.
func EachLabel(s string, fn func(name, value string) bool) {
	i := strings.IndexByte(s, LabelSep)
	for i >= 0 {
		s = s[i+1:]
		i = strings.IndexByte(s, LabelSep)
		l := s
		if i >= 0 {
			l = s[:i]
		}
		eq := strings.IndexByte(l, '=')
		if eq < 0 {
			return // not written by AppendSeries
		}
		if !fn(l[:eq], l[eq+1:]) {
			return
		}
	}
}

// LabelValue is the value of label name in series string s ("" when it has none); the name
// "key" gives the key.
func LabelValue(s, name string) string {
	if name == KeyLabel {
		return SeriesKeyOf(s)
	}
	var v string
	EachLabel(s, func(n, val string) bool {
		if n == name {
			v = val
			return false
		}
		return n < name // sorted: past name, it is absent
	})
	return v
}

// CheckSeries reports whether s is a series string AppendSeries could have written from a
// valid key: what a snapshot or a peer's answer must hold to be admitted.
func CheckSeries(s string, maxKey int) error {
	key := SeriesKeyOf(s)
	if key == "" || len(key) > maxKey || !ValidName(key) {
		return ErrSnapshotName
	}
	if len(key) == len(s) {
		return nil
	}
	var prev string
	n := 0
	var err error
	rest := s[len(key):]
	for rest != "" {
		if rest[0] != LabelSep {
			return ErrSnapshotName
		}
		rest = rest[1:]
		l := rest
		if i := strings.IndexByte(rest, LabelSep); i >= 0 {
			l, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		eq := strings.IndexByte(l, '=')
		if eq < 0 {
			return ErrSnapshotName
		}
		name, value := l[:eq], l[eq+1:]
		n++
		switch {
		case !ValidLabelName(name), n > 1 && name <= prev, value == "", n > MaxLabels:
			err = ErrSnapshotName
		default:
			err = CheckLabelValue(value)
		}
		if err != nil {
			return ErrSnapshotName
		}
		prev = name
	}
	return nil
}
