package batch

import (
	"fmt"
	"testing"
)

// TestFieldSplitter: the one splitter both CSV readers use, with and without trimming.
func TestFieldSplitter(t *testing.T) {
	for _, c := range []struct {
		rec          string
		delim        byte
		raw, trimmed string // fields as %q, "open" for an unterminated quote
	}{
		{"a,b,c", ',', `["a" "b" "c"]`, `["a" "b" "c"]`},
		{" a , b ,", ',', `[" a " " b " ""]`, `["a" "b" ""]`},
		{`"x,y", 2`, ',', `["x,y" " 2"]`, `["x,y" "2"]`},
		{`"say ""hi""";3`, ';', `["say \"hi\"" "3"]`, `["say \"hi\"" "3"]`},
		{`"q" tail ,z`, ',', `["q tail " "z"]`, `["q tail " "z"]`},
		{` "not quoted",1`, ',', `[" \"not quoted\"" "1"]`, `["\"not quoted\"" "1"]`},
		{"\"line\nbreak\",1", ',', `["line\nbreak" "1"]`, `["line\nbreak" "1"]`},
		{`"open,1`, ',', "open", "open"},
		{"", ',', `[""]`, `[""]`},
		{"a\tb", '\t', `["a" "b"]`, `["a" "b"]`},
	} {
		var s fieldSplitter
		for _, trim := range []bool{false, true} {
			fields, complete := s.split([]byte(c.rec), c.delim, trim)
			got := "open"
			if complete {
				strs := make([]string, len(fields))
				for i, f := range fields {
					strs[i] = string(f)
				}
				got = fmt.Sprintf("%q", strs)
			}
			want := c.raw
			if trim {
				want = c.trimmed
			}
			if got != want {
				t.Errorf("split(%q, %q, trim %v) = %s, want %s", c.rec, c.delim, trim, got, want)
			}
		}
	}
}
