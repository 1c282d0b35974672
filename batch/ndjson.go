package batch

import (
	"bytes"
	"fmt"
	"io"

	"github.com/slide-metrics/slide/textparse"
)

// NDJSONReader streams newline-delimited JSON: one object per line, blank lines skipped. Its
// columns are the keys of the first object. A value may be a JSON number or a string holding a
// number (some exporters quote numbers); a time may be a number of unix milliseconds or an
// RFC 3339 string (textparse's one timestamp rule). A missing key is ErrMissingColumn, a line
// that is not one JSON object (as encoding/json reads JSON: NaN and Infinity are the one
// exception, refused as not a number) is ErrSyntax; when a key repeats, the last one wins (as
// encoding/json).
//
// Each line is checked by textparse's scanner, which slices keys and values out of the line
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
	obj      jsonObject // Read's scanner, knowing the selected names
}

// NewNDJSONReader peeks at the first object of an NDJSON stream for its keys.
func NewNDJSONReader(r io.Reader) (*NDJSONReader, error) {
	d := &NDJSONReader{l: newLineBuf(r)}
	_, start, cols, first, err := firstObject(d.l)
	if err != nil {
		return nil, err
	}
	d.cols, d.first, d.firstAt = cols, first, d.l.line
	// Read parses the first line again; its fields were cloned by firstObject.
	d.pending = true
	d.l.lo = start // nothing was read since: the line is still in the buffer
	d.l.line--
	return d, nil
}

// firstObject reads l up to its first line that is not blank (a UTF-8 BOM stripped) and
// returns it, where it starts in l's buffer, and its object's keys and values in order
// (string values unquoted, every value cloned; a repeated key keeps its last value). It is
// the header of both NDJSON readers.
func firstObject(l *lineBuf) (line []byte, start int, cols []string, first [][]byte, err error) {
	for {
		line, start, err = l.next()
		if err == io.EOF {
			return nil, 0, nil, nil, fmt.Errorf("reading NDJSON: %w", ErrNoRows)
		}
		if err != nil {
			return nil, 0, nil, nil, fmt.Errorf("reading NDJSON: %w", err)
		}
		line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		if len(trimJSONSpace(line)) == 0 {
			continue
		}
		o := jsonObject{b: line}
		index := map[string]int{}
		for o.next() {
			key := o.keyString()
			val := o.val
			if o.kind == 's' {
				val = o.valString()
			}
			if i, ok := index[key]; ok {
				first[i] = bytes.Clone(val)
				continue
			}
			if len(cols) == columnLimit {
				err := headerTooLarge(l.line, fmt.Sprintf("the first object has more than %d keys", columnLimit))
				return nil, 0, nil, nil, fmt.Errorf("reading NDJSON: %w", err)
			}
			index[key] = len(cols)
			cols = append(cols, key)
			first = append(first, bytes.Clone(val))
		}
		if o.err != nil {
			return nil, 0, nil, nil, fmt.Errorf("reading NDJSON: %w", &RowError{Line: l.line, Err: o.err})
		}
		return line, start, cols, first, nil
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
	if time == "" {
		d.obj.sc.SetNames(value)
	} else {
		d.obj.sc.SetNames(value, time)
	}
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
		o := &d.obj
		o.b, o.started, o.err = line, false, nil
		for o.next() {
			switch o.sc.Field { // the names Select gave the scanner
			case 0:
				fv, vk = o.val, o.kind
			case 1:
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
	out, _ := textparse.Unquote(nil, raw)
	return out
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

// jsonObject walks the top-level members of one JSON object with textparse's scanner. After
// next returns true, key is the raw key (between the quotes, escapes kept), val the raw value:
// string content for kind 's', the token for 'n' (numbers, literals, NaN and Infinity), the
// whole text for 'o' (objects, arrays). When next returns false, err says whether the object
// was malformed.
type jsonObject struct {
	b       []byte
	started bool
	sc      textparse.Scanner
	key     []byte
	val     []byte
	kind    byte
	err     error
}

func (o *jsonObject) next() bool {
	if !o.started {
		o.started = true
		o.sc.AllowNaN = true // refused by parseValue as not a number, as before
		o.sc.Reset(o.b)
	}
	if !o.sc.Next() {
		if se, ok := o.sc.Err().(*textparse.SyntaxError); ok {
			o.err = fmt.Errorf("%w: not a JSON object (%s at byte %d)", ErrSyntax, se.What, se.Offset)
		}
		return false
	}
	o.key = o.sc.Name.Bytes(o.b)
	v := o.sc.Value
	o.val = v.Bytes(o.b)
	switch v.Kind {
	case textparse.String:
		o.kind = 's'
	case textparse.Object, textparse.Array:
		o.kind = 'o'
	default:
		o.kind = 'n'
	}
	return true
}

// keyIs compares the current key with name, decoding escapes only when the key has any.
func (o *jsonObject) keyIs(name string) bool {
	if !o.sc.Name.Escaped {
		return string(o.key) == name
	}
	return string(unescape(o.key)) == name
}

func (o *jsonObject) keyString() string { return string(unescape(o.key)) }

func (o *jsonObject) valString() []byte { return unescape(o.val) }
