package event

import (
	"strings"
	"testing"

	"github.com/slide-metrics/slide/textparse"
)

// member scans line, one JSON object, and returns the value of its member "v" as the
// Scanner recorded it.
func member(t *testing.T, line string) textparse.Value {
	t.Helper()
	var sc textparse.Scanner
	sc.SetNames("v")
	var vals [2]textparse.Value
	sc.Reset([]byte(line))
	sc.Into(vals[:])
	for sc.Next() {
	}
	if !sc.Done() {
		t.Fatalf("%s: %v", line, sc.Err())
	}
	return vals[0]
}

// TS, Name and CheckName are the rules Decode holds ts, key and metric to, for a format
// that reads them among fields of its own: each agrees with Decode on the same text.
func TestFieldReaders(t *testing.T) {
	d := newTestDecoder(t) // MaxKeyLen 16
	for _, c := range []struct {
		line string
		want int64
		r    Reason
	}{
		{`{"v":1764489600123}`, 1764489600123, ReasonNone},
		{`{"v":-5}`, -5, ReasonNone},
		{`{"v":"2025-11-30T08:00:00.123Z"}`, 1764489600123, ReasonNone},
		{`{"v":"2025-11-30T08:00:00\u002e123Z"}`, 1764489600123, ReasonNone},
		{`{"v":null}`, defTS, ReasonNone},
		{`{}`, defTS, ReasonNone},
		{`{"v":"1764489600123"}`, 0, ReasonBadField}, // unix ms is a number, not a string of digits
		{`{"v":1764489600123.5}`, 0, ReasonBadField},
		{`{"v":1.7e12}`, 0, ReasonBadField},
		{`{"v":"2025-11-30 08:00:00Z"}`, 0, ReasonBadField},
		{`{"v":true}`, 0, ReasonBadField},
	} {
		ms, r := d.TS([]byte(c.line), member(t, c.line), defTS)
		if ms != c.want || r != c.r {
			t.Errorf("TS %s = %d, %v; want %d, %v", c.line, ms, r, c.want, c.r)
		}
		ts := strings.TrimPrefix(c.line[1:len(c.line)-1], `"v"`) // the same value as an event's ts
		if ts != "" {
			ts = `,"ts"` + ts
		}
		ev, dr := d.Decode([]byte(`{"key":"k","metric":"m","value":1`+ts+`}`), defTS)
		if dr != c.r || (dr == ReasonNone && ev.TS != c.want) {
			t.Errorf("Decode with ts %s = %d, %v; TS says %d, %v", c.line, ev.TS, dr, c.want, c.r)
		}
	}
	for _, c := range []struct {
		line, want string
		r          Reason
	}{
		{`{"v":"tenant-42"}`, "tenant-42", ReasonNone},
		{`{"v":"t\u00e9"}`, "té", ReasonNone},
		{`{"v":"a\u0000"}`, "", ReasonBadField},
		{"{\"v\":\"a\xff\"}", "", ReasonBadField},
		{`{"v":"a\ud800"}`, "", ReasonBadField},
		{`{"v":"\u202e"}`, "", ReasonBadField},
		{`{"v":""}`, "", ReasonMissingField},
		{`{"v":null}`, "", ReasonMissingField},
		{`{}`, "", ReasonMissingField},
		{`{"v":7}`, "", ReasonBadField},
		{`{"v":"` + strings.Repeat("k", 17) + `"}`, "", ReasonKeyTooLong},
	} {
		name, r := d.Name([]byte(c.line), member(t, c.line))
		if name != c.want || r != c.r {
			t.Errorf("Name %s = %q, %v; want %q, %v", c.line, name, r, c.want, c.r)
		}
		if c.line == `{}` || strings.Contains(c.line, "null") || strings.Contains(c.line, `\u`) || c.line == `{"v":7}` {
			continue // not text as a CSV field holds it
		}
		text := c.line[len(`{"v":"`) : len(c.line)-2]
		if got := d.CheckName(text); got != c.r {
			t.Errorf("CheckName(%q) = %v, want %v", text, got, c.r)
		}
	}
	if r := d.CheckName("a\x00"); r != ReasonBadField {
		t.Errorf("CheckName of a NUL: %v", r)
	}
}
