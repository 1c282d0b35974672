package batch

import "bytes"

// fieldSplitter splits CSV records into fields for both CSV readers (CSVReader's rows with a
// quote and its header, csvRows' every row): RFC 4180 quotes, where a field that starts with
// '"' is quoted, "" inside it is a quote, and text after its closing quote is kept (as
// encoding/csv's LazyQuotes does). Its buffers are reused: the fields of one split stay
// valid until the next.
type fieldSplitter struct {
	fbuf   []byte // unescaped fields of a record with quotes
	offs   []int
	fields [][]byte
}

// split splits rec on delim; complete is false when a quoted field is still open at the end
// (the record goes on on the next line). A record is split into at most columnLimit + 1
// fields, however long it is: past the limit the count is wrong anyway. With trim, spaces and tabs around unquoted fields
// are dropped (csvRows); CSVReader trims where it parses. A record without a quote is split
// in place: its fields are slices of rec.
func (s *fieldSplitter) split(rec []byte, delim byte, trim bool) (fields [][]byte, complete bool) {
	cut := func(b []byte) []byte {
		if trim {
			return trimSpace(b)
		}
		return b
	}
	if bytes.IndexByte(rec, '"') < 0 {
		s.fields = s.fields[:0]
		for {
			j := bytes.IndexByte(rec, delim)
			if j < 0 || len(s.fields) == columnLimit { // past the limit: a wrong count anyway
				s.fields = append(s.fields, cut(rec))
				return s.fields, true
			}
			s.fields = append(s.fields, cut(rec[:j:j]))
			rec = rec[j+1:]
		}
	}
	s.fbuf, s.offs = s.fbuf[:0], s.offs[:0]
	i := 0
	for {
		start := len(s.fbuf)
		quoted := false
		if i < len(rec) && rec[i] == '"' { // a quote opens a field only as its first byte
			i, quoted = i+1, true
			for {
				j := bytes.IndexByte(rec[i:], '"')
				if j < 0 {
					return nil, false
				}
				s.fbuf = append(s.fbuf, rec[i:i+j]...)
				i += j + 1
				if i < len(rec) && rec[i] == '"' {
					s.fbuf = append(s.fbuf, '"')
					i++
					continue
				}
				break
			}
		}
		j := bytes.IndexByte(rec[i:], delim)
		if j < 0 {
			j = len(rec) - i
		}
		if quoted {
			s.fbuf = append(s.fbuf, rec[i:i+j]...)
		} else {
			s.fbuf = append(s.fbuf, cut(rec[i:i+j])...)
		}
		i += j
		s.offs = append(s.offs, start, len(s.fbuf))
		if i >= len(rec) || len(s.offs) > 2*columnLimit { // past the limit: a wrong count anyway
			break
		}
		i++ // the delimiter
	}
	s.fields = s.fields[:0]
	for k := 0; k < len(s.offs); k += 2 {
		s.fields = append(s.fields, s.fbuf[s.offs[k]:s.offs[k+1]:s.offs[k+1]])
	}
	return s.fields, true
}
