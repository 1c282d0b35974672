package textparse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// members scans in and returns its members as name=value lines (names and strings
// unquoted), or the error.
func members(in string, nan bool) (string, error) {
	b := []byte(in)
	s := Scanner{AllowNaN: nan}
	s.Reset(b)
	var out []string
	for s.Next() {
		name, _ := Unquote(nil, s.Name.Bytes(b))
		val := s.Value.Bytes(b)
		if s.Value.Kind == String {
			val, _ = Unquote(nil, val)
		}
		out = append(out, fmt.Sprintf("%s=%s(%d)", name, val, s.Value.Kind))
	}
	return strings.Join(out, " "), s.Err()
}

func TestScanner(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{`{}`, ``, ``},
		{` {"a":1, "b" : "x\"y" ,"c":[1,{"d":null}],"e":true,"f":false,"g":null,"h":-2.5e3} `,
			`a=1(4) b=x"y(5) c=[1,{"d":null}](7) e=true(3) f=false(2) g=null(1) h=-2.5e3(4)`, ``},
		{`{"a":1,"a":2}`, `a=1(4) a=2(4)`, ``}, // repeats are reported, the caller decides
		{`{"k\u0065y":"t\u00e9"}`, `key=té(5)`, ``},
		{`{"a":{"b":{}}}`, `a={"b":{}}(6)`, ``},
		{`[1]`, ``, `no opening brace at byte 0`},
		{`{"a":1`, `a=1(4)`, `unexpected end at byte 6`},
		{`{"a":1} x`, `a=1(4)`, `text after the object at byte 8`},
		{`{"a":1,}`, `a=1(4)`, `expected a key at byte 7`},
		{`{"a" 1}`, ``, `expected : at byte 5`},
		{`{"a":01}`, `a=0(4)`, `expected , or } at byte 6`},
		{`{"a":-}`, ``, `invalid number at byte 5`},
		{`{"a":NaN}`, ``, `invalid value at byte 5`},
		{`{"a":"\q"}`, ``, `invalid string at byte 5`},
		{"{\"a\":\"tab\there\"}", ``, `invalid string at byte 5`},
		{`{"a":[1,]}`, ``, `invalid nested value at byte 5`},
		{`{"a":[}`, ``, `invalid nested value at byte 5`},
		{`{"a":` + strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting) + `}`, ``, `objects and arrays nested deeper than 10000 levels at byte 5`},
		{`{"a":1 "b":2}`, `a=1(4)`, `expected , or } at byte 7`},
	} {
		got, err := members(c.in, false)
		if got != c.want || fmt.Sprint(err) != map[bool]string{true: "<nil>", false: c.err}[c.err == ""] {
			t.Errorf("%s: %s, %v; want %s, %s", c.in, got, err, c.want, c.err)
		}
	}
	if got, err := members(`{"a":NaN,"b":-Infinity,"c":Infinity}`, true); err != nil || got != `a=NaN(8) b=-Infinity(8) c=Infinity(8)` {
		t.Errorf("AllowNaN: %s, %v", got, err)
	}
}

func TestScannerNesting(t *testing.T) {
	for _, depth := range []int{63, 64, 65, 200, MaxNesting - 1, MaxNesting} {
		in := `{"x":` + strings.Repeat(`[{"a":`, depth/2) + strings.Repeat("[", depth%2) + "1" + strings.Repeat("]", depth%2) + strings.Repeat("}]", depth/2) + `}`
		_, err := members(in, false)
		var m map[string]json.RawMessage
		jerr := json.Unmarshal([]byte(in), &m)
		if (err == nil) != (jerr == nil) {
			t.Errorf("depth %d: scanner %v, encoding/json %v", depth, err, jerr)
		}
	}
}

func TestScannerAllocatesNothing(t *testing.T) {
	b := []byte(`{"ts":1764489600123,"key":"tenant-42","metric":"latency_ms","value":87.5,"x":[{"y":[1,2,{"z":"é"}]}]}`)
	var s Scanner
	n := testing.AllocsPerRun(100, func() {
		s.Reset(b)
		for s.Next() {
		}
		if !s.Done() {
			t.Fatal(s.Err())
		}
	})
	if n != 0 {
		t.Fatalf("%v allocs per object", n)
	}
}

func TestElements(t *testing.T) {
	b := []byte(`{"p":[ "a" , 1,[2,3],{"b":"c"}, "d\n" ],"e":[]}`)
	var s Scanner
	s.Reset(b)
	var got []string
	for s.Next() {
		n := 0
		s.Elements(b, s.Value, func(v Value) bool {
			n++
			got = append(got, string(v.Bytes(b)))
			return true
		})
		got = append(got, fmt.Sprint(n))
	}
	if want := `a 1 [2,3] {"b":"c"} d\n 5 0`; strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}

var objectSeeds = []string{
	`{"ts": 1764489600123, "key": "tenant-42", "metric": "latency_ms", "value": 87.5}`,
	`{"key":"t\u00e9\"x","metric":"m","value":-2.5e3,"extra":[1,{"x":null}]}`,
	`{"key":"\ud800\u0041","v":"\ud83d\ude00","w":"a\/b\b\f\n\r\t"}`,
	"{\"k\":\"\xff\xfe\",\"long\":\"0123456789abcdefghij\\\"klmnop\"}",
	`{"a":[[[[]]]],"b":{"c":{"d":[true,false,null]}}}`,
	`{"a":1,"a":2}`, `{}`, ` { } `, `[1]`, `{"a":01}`, `{"a":1,}`, `{"a":NaN}`, `null`, ``,
}

// fuzzNames are FuzzScanner's SetNames: short ones (one compare), one sharing a first byte,
// a long one (scanned), one a prefix of another, a long one alone with its first byte, one
// past lens' lengths.
var fuzzNames = []string{"key", "metric", "ts", "value", "count", "kind", "timestamp", "k", "sampled", strings.Repeat("n", 40)}

// FuzzScanner holds the scanner to encoding/json: it accepts exactly the objects that
// json.Unmarshal accepts, Field names every member as SetNames says, every member's last value is encoding/json's (strings decoded by
// Unquote, other values as their raw text), Lossy agrees with Unquote, and an array's
// elements are encoding/json's.
func FuzzScanner(f *testing.F) {
	for _, s := range objectSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ref map[string]json.RawMessage
		refOK := json.Unmarshal(b, &ref) == nil && ref != nil
		var s Scanner
		s.SetNames(fuzzNames...)
		s.Reset(b)
		got := map[string]json.RawMessage{}
		for s.Next() {
			name, _ := Unquote(nil, s.Name.Bytes(b))
			if want := slices.Index(fuzzNames, string(name)); s.Field != want {
				t.Fatalf("%q: member %q has Field %d, want %d", b, name, s.Field, want)
			}
			v := s.Value
			raw := v.Bytes(b)
			if v.Kind == String {
				out, lossy := Unquote(nil, raw)
				if Lossy(raw) != lossy {
					t.Fatalf("%q: Lossy(%q) = %v, Unquote says %v", b, raw, !lossy, lossy)
				}
				raw, _ = json.Marshal(string(out))
			}
			if v.Kind == Array {
				var elems []json.RawMessage
				if err := json.Unmarshal(raw, &elems); err != nil {
					t.Fatalf("%q: array %q: %v", b, raw, err)
				}
				n := 0
				s.Elements(b, v, func(e Value) bool {
					eb := e.Bytes(b)
					if e.Kind == String {
						eb = b[e.Start-1 : e.End+1]
					}
					if !bytes.Equal(bytes.TrimSpace(elems[n]), eb) {
						t.Fatalf("%q: element %d %q, encoding/json %q", b, n, eb, elems[n])
					}
					n++
					return true
				})
				if n != len(elems) {
					t.Fatalf("%q: %d elements, encoding/json %d", b, n, len(elems))
				}
			}
			got[string(name)] = raw
		}
		if s.Done() != refOK {
			t.Fatalf("%q: scanner done=%v (%v), encoding/json ok=%v", b, s.Done(), s.Err(), refOK)
		}
		if !refOK {
			return
		}
		for k, rv := range ref {
			if bytes.Equal(got[k], bytes.TrimSpace(rv)) {
				continue // the same text (1e700 among them, which no float64 holds)
			}
			var want any
			_ = json.Unmarshal(rv, &want)
			var have any
			if err := json.Unmarshal(got[k], &have); err != nil || fmt.Sprint(have) != fmt.Sprint(want) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", b, k, got[k], rv)
			}
		}
		if len(got) != len(ref) {
			t.Fatalf("%q: %d members, encoding/json %d", b, len(got), len(ref))
		}
	})
}

func TestScannerField(t *testing.T) {
	var s Scanner
	s.SetNames(fuzzNames...)
	for _, c := range []struct{ in, want string }{
		{`{"ts":1,"key":"a","metric":"m","value":2,"count":3}`, "2 0 1 3 4"},
		{`{"k\u0065y":1, "ts" :2,"timestamp":3,"kind":4,"k":5,"ke":6,"keys":7,"":8}`, "0 2 6 5 7 -1 -1 -1"},
		{`{"x":1,"ts":2}`, "-1 2"}, // "ts" within the last eight bytes: scanned, not compared
		{`{"Key":1,"metricx":2,"metri":3}`, "-1 -1 -1"},
		{`{"sampled":1,"s":2,"sampledx":3,"s\u0061mpled":4,"timestamp":5,"time":6}`, "8 -1 -1 8 6 -1"}, // long names, one alone with its first byte
		{`{"` + strings.Repeat("n", 40) + `":1,"` + strings.Repeat("n", 41) + `":2,"` + strings.Repeat("n", 31) + `":3}`, "9 -1 -1"},
	} {
		b := []byte(c.in)
		s.Reset(b)
		var got []string
		for s.Next() {
			got = append(got, fmt.Sprint(s.Field))
		}
		if !s.Done() || strings.Join(got, " ") != c.want {
			t.Errorf("%s: fields %v (%v), want %s", c.in, got, s.Err(), c.want)
		}
	}
}
