package event

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Every refusal of the decoder says which field and what is wrong with it, in one printable
// line, the quoted values clipped.
func TestExplain(t *testing.T) {
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 300)
	zeros := strings.Repeat("0", 100)
	for _, tc := range []struct{ line, want string }{
		{`{"key":"a","metric":"m"}`, `no field "value"`},
		{`{"metric":"m","value":1}`, `no field "key"`},
		{`{"key":null,"metric":"m","value":1}`, `field "key": null`},
		{`{"key":"","metric":"m","value":1}`, `field "key": empty`},
		{`{"key":7,"metric":"m","value":1}`, `field "key": a number, not a string`},
		{`{"key":"a\u0007b","metric":"m","value":1}`, `field "key": holds a control character`},
		{`{"key":"a\u202eb","metric":"m","value":1}`, `field "key": holds a bidi override or isolate`},
		{`{"key":"a\ud800","metric":"m","value":1}`, `field "key": not valid UTF-8`},
		{`{"key":"` + long + `","metric":"m","value":1}`, `field "key": 300 bytes, more than 256`},
		{`{"key":"a","metric":["m"],"value":1}`, `field "metric": an array, not a string`},
		{`{"key":"a","metric":"m","value":NaN}`, `field "value": NaN`},
		{`{"key":"a","metric":"m","value":-Infinity}`, `field "value": -Infinity`},
		{`{"key":"a","metric":"m","value":1e999}`, `field "value": 1e999 is beyond float64`},
		{`{"key":"a","metric":"m","value":"1"}`, `field "value": a string, not a number`},
		{`{"key":"a","metric":"m","value":1,"ts":"1764489600123"}`, `field "ts": "1764489600123" is a string of digits, not unix ms or RFC 3339`},
		{`{"key":"a","metric":"m","value":1,"ts":"yesterday\n"}`, `field "ts": "yesterday\n" is not RFC 3339`},
		{`{"key":"a","metric":"m","value":1,"ts":"2026-12-02 09:00"}`, `field "ts": "2026-12-02 09:00" is not RFC 3339`},
		{`{"key":"a","metric":"m","value":1,"count":1` + zeros + `}`, `field "count": 1` + zeros[:maxQuoted-1] + `… is not an integer ≥ 1`},
		{`{"key":"a","metric":"m","value":1,"ts":1.5}`, `field "ts": 1.5 is not an integer of unix ms`},
		{`{"key":"a","metric":"m","value":1,"ts":true}`, `field "ts": a boolean, not unix ms or RFC 3339`},
		{`{"key":"a","metric":"m","value":1,"count":0}`, `field "count": 0 is not an integer ≥ 1`},
		{`{"key":"a","metric":"m","value":1,"count":"2"}`, `field "count": a string, not an integer`},
		{`{"key":"a","metric":"m","value":1,"labels":[]}`, `field "labels": an array, not an object`},
		{`{"key":"a","metric":"m","value":1,"labels":{"Bad-Name":"x"}}`, `label "Bad-Name": not a Prometheus label name`},
		{`{"key":"a","metric":"m","value":1,"labels":{"key":"x"}}`, `label "key": reserved: the series' key is the event's "key" field`},
		{`{"key":"a","metric":"m","value":1,"labels":{"__name__":"x"}}`, `label "__name__": reserved: a name starting with __ is Prometheus' own`},
		{`{"key":"a","metric":"m","value":1,"labels":{"":"x"}}`, `label "": not a Prometheus label name`},
		{`{"key":"a","metric":"m","value":1,"labels":{"a":"x","a":"y"}}`, `label "a": given twice`},
		{`{"key":"a","metric":"m","key":"b","value":1}`, `field "key": given twice (a field appears at most once)`},
		{`{"key":"a","metric":"m","value":1,"ts":1,"value":2,"ts":2}`, `field "value": given twice (a field appears at most once)`},
		{`{"key":"a","metric":"m","value":1,"labels":{"code":200}}`, `label "code": value not a string`},
		{`{"key":"a","metric":"m","value":1,"labels":{"code":"\u0000"}}`, `label "code": value holds a control character`},
		{`{"key":"a","metric":"m","value":1,"labels":{"code":"` + long + `"}}`, `label "code": value of 300 bytes, more than 256`},
		{`{"key":"a","metric":"m","value":1,"labels":{"route\n` + long + `":"x"}}`, `label "route\n` + long[:maxQuoted-6] + `"…: not a Prometheus label name`},
		{`{"key":"a","metric":"m","value":1} x`, `invalid JSON: text after the object at byte 35`},
		{`{"key":"a","metric":NaN,"value":1}`, `invalid JSON: NaN or Infinity outside the value`},
		{`{"key":"a","metric":"m","value":1}`, ``},
	} {
		if got := d.Explain([]byte(tc.line)); got != tc.want {
			t.Errorf("Explain(%.80s)\n got %s\nwant %s", tc.line, got, tc.want)
		}
		if _, r := d.Decode([]byte(tc.line), defTS); (r == ReasonNone) != (tc.want == "") {
			t.Errorf("Decode(%.80s) = %v, Explain says %q", tc.line, r, tc.want)
		}
	}
}

// checkExplain holds the detail of line, refused for r, to its promises: said, one printable
// line of UTF-8 whatever the line held, and short.
func checkExplain(t *testing.T, d *Decoder, line []byte, r Reason) {
	t.Helper()
	why := d.Explain(line)
	if why == "" {
		t.Fatalf("%q refused as %v, explained as nothing", line, r)
	}
	if len(why) > 512 || !utf8.ValidString(why) || strings.ContainsFunc(why, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		t.Fatalf("%q refused as %v, explained as %q: not one short printable line", line, r, why)
	}
}

// TestExplainOtherShape: a JSON line with none of slide's key, metric and value (an Envoy
// access log read without --event-map) was refused as `no field "key"`, as if one field
// were missing; the refusal now says the line is of another shape and how to read it.
func TestExplainOtherShape(t *testing.T) {
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	envoy := `{"start_time":"2026-12-03T12:30:00.000Z","method":"GET","response_code":200,"duration":7,"upstream_cluster":"pay"}`
	if got := d.Explain([]byte(envoy)); !strings.HasPrefix(got, `no field "key", "metric" or "value"`) || !strings.Contains(got, "--event-map") {
		t.Errorf("an access log line: %q; want it to say it has none of slide's fields and name --event-map", got)
	}
	// One field missing stays that field's refusal.
	if got := d.Explain([]byte(`{"metric":"m","value":1}`)); got != `no field "key"` {
		t.Errorf("no key: %q", got)
	}
}

// TestExplainOTLPAndZipkinJSON: an OTLP/JSON request or a Zipkin span list posted to
// POST /v1/events (or on a topic) read as slide's JSON was explained as an access log
// (`--event-map reads it`) or as a bare `no opening brace`; the refusal now names the
// --event-format that reads it.
func TestExplainOTLPAndZipkinJSON(t *testing.T) {
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"resourceSpans":[{"resource":{},"scopeSpans":[]}]}`, "--event-format otlp_json"},
		{`{"resource_spans":[]}`, "--event-format otlp_json"},
		{`{"resourceLogs":[{"scopeLogs":[]}]}`, "--event-format otlp_logs_json"},
		{` [{"traceId":"5b8efff798038103","id":"eee19b7ec3c1b174","name":"get /x"}]`, "--event-format zipkin_json"},
	} {
		got := d.Explain([]byte(tc.line))
		if !strings.Contains(got, tc.want) {
			t.Errorf("Explain(%.60s) = %q; want it to name %s", tc.line, got, tc.want)
		}
		if strings.Contains(got, "access log") {
			t.Errorf("Explain(%.60s) = %q; it is no access log", tc.line, got)
		}
		if _, r := d.Decode([]byte(tc.line), defTS); r == ReasonNone {
			t.Errorf("Decode(%.60s) accepted it", tc.line)
		}
	}
	// A list that is no span list keeps the plain parse error.
	if got := d.Explain([]byte(`[1,2]`)); strings.Contains(got, "zipkin") {
		t.Errorf("Explain([1,2]) = %q; not a span list", got)
	}
}
