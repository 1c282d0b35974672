package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// NDJSONReader streams newline-delimited JSON: one object per line, blank lines skipped. Its
// columns are the keys of the first object. A value may be a JSON number or a string holding a
// number (some exporters quote numbers); a time may be a number of unix milliseconds or an
// RFC 3339 string. A missing key is ErrMissingColumn, a line that is not one JSON object is
// ErrSyntax; when a key repeats, the last one wins (as encoding/json).
//
// Each line is checked by a hand-written scanner that slices keys and values out of the line
// without decoding the whole object; strings with escapes are the only values that get decoded.
// Construct with NewNDJSONReader. Not safe for concurrent use.
type NDJSONReader struct {
	l        *lineBuf
	cols     []string
	first    [][]byte
	pending  bool
	firstAt  int64
	vname    string
	tname    string
	row      int64
	err      error
	selected bool
}

// NewNDJSONReader peeks at the first object of an NDJSON stream for its keys.
func NewNDJSONReader(r io.Reader) (*NDJSONReader, error) {
	d := &NDJSONReader{l: newLineBuf(r)}
	for {
		line, start, err := d.l.next()
		if err == io.EOF {
			return nil, fmt.Errorf("reading NDJSON: %w", ErrNoRows)
		}
		if err != nil {
			return nil, fmt.Errorf("reading NDJSON: %w", err)
		}
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		if len(trimJSONSpace(line)) == 0 {
			continue
		}
		d.firstAt = d.l.line
		o := jsonObject{b: line}
		for o.next() {
			key := o.keyString()
			val := o.val
			if o.kind == 's' {
				val = o.valString()
			}
			if i := indexOf(d.cols, key); i >= 0 {
				d.first[i] = bytes.Clone(val)
				continue
			}
			d.cols = append(d.cols, key)
			d.first = append(d.first, bytes.Clone(val))
		}
		if o.err != nil {
			return nil, fmt.Errorf("reading NDJSON: %w", &RowError{Row: 0, Line: d.firstAt, Err: o.err})
		}
		// Read parses the first line again; its fields were cloned above.
		d.pending = true
		d.l.lo = start // nothing was read since: the line is still in the buffer
		d.l.line--
		return d, nil
	}
}

// Columns returns the keys of the first object, in order.
func (d *NDJSONReader) Columns() []string { return d.cols }

// FirstRow returns the values of the first object, in Columns order: number text, string
// content, or the raw JSON of other values.
func (d *NDJSONReader) FirstRow() [][]byte { return d.first }

// Select chooses the value key and the time key ("" for none) that Read parses. The names must be
// keys of the first object.
func (d *NDJSONReader) Select(value, time string) error {
	if indexOf(d.cols, value) < 0 {
		return missingColumn(value, d.cols)
	}
	if time != "" && indexOf(d.cols, time) < 0 {
		return missingColumn(time, d.cols)
	}
	d.vname, d.tname, d.selected = value, time, true
	return nil
}

// Read parses the next rows: see Reader.
func (d *NDJSONReader) Read(vals []float64, ts []int64) (int, error) {
	if !d.selected {
		return 0, fmt.Errorf("batch: NDJSONReader.Read before Select")
	}
	if d.err != nil {
		return 0, d.err
	}
	n := 0
	for n < len(vals) {
		line, _, err := d.l.next()
		if err != nil {
			if err != io.EOF {
				d.err = err
			}
			break
		}
		if d.pending {
			d.pending = false
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(trimJSONSpace(line)) == 0 {
			continue
		}
		at := d.l.line
		var fv, ft []byte
		var vk, tk byte
		o := jsonObject{b: line}
		for o.next() {
			if o.keyIs(d.vname) {
				fv, vk = o.val, o.kind
			} else if d.tname != "" && o.keyIs(d.tname) {
				ft, tk = o.val, o.kind
			}
		}
		if o.err != nil {
			d.err = &RowError{Row: d.row, Line: at, Err: o.err}
			break
		}
		if vk == 0 {
			d.err = &RowError{Row: d.row, Line: at, Column: d.vname, Err: ErrMissingColumn}
			break
		}
		if vk == 's' {
			fv = unescape(fv)
		}
		v, err := parseValue(fv)
		if err != nil || vk == 'o' {
			if err == nil {
				err = ErrNotNumber
			}
			d.err = &RowError{Row: d.row, Line: at, Column: d.vname, Value: shown(fv), Err: err}
			break
		}
		vals[n] = v
		if d.tname != "" {
			if tk == 0 {
				d.err = &RowError{Row: d.row, Line: at, Column: d.tname, Err: ErrMissingColumn}
				break
			}
			if tk == 's' {
				ft = unescape(ft)
			}
			t, err := ParseTime(trimSpace(ft))
			if err != nil {
				d.err = &RowError{Row: d.row, Line: at, Column: d.tname, Value: shown(ft), Err: err}
				break
			}
			ts[n] = t
		}
		d.row++
		n++
	}
	if n == 0 && d.err == nil {
		return 0, io.EOF
	}
	return n, d.err
}

// unescape decodes the content of a JSON string that contains escapes (rare: allocates).
func unescape(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
		return raw
	}
	return []byte(s)
}

func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isJSONSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonObject walks the top-level members of one JSON object. After next returns true, key is the
// raw key (between the quotes, escapes kept), val the raw value: string content for kind 's',
// the token for 'n' (numbers and literals), the whole text for 'o' (objects, arrays). When next
// returns false, err says whether the object was malformed.
type jsonObject struct {
	b       []byte
	i       int
	started bool
	key     []byte
	val     []byte
	kind    byte
	err     error
}

func (o *jsonObject) fail(what string) bool {
	o.err = fmt.Errorf("%w: not a JSON object (%s at byte %d)", ErrSyntax, what, o.i)
	return false
}

func (o *jsonObject) ws() {
	for o.i < len(o.b) && isJSONSpace(o.b[o.i]) {
		o.i++
	}
}

func (o *jsonObject) next() bool {
	if o.err != nil {
		return false
	}
	o.ws()
	if !o.started {
		o.started = true
		if o.i >= len(o.b) || o.b[o.i] != '{' {
			return o.fail("no opening brace")
		}
		o.i++
		o.ws()
		if o.i < len(o.b) && o.b[o.i] == '}' {
			return o.end()
		}
	} else {
		if o.i >= len(o.b) {
			return o.fail("unexpected end")
		}
		switch o.b[o.i] {
		case '}':
			return o.end()
		case ',':
			o.i++
			o.ws()
		default:
			return o.fail("expected , or }")
		}
	}
	if o.i >= len(o.b) || o.b[o.i] != '"' {
		return o.fail("expected a key")
	}
	k, ok := o.str()
	if !ok {
		return o.fail("unterminated key")
	}
	o.key = k
	o.ws()
	if o.i >= len(o.b) || o.b[o.i] != ':' {
		return o.fail("expected :")
	}
	o.i++
	o.ws()
	if o.i >= len(o.b) {
		return o.fail("missing value")
	}
	switch c := o.b[o.i]; {
	case c == '"':
		v, ok := o.str()
		if !ok {
			return o.fail("unterminated string")
		}
		o.val, o.kind = v, 's'
	case c == '{' || c == '[':
		start := o.i
		if !o.skipNested() {
			return o.fail("unbalanced brackets")
		}
		o.val, o.kind = o.b[start:o.i], 'o'
	default:
		start := o.i
		for o.i < len(o.b) && o.b[o.i] != ',' && o.b[o.i] != '}' && !isJSONSpace(o.b[o.i]) {
			o.i++
		}
		if o.i == start {
			return o.fail("missing value")
		}
		o.val, o.kind = o.b[start:o.i], 'n'
	}
	return true
}

// end checks that only whitespace follows the closing brace.
func (o *jsonObject) end() bool {
	o.i++
	o.ws()
	if o.i != len(o.b) {
		return o.fail("text after the object")
	}
	return false
}

// str consumes a string starting at the opening quote and returns its raw content.
func (o *jsonObject) str() ([]byte, bool) {
	start := o.i + 1
	for j := start; j < len(o.b); j++ {
		switch o.b[j] {
		case '\\':
			j++
		case '"':
			o.i = j + 1
			return o.b[start:j], true
		}
	}
	return nil, false
}

// skipNested consumes a balanced object or array, strings included.
func (o *jsonObject) skipNested() bool {
	depth := 0
	for o.i < len(o.b) {
		switch o.b[o.i] {
		case '"':
			if _, ok := o.str(); !ok {
				return false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				o.i++
				return true
			}
		}
		o.i++
	}
	return false
}

// keyIs compares the current key with name, decoding escapes only when the key has any.
func (o *jsonObject) keyIs(name string) bool {
	if bytes.IndexByte(o.key, '\\') < 0 {
		return string(o.key) == name
	}
	return string(unescape(o.key)) == name
}

func (o *jsonObject) keyString() string { return string(unescape(o.key)) }

func (o *jsonObject) valString() []byte { return unescape(o.val) }
