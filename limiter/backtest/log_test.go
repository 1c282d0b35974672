package backtest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// readAll reads log into its requests.
func readAll(log string) ([]Request, error) {
	var reqs []Request
	err := ReadLog(strings.NewReader(log), func(r Request) error { reqs = append(reqs, r); return nil })
	return reqs, err
}

// A request log's fields follow the rules of events, as ingest and POST /v1/events hold them:
// what an event's decoder refuses, the backtest refuses, naming the line and the reason. It
// took each of these before (encoding/json, a trimmed ts parsed as text, the key unchecked
// or rewritten to U+FFFD), so a log the server could never have received replayed.
func TestReadLogRefusesWhatEventsRefuse(t *testing.T) {
	long := strings.Repeat("k", 257)
	cases := []struct{ name, log, want string }{
		{"ts a string of digits", `{"ts":"1764489600123","key":"a"}`, `line 1: ts "1764489600123": bad_field`},
		{"ts a fraction", `{"ts":1764489600123.5,"key":"a"}`, `line 1: ts 1764489600123.5: bad_field`},
		{"ts loose RFC 3339", `{"ts":"2025-11-30 10:00:00Z","key":"a"}`, `line 1: ts "2025-11-30 10:00:00Z": bad_field`},
		{"key with a NUL", `{"ts":1,"key":"a"}` + "\n" + `{"ts":2,"key":"a\u0000"}`, `line 2: key "a\x00": bad_field`},
		{"key not UTF-8", "{\"ts\":1,\"key\":\"a\xff\"}", `line 1: key "a\xff": bad_field`},
		{"key a lone surrogate", `{"ts":1,"key":"a\ud800"}`, `line 1: key "a\ud800": bad_field`},
		{"key a bidi override", `{"ts":1,"key":"a\u202e"}`, `line 1: key "a\u202e": bad_field`},
		{"key empty", `{"ts":1,"key":""}`, `line 1: key "": missing_field`},
		{"key too long", `{"ts":1,"key":"` + long + `"}`, `(257 bytes)": key_too_long`},
		{"key a number", `{"ts":1,"key":42}`, `line 1: key 42: bad_field`},
		{"cost negative", `{"ts":1,"key":"a","cost":-1}`, `line 1: cost -1 is not an integer ≥ 0`},
		{"cost a fraction", `{"ts":1,"key":"a","cost":1.5}`, `line 1: cost 1.5 is not an integer ≥ 0`},
		{"cost a string", `{"ts":1,"key":"a","cost":"2"}`, `line 1: cost "2" is not an integer ≥ 0`},
		{"policy a number", `{"ts":1,"key":"a","policy":7}`, `line 1: policy 7 is not a string`},
		{"NaN", `{"ts":1,"key":"a","x":NaN}`, `line 1: invalid_json`},
		{"metric event ts a string of digits", `{"ts":"1764489600123","key":"a","metric":"m","value":1}`, `line 1: metric event refused: bad_field`},
		{"metric event count 0", `{"ts":1,"key":"a","metric":"m","value":1,"count":0}`, `line 1: metric event refused: bad_field`},
		{"metric event NaN", `{"ts":1,"key":"a","metric":"m","value":NaN}`, `line 1: metric event refused: invalid_value`},
		{"metric event key with a NUL", `{"ts":1,"key":"a\u0000","metric":"m","value":1}`, `line 1: metric event refused: bad_field`},
		{"metric event without value", `{"ts":1,"key":"a","metric":"m"}`, `line 1: metric event refused: missing_field`},
		{"metric event without ts", `{"key":"a","metric":"m","value":1}`, `line 1: a metric event without "ts"`},
		{"metric a number", `{"ts":1,"key":"a","metric":5,"value":1}`, `line 1: metric event refused: bad_field`},
		{"csv key with a NUL", "ts,key\n1,a\x00\n", `line 2: key "a\x00": bad_field`},
		{"csv key not UTF-8", "ts,key\n1,a\n2,a\xff\n", `line 3: key "a\xff": bad_field`},
		{"csv key empty", "ts,key\n1,\n", `line 2: key "": missing_field`},
		{"csv cost negative", "ts,key,cost\n1,a,-1\n", `line 2: cost "-1" is not an integer ≥ 0`},
		{"csv metric with a NUL", "ts,key,metric,value\n1,a,m\x00,1\n", `line 2: metric "m\x00": bad_field`},
		{"csv value NaN", "ts,key,metric,value\n1,a,m,NaN\n", `line 2: value "NaN": invalid_value`},
		{"csv count 0", "ts,key,metric,value,count\n1,a,m,1,0\n", `line 2: count "0": bad_field`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(c.log + "\n")
			if err == nil || !errors.Is(err, ErrLog) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q (wrapping ErrLog)", err, c.want)
			}
		})
	}
}

// What events take, the log takes: both forms of ts (in CSV either as text), a key of any
// valid UTF-8, a cost of 0 (a peek, as POST /v1/allow takes it), a metric event's count.
func TestReadLogTakesWhatEventsTake(t *testing.T) {
	at := time.UnixMilli(1764489600123)
	ndjson := `{"ts":1764489600123,"key":"tenant-42","cost":0}
{"ts":"2025-11-30T08:00:00.123Z","key":"t\u00e9","policy":"login","extra":{"x":[1]}}
{"ts":"2025-11-30T10:00:00.123+02:00","key":"a","metric":"cost","value":2.5,"count":3}
{"ts":1764489600123,"key":"a","metric":"","value":1}
{"ts":1764489600123,"key":"a","metric":null}
`
	csvLog := "ts,key,cost,policy,metric,value,count\n" +
		"1764489600123,tenant-42,0,,,,\n" +
		"2025-11-30T08:00:00.123Z,té,,login,,,\n" +
		"2025-11-30T10:00:00.123+02:00,a,,,cost,2.5,3\n" +
		"1764489600123,a,,,,1,\n" +
		"1764489600123,a,,,,,\n"
	want := []Request{
		{Time: at, Key: "tenant-42", Cost: 0, Line: 1},
		{Time: at, Key: "té", Cost: 1, Policy: "login", Line: 2},
		{Time: at, Key: "a", Cost: 1, Line: 3, Metric: "cost", Value: 2.5, Count: 3},
		{Time: at, Key: "a", Cost: 1, Line: 4},
		{Time: at, Key: "a", Cost: 1, Line: 5},
	}
	for name, log := range map[string]string{"ndjson": ndjson, "csv": csvLog} {
		got, err := readAll(log)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d requests, want %d", name, len(got), len(want))
		}
		for i := range want {
			w := want[i]
			if name == "csv" {
				w.Line++ // after the header
			}
			if g := got[i]; !g.Time.Equal(w.Time) || g.Key != w.Key || g.Cost != w.Cost || g.Policy != w.Policy ||
				g.Line != w.Line || g.Metric != w.Metric || g.Value != w.Value || g.Count != w.Count {
				t.Errorf("%s: request %d = %+v, want %+v", name, i, g, w)
			}
		}
	}
}
