package event

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/window"
)

// envoyLine is a line of Envoy Gateway's default JSON access log, as its proxies write it
// (every field of the default format; null for what the request did not have).
func envoyLine(start, method, path string, code, flags string, sent, duration int, cluster string) string {
	cl := "null"
	if cluster != "" {
		cl = `"` + cluster + `"`
	}
	return `{"start_time":"` + start + `","method":"` + method + `","x-envoy-origin-path":"` + path +
		`","protocol":"HTTP/1.1","response_code":` + code + `,"response_flags":"` + flags +
		`","response_code_details":"via_upstream","connection_termination_details":null,` +
		`"upstream_transport_failure_reason":null,"bytes_received":0,"bytes_sent":` + strconv.Itoa(sent) +
		`,"duration":` + strconv.Itoa(duration) + `,"x-envoy-upstream-service-time":null,` +
		`"x-forwarded-for":"10.244.0.12","user-agent":"curl/8.5.0",` +
		`"x-request-id":"ab1e4da7-5f1d-45ea-bb4a-fa1ccd03b82b",":authority":"pay.example.com",` +
		`"upstream_host":"10.244.0.13:3000","upstream_cluster":` + cl + `,` +
		`"upstream_local_address":"10.244.0.14:58822","downstream_local_address":"10.244.0.14:3000",` +
		`"downstream_remote_address":"10.244.0.12:34805","requested_server_name":null,` +
		`"route_name":"httproute/default/pay/rule/0/match/0/pay_example_com"}`
}

// nginxLine is a line of the nginx preset's log_format (docs/sre.md), as nginx writes it with
// escape=json.
func nginxLine(msec, host, method, uri string, status int, requestTime string, sent int) string {
	return `{"msec":` + msec + `,"host":"` + host + `","method":"` + method + `","uri":"` + uri +
		`","status":` + strconv.Itoa(status) + `,"request_time":` + requestTime + `,"bytes_sent":` + strconv.Itoa(sent) +
		`,"upstream_addr":"10.0.0.7:8080","request_id":"4f1c2e0b9a7d6c5e4f3a2b1c0d9e8f7a"}`
}

func presetDecoder(t testing.TB, name string) *MapDecoder {
	t.Helper()
	m, ok := Preset(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return md
}

type mapped struct {
	ev     window.Event
	r      Reason
	detail string
}

func decodeAll(md *MapDecoder, body string, def int64) []mapped {
	var out []mapped
	md.DecodeLines([]byte(body), def, func(line []byte, ev window.Event, r Reason) {
		m := mapped{ev: ev, r: r}
		if r != ReasonNone {
			m.detail = md.Explain(line)
		}
		out = append(out, m)
	})
	return out
}

func seriesOf(t testing.TB, key string, labels ...string) string {
	t.Helper()
	var ls []window.Label
	for i := 0; i+1 < len(labels); i += 2 {
		ls = append(ls, window.Label{Name: labels[i], Value: labels[i+1]})
	}
	window.SortLabels(ls)
	b, err := window.AppendSeries(nil, key, ls)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rfcMillis(t testing.TB, s string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

func TestMapEnvoyPreset(t *testing.T) {
	md := presetDecoder(t, "envoy")
	body := envoyLine("2026-12-02T09:05:00.123Z", "GET", "/pay?id=7", "200", "-", 466, 3, "httproute/default/pay/rule/0") + "\n\n" +
		envoyLine("2026-12-02T09:05:01.5Z", "POST", "/missing", "404", "NR", 0, 0, "") + "\n"
	got := decodeAll(md, body, 42)
	pay := seriesOf(t, "httproute/default/pay/rule/0", "code", "200", "method", "GET", "flags", "-")
	nr := seriesOf(t, "-", "code", "404", "method", "POST", "flags", "NR")
	want := []window.Event{
		{Metric: "latency_ms", Key: pay, Value: 3, Count: 1, TS: rfcMillis(t, "2026-12-02T09:05:00.123Z")},
		{Metric: "bytes_sent", Key: pay, Value: 466, Count: 1, TS: rfcMillis(t, "2026-12-02T09:05:00.123Z")},
		{Metric: "latency_ms", Key: nr, Value: 0, Count: 1, TS: rfcMillis(t, "2026-12-02T09:05:01.5Z")},
		{Metric: "bytes_sent", Key: nr, Value: 0, Count: 1, TS: rfcMillis(t, "2026-12-02T09:05:01.5Z")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].r != ReasonNone || got[i].ev != w {
			t.Errorf("event %d: %+v %s (%s), want %+v", i, got[i].ev, got[i].r, got[i].detail, w)
		}
	}
}

func TestMapNginxPreset(t *testing.T) {
	md := presetDecoder(t, "nginx")
	body := nginxLine("1764666300.123", "shop.example.com", "GET", "/cart", 200, "0.005", 612) + "\r\n" +
		nginxLine("1764666301.999", "shop.example.com", "POST", "/checkout", 502, "1.250", 157)
	got := decodeAll(md, body, 42)
	ok := seriesOf(t, "shop.example.com", "code", "200", "method", "GET")
	bad := seriesOf(t, "shop.example.com", "code", "502", "method", "POST")
	want := []window.Event{
		{Metric: "latency_ms", Key: ok, Value: 0.005 * 1000, Count: 1, TS: 1764666300123},
		{Metric: "bytes_sent", Key: ok, Value: 612, Count: 1, TS: 1764666300123},
		{Metric: "latency_ms", Key: bad, Value: 1.25 * 1000, Count: 1, TS: 1764666301999},
		{Metric: "bytes_sent", Key: bad, Value: 157, Count: 1, TS: 1764666301999},
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].r != ReasonNone || got[i].ev != w {
			t.Errorf("event %d: %+v %s (%s), want %+v", i, got[i].ev, got[i].r, got[i].detail, w)
		}
	}
}

// TestMapFields: nested paths, numbers and booleans as text, quoted numbers, the default
// key, the units of a numeric time, and a line without the time field taking the door's.
func TestMapFields(t *testing.T) {
	m := Map{Metrics: []MapMetric{{
		Metric: "latency_ms",
		TS:     MapTS{Field: "req.at", Unit: "us"},
		Value:  MapValue{Field: "req.timing.total", Scale: 0.001},
		Key:    MapKey{Field: "svc", Default: "unknown"},
		Labels: []MapLabel{{Name: "ok", Field: "ok"}, {Name: "code", Field: "res.code"}, {Name: "zone", Field: "zone"}},
	}}}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line string
		want window.Event
	}{
		{`{"svc":"pay","req":{"at":1764666300123456,"timing":{"total":2500}},"res":{"code":200},"ok":true,"zone":""}`,
			window.Event{Metric: "latency_ms", Key: seriesOf(t, "pay", "ok", "true", "code", "200"), Value: 2.5, Count: 1, TS: 1764666300123}},
		{`{"req":{"timing":{"total":"1500"},"at":"-1500"},"svc":null,"res":"flat","ok":false}`,
			window.Event{Metric: "latency_ms", Key: seriesOf(t, "unknown", "ok", "false"), Value: 1.5, Count: 1, TS: -2}},
		{` { "svc" : 7 , "req" : { "timing" : { "total" : 1e3 } } , "svc" : "last" } `,
			window.Event{Metric: "latency_ms", Key: "last", Value: 1, Count: 1, TS: 42}},
		{`{"svc":"é\u00e9","req":{"at":"2026-12-02T09:05:00.5+01:00","timing":{"total":0}}}`,
			window.Event{Metric: "latency_ms", Key: "éé", Value: 0, Count: 1, TS: rfcMillis(t, "2026-12-02T08:05:00.5Z")}},
	} {
		got := decodeAll(md, c.line, 42)
		if len(got) != 1 || got[0].r != ReasonNone || got[0].ev != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.line, got, c.want)
		}
	}
}

func TestUnitMillis(t *testing.T) {
	for _, c := range []struct {
		s    string
		unit string
		want int64
		ok   bool
	}{
		{"1764666300123", "ms", 1764666300123, true},
		{"1764666300123.9", "ms", 1764666300123, true},
		{"1764666300.123", "s", 1764666300123, true},
		{"1764666300.1239", "s", 1764666300123, true},
		{"1764666300", "s", 1764666300000, true},
		{"1764666300123456", "us", 1764666300123, true},
		{"1764666300123456789", "ns", 1764666300123, true},
		{"0", "ns", 0, true},
		{"999999", "ns", 0, true},
		{"-1", "us", -1, true},
		{"-1000", "us", -1, true},
		{"-1.5", "s", -1500, true},
		{"-0.0001", "s", -1, true},
		{"1e3", "ms", 0, false},
		{"99999999999999999999", "ms", 0, false},
		{"9007199254740993", "ms", 0, false},
		{"9007199254740992", "ms", 9007199254740992, true},
	} {
		got, ok := unitMillis([]byte(c.s), mapUnits[c.unit])
		if got != c.want || ok != c.ok {
			t.Errorf("unitMillis(%s, %s) = %d, %v; want %d, %v", c.s, c.unit, got, ok, c.want, c.ok)
		}
	}
}

// TestMapRefusals: each refusal's reason and its detail, naming the field.
func TestMapRefusals(t *testing.T) {
	md := presetDecoder(t, "envoy")
	base := envoyLine("2026-12-02T09:05:00.123Z", "GET", "/", "200", "-", 466, 3, "c")
	for _, c := range []struct {
		line   string
		reason Reason
		detail string
	}{
		{strings.Replace(base, `"duration":3,`, ``, 1), ReasonMissingField, `no field "duration"`},
		{strings.Replace(base, `"duration":3`, `"duration":null`, 1), ReasonMissingField, `field "duration": null`},
		{strings.Replace(base, `"duration":3`, `"duration":"fast"`, 1), ReasonBadField, `field "duration": "fast" is not a number`},
		{strings.Replace(base, `"duration":3`, `"duration":[3]`, 1), ReasonBadField, `field "duration": an array, not a number`},
		{strings.Replace(base, `"duration":3`, `"duration":1e999`, 1), ReasonInvalidValue, `field "duration": 1e999 is beyond float64`},
		{strings.Replace(base, `"duration":3`, `"duration":"1e999"`, 1), ReasonInvalidValue, `field "duration": "1e999" is beyond float64`},
		{strings.Replace(base, `"start_time":"2026-12-02T09:05:00.123Z"`, `"start_time":"yesterday"`, 1), ReasonBadField, `field "start_time": "yesterday" is neither RFC 3339 nor a number of ms`},
		{strings.Replace(base, `"upstream_cluster":"c"`, `"upstream_cluster":{"name":"c"}`, 1), ReasonBadField, `field "upstream_cluster": an object, not a key`},
		{strings.Replace(base, `"upstream_cluster":"c"`, `"upstream_cluster":"a\u0000b"`, 1), ReasonBadField, `field "upstream_cluster": holds a control character`},
		{strings.Replace(base, `"upstream_cluster":"c"`, `"upstream_cluster":"`+strings.Repeat("x", 300)+`"`, 1), ReasonKeyTooLong, `field "upstream_cluster": 300 bytes, more than 256`},
		{strings.Replace(base, `"method":"GET"`, `"method":{"v":"GET"}`, 1), ReasonBadField, `label "method": field "method": an object, not text`},
		{strings.Replace(base, `"method":"GET"`, `"method":"\ud800"`, 1), ReasonBadField, `label "method": field "method": value not valid UTF-8`},
		{strings.Replace(base, `"method":"GET"`, `"method":"`+strings.Repeat("G", 257)+`"`, 1), ReasonKeyTooLong, `label "method": field "method": value of 257 bytes, more than 256`},
		{strings.Replace(base, `"method":"GET"`, `"method":"G\u202eT"`, 1), ReasonBadField, `label "method": field "method": value holds a bidi override or isolate`},
		{strings.Replace(base, `"method":"GET"`, "\"method\":\"G\x7fT\"", 1), ReasonBadField, `label "method": field "method": value holds a control character`},
		{strings.Replace(base, `"upstream_cluster":"c"`, "\"upstream_cluster\":\"c\x7f\"", 1), ReasonBadField, `field "upstream_cluster": holds a control character`},
		{base[:len(base)-1], ReasonInvalidJSON, `invalid JSON: unexpected end at byte ` + strconv.Itoa(len(base)-1)},
		{`[1,2]`, ReasonInvalidJSON, `invalid JSON: no opening brace at byte 0`},
		{strings.Replace(base, `"duration":3`, `"duration":NaN`, 1), ReasonInvalidJSON, ``},
	} {
		got := decodeAll(md, c.line, 42)
		if len(got) == 0 || got[0].r != c.reason {
			t.Errorf("%.60s…: %+v, want %s", c.line, got, c.reason)
			continue
		}
		if c.reason == ReasonInvalidJSON {
			if len(got) != 1 {
				t.Errorf("%.60s…: %d refusals of a line that is not JSON, want 1", c.line, len(got))
			}
			if !strings.HasPrefix(got[0].detail, "invalid JSON: ") || c.detail != "" && got[0].detail != c.detail {
				t.Errorf("%.60s…: detail %q, want %q", c.line, got[0].detail, c.detail)
			}
			continue
		}
		if got[0].detail != c.detail {
			t.Errorf("%.60s…: detail %q, want %q", c.line, got[0].detail, c.detail)
		}
	}
	// Metrics refused for different things: each said once.
	line2 := strings.Replace(strings.Replace(base, `"bytes_sent":466`, `"bytes_sent":"many"`, 1), `"duration":3,`, ``, 1)
	if got := decodeAll(md, line2, 42); len(got) != 2 || got[0].detail != `no field "duration"; field "bytes_sent": "many" is not a number` {
		t.Errorf("two metrics refused for two things: %+v", got)
	}
	// The second metric refused alone.
	line := strings.Replace(base, `"bytes_sent":466,`, ``, 1)
	got := decodeAll(md, line, 42)
	if len(got) != 2 || got[0].r != ReasonNone || got[1].r != ReasonMissingField || got[1].detail != `no field "bytes_sent"` {
		t.Errorf("a line without bytes_sent: %+v", got)
	}
}

// TestMapValidate: a map's problems, each with where it was written.
func TestMapValidate(t *testing.T) {
	good := MapMetric{Metric: "m", Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"}, Source: "f.yaml:3"}
	for _, c := range []struct {
		edit func(*MapMetric)
		want string
	}{
		{func(m *MapMetric) { m.Metric = "" }, `f.yaml:3: no metric`},
		{func(m *MapMetric) { m.Metric = "a\x00" }, `f.yaml:3: metric "a\x00": metric: not UTF-8`},
		{func(m *MapMetric) { m.Value.Field = "" }, `f.yaml:3: metric "m": value: no field`},
		{func(m *MapMetric) { m.Key.Field = "a..b" }, `f.yaml:3: metric "m": key: field "a..b": an empty member name`},
		{func(m *MapMetric) { m.TS = MapTS{Field: "t", Unit: "min"} }, `f.yaml:3: metric "m": ts: unit "min": want s, ms, us or ns`},
		{func(m *MapMetric) { m.Labels = []MapLabel{{Name: "Bad-Name", Field: "x"}} }, `f.yaml:3: metric "m": label "Bad-Name": not a label name`},
		{func(m *MapMetric) { m.Labels = []MapLabel{{Name: "key", Field: "x"}} }, `f.yaml:3: metric "m": label "key": not a label name`},
		{func(m *MapMetric) { m.Labels = []MapLabel{{Name: "a", Field: "x"}, {Name: "a", Field: "y"}} }, `f.yaml:3: metric "m": label "a": given twice`},
		{func(m *MapMetric) { m.Labels = []MapLabel{{Name: "a"}} }, `f.yaml:3: metric "m": label "a": no field`},
		{func(m *MapMetric) { m.Key.Default = "x\ny" }, `f.yaml:3: metric "m": key: default "x\ny": not a valid key`},
		{func(m *MapMetric) { m.Trace = MapTrace{Span: "span_id"} }, `f.yaml:3: metric "m": trace: span without field`},
		{func(m *MapMetric) { m.Trace = MapTrace{Field: "a."} }, `f.yaml:3: metric "m": trace: field "a.": an empty member name`},
		{func(m *MapMetric) { m.Trace = MapTrace{Field: "tp", Span: ".s"} }, `f.yaml:3: metric "m": trace: span: field ".s": an empty member name`},
	} {
		mm := good
		c.edit(&mm)
		err := Map{Metrics: []MapMetric{mm}}.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s…", mm, err, c.want)
		}
		if _, err2 := NewMapDecoder(Map{Metrics: []MapMetric{mm}}, Config{}); err2 == nil {
			t.Errorf("%+v: NewMapDecoder took it", mm)
		}
	}
	var wide Map // 5 metrics of 16 labels each: 82 fields in one object, more than a level holds
	for i := range 5 {
		mm := MapMetric{Metric: "m" + strconv.Itoa(i), Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"}}
		for j := range window.MaxLabels {
			mm.Labels = append(mm.Labels, MapLabel{Name: "l" + strconv.Itoa(j), Field: "f" + strconv.Itoa(16*i+j)})
		}
		wide.Metrics = append(wide.Metrics, mm)
	}
	if _, err := NewMapDecoder(wide, Config{}); err == nil || !strings.Contains(err.Error(), "fields in one object, at most 64") {
		t.Errorf("a map of 82 fields in one object: %v", err)
	}
	if err := (Map{}).Validate(); err == nil {
		t.Error("a map without metrics validated")
	}
	if err := (Map{Metrics: []MapMetric{good}}).Validate(); err != nil {
		t.Error(err)
	}
	for _, name := range PresetNames() {
		if m, _ := Preset(name); m.Validate() != nil {
			t.Errorf("preset %s: %v", name, m.Validate())
		}
	}
}

// TestMapAllocs: decoding a preset's line allocates nothing once its series are interned.
func TestMapAllocs(t *testing.T) {
	for _, c := range []struct{ preset, line string }{
		{"envoy", envoyLine("2026-12-02T09:05:00.123Z", "GET", "/pay", "200", "-", 466, 3, "httproute/default/pay/rule/0")},
		{"nginx", nginxLine("1764666300.123", "shop.example.com", "GET", "/cart", 200, "0.005", 612)},
	} {
		md := presetDecoder(t, c.preset)
		body := []byte(c.line)
		n := 0
		fn := func(_ []byte, ev window.Event, r Reason) {
			if r == ReasonNone {
				n++
			}
		}
		md.DecodeLines(body, 0, fn)
		if a := testing.AllocsPerRun(200, func() { md.DecodeLines(body, 0, fn) }); a != 0 {
			t.Errorf("%s: %.1f allocations per line, want 0", c.preset, a)
		}
		if n != 2*202 { // one line before, one warm-up run, 200 measured
			t.Errorf("%s: %d events accepted, want %d", c.preset, n, 2*202)
		}
	}
}

// TestMapSharedReads: metrics sharing a key and labels, or a time field, share what was read
// of the line, and never what was read of the line before (a refused metric included).
func TestMapSharedReads(t *testing.T) {
	m := Map{Metrics: []MapMetric{
		{Metric: "a", TS: MapTS{Field: "t"}, Value: MapValue{Field: "x"}, Key: MapKey{Field: "k"}, Labels: []MapLabel{{Name: "c", Field: "c"}}},
		{Metric: "b", TS: MapTS{Field: "t"}, Value: MapValue{Field: "y"}, Key: MapKey{Field: "k"}, Labels: []MapLabel{{Name: "c", Field: "c"}}},
	}}
	md, err := NewMapDecoder(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAll(md, `{"t":1000,"k":"one","c":"x","x":1,"y":2}`+"\n"+
		`{"t":2000,"k":"two","c":"y","y":3}`+"\n"+ // a refused: b takes this line's time and series
		`{"t":3000,"k":"t\u0000","c":"z","x":4,"y":5}`+"\n"+ // both refused for the key
		`{"t":4000,"k":"four","x":6,"y":7}`, 0)
	want := []mapped{
		{ev: window.Event{Metric: "a", Key: seriesOf(t, "one", "c", "x"), Value: 1, Count: 1, TS: 1000}},
		{ev: window.Event{Metric: "b", Key: seriesOf(t, "one", "c", "x"), Value: 2, Count: 1, TS: 1000}},
		{r: ReasonMissingField, detail: `no field "x"`},
		{ev: window.Event{Metric: "b", Key: seriesOf(t, "two", "c", "y"), Value: 3, Count: 1, TS: 2000}},
		{r: ReasonBadField, detail: `field "k": holds a control character`},
		{r: ReasonBadField, detail: `field "k": holds a control character`},
		{ev: window.Event{Metric: "a", Key: "four", Value: 6, Count: 1, TS: 4000}},
		{ev: window.Event{Metric: "b", Key: "four", Value: 7, Count: 1, TS: 4000}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// TestMapLines: a body is cut into lines at its newlines, whatever an object spans: an object
// over several lines is that many refused lines, blank lines are skipped, a carriage return
// or spaces end a line as they do slide's events, and two objects on a line are not JSON.
func TestMapLines(t *testing.T) {
	md, err := NewMapDecoder(Map{Metrics: []MapMetric{{Metric: "m", Value: MapValue{Field: "v"}, Key: MapKey{Field: "k"},
		Labels: []MapLabel{{Name: "o", Field: "o"}}}}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	body := "{\"k\":\"a\",\"v\":1}\r\n" + // CRLF
		"  \t\n\n" + // blank
		" {\"k\": \"b\", \"v\": 2 }  \n" + // spaced
		"{\"k\":\"c\",\n\"v\":3}\n" + // an object over two lines: two refusals
		"{\"k\":\"d\",\"v\":4,\"o\":{\"x\":\n1}}\n" + // a newline inside a nested value
		"{\"k\":\"e\",\"v\":5}{\"k\":\"f\",\"v\":6}\n" + // two objects
		"{\"k\":\"g\",\"v\":7,\"o\":[1, {\"y\": 2}]}" // no newline at the end
	var got []string
	md.DecodeLines([]byte(body), 0, func(line []byte, ev window.Event, r Reason) {
		got = append(got, strconv.Quote(string(line))+" "+r.String()+" "+strconv.Quote(ev.Key))
	})
	want := []string{
		`"{\"k\":\"a\",\"v\":1}\r" none "a"`,
		`" {\"k\": \"b\", \"v\": 2 }  " none "b"`,
		`"{\"k\":\"c\"," invalid_json ""`,
		`"\"v\":3}" invalid_json ""`,
		`"{\"k\":\"d\",\"v\":4,\"o\":{\"x\":" invalid_json ""`,
		`"1}}" invalid_json ""`,
		`"{\"k\":\"e\",\"v\":5}{\"k\":\"f\",\"v\":6}" invalid_json ""`,
		`"{\"k\":\"g\",\"v\":7,\"o\":[1, {\"y\": 2}]}" bad_field ""`, // an array is no label
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
