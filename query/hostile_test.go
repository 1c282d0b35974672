package query_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/query"
)

// hostile sends one request and checks what every answer to hostile input must be: the
// status wanted (never 500), a JSON body, for an error the code of its status (a 400 is
// bad_parameter naming param in "param", or bad_body when param is empty: the body as a
// whole is wrong), and a short body: a 1 MB parameter does not come back.
func (e *env) hostile(name, method, path string, body []byte, status int, param string) []byte {
	e.t.Helper()
	code, b, h := e.do(method, path, body)
	if code != status {
		e.t.Errorf("%s: %s %.80s = %d %.300s, want %d", name, method, path, code, b, status)
		return b
	}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s: Content-Type %q", name, ct)
	}
	if !json.Valid(b) {
		e.t.Errorf("%s: body is not JSON: %.300q", name, b)
		return b
	}
	if status == http.StatusOK {
		return b
	}
	var a errorAnswer
	_ = json.Unmarshal(b, &a)
	wantCode := map[int]httperr.Code{400: httperr.BadParameter, 404: httperr.NotFound, 413: httperr.BodyTooLarge}[status]
	if status == http.StatusBadRequest && param == "" {
		wantCode = httperr.BadBody
	}
	if a.Error.Message == "" || (wantCode != "" && a.Error.Code != string(wantCode)) {
		e.t.Errorf("%s: error %+v, want code %q and a message", name, a.Error, wantCode)
	}
	if param != "" && !strings.Contains(a.Error.Param, param) {
		e.t.Errorf("%s: error %+v does not name parameter %q", name, a.Error, param)
	}
	if len(b) > 2048 {
		e.t.Errorf("%s: a %d-byte error answer: the client's input is echoed back", name, len(b))
	}
	return b
}

// TestHostileReads throws bad and oversized parameters at the read routes. Each is a 400
// naming the parameter, or a 404 for a series that does not exist, whatever its bytes.
func TestHostileReads(t *testing.T) {
	e := allowEnv(t)
	odd := []string{"a\x00b", "line\nbreak", "tab\there", "é-ü"}
	e.seed(event{ts: t0, key: "tenant-1", metric: "latency_ms", value: 5})
	for _, k := range odd {
		e.seed(event{ts: t0, key: k, metric: "latency_ms", value: 1})
	}
	win := func(extra string) string { return "/v1/window?metric=latency_ms&key=tenant-1" + extra }
	qs := func(n int, dup bool) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if dup {
				b.WriteString("0.5")
			} else {
				fmt.Fprintf(&b, "0.%04d", i+1)
			}
		}
		return b.String()
	}
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	cases := []struct {
		name, path string
		status     int
		param      string
	}{
		// window
		{"window 0", win("&window=0"), 400, "window"},
		{"window -1s", win("&window=-1s"), 400, "window"},
		{"window 1e99h", win("&window=1e99h"), 400, "window"},
		{"window without unit", win("&window=5"), 400, "window"},
		{"window 5m5", win("&window=5m5"), 400, "window"},
		{"window overflows", win("&window=99999999999999999999s"), 400, "window"},
		{"window max int64 ns", win("&window=9223372036854775807ns"), 400, "window"},
		{"window NaN", win("&window=NaN"), 400, "window"},
		{"window leading space", win("&window=%205m"), 400, "window"},
		{"window NUL", win("&window=5m%00"), 400, "window"},
		{"window 1m after 1 MB of zeros", win("&window=" + long(1<<20-100, "0") + "1m"), 200, ""},
		{"window 1 MB of zeros", win("&window=" + long(1<<20-100, "0") + "7s"), 400, "window"},
		{"window empty = retention", win("&window="), 200, ""},
		// q
		{"q NaN", win("&q=NaN"), 400, "q"},
		{"q Inf", win("&q=Inf"), 400, "q"},
		{"q +Inf", win("&q=%2BInf"), 400, "q"},
		{"q -0.1", win("&q=-0.1"), 400, "q"},
		{"q 1.1", win("&q=1.1"), 400, "q"},
		{"q 0.95.5", win("&q=0.95.5"), 400, "q"},
		{"q p alone", win("&q=p"), 400, "q"},
		{"q p100.1", win("&q=p100.1"), 400, "q"},
		{"q p-5", win("&q=p-5"), 400, "q"},
		{"q 1000 distinct", win("&q=" + qs(1000, false)), 400, "q"},
		{"q 100000 distinct", win("&q=" + qs(100000, false)), 400, "q"},
		{"q 1000 duplicates", win("&q=" + qs(1000, true)), 200, ""},
		{"q empty item", win("&q=0.5,,0.9"), 400, "q"},
		{"q only a comma", win("&q=,"), 400, "q"},
		{"q repeated is joined", win("&q=0.5&q=0.9"), 200, ""},
		// k and limit
		{"k 0", "/v1/top?metric=latency_ms&k=0", 400, "k"},
		{"k -1", "/v1/top?metric=latency_ms&k=-1", 400, "k"},
		{"k over max", "/v1/top?metric=latency_ms&k=1001", 400, "k"},
		{"k 1e3", "/v1/top?metric=latency_ms&k=1e3", 400, "k"},
		{"k overflows", "/v1/top?metric=latency_ms&k=99999999999999999999", 400, "k"},
		{"k hex", "/v1/top?metric=latency_ms&k=0x10", 400, "k"},
		{"k 1 MB", "/v1/top?metric=latency_ms&k=" + long(1<<20-100, "9"), 400, "k"},
		{"limit 0", "/v1/series?limit=0", 400, "limit"},
		{"limit -5", "/v1/series?limit=-5", 400, "limit"},
		{"limit text", "/v1/series?limit=many", 400, "limit"},
		{"limit overflows", "/v1/series?limit=18446744073709551616", 400, "limit"},
		// cursor
		{"cursor not base64", "/v1/series?cursor=!!", 400, "cursor"},
		{"cursor NUL", "/v1/series?cursor=%00", 400, "cursor"},
		{"cursor without separator", "/v1/series?cursor=bm9udWw", 400, "cursor"},
		{"cursor padded", "/v1/series?cursor=bQ%3D%3D", 400, "cursor"},
		{"cursor 10k garbage", "/v1/series?cursor=" + long(10000, "QUFB"), 400, "cursor"},
		{"cursor 10k of NULs", "/v1/series?cursor=" + long(10000, "A"), 200, ""}, // a valid cursor: metric "", key of NULs
		{"cursor of an unknown series", "/v1/series?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("zzz\x00k")), 200, ""},
		// repeated and unknown parameters: refused, never ignored
		{"metric twice", "/v1/window?metric=latency_ms&metric=latency_ms&key=tenant-1", 400, "metric"},
		{"key twice", "/v1/window?metric=latency_ms&key=tenant-1&key=tenant-1", 400, "key"},
		{"window twice", win("&window=1m&window=1m"), 400, "window"},
		{"k twice", "/v1/top?metric=latency_ms&k=1&k=2", 400, "k"},
		{"unknown parameter", win("&windw=5m"), 400, "windw"},
		{"unknown parameter of 1 MB", win("&" + long(1<<20-100, "x") + "=1"), 400, "xxxxxxxx"},
		{"parameter on /v1/metrics", "/v1/metrics?metric=x", 400, "metric"},
		{"parameter named by invalid UTF-8", win("&%E1=1"), 400, "\ufffd"},
		{"parameter with an empty name", win("&=1"), 400, "query"},
		{"trailing ampersands are nothing", win("&&&"), 200, ""},
		{"malformed escape", "/v1/window?metric=%zz", 400, "query"},
		{"semicolon separator", "/v1/window?metric=latency_ms;key=tenant-1", 400, "query"},
		// keys: opaque bytes, looked up as they are; but UTF-8 (keys are bytes: the decoder
		// refuses one that is not, so "t\xff" names nothing and is the client's mistake)
		{"key empty", "/v1/window?metric=latency_ms&key=", 400, "key"},
		{"key 1 byte", "/v1/window?metric=latency_ms&key=x", 404, ""},
		{"key 10 kB", "/v1/window?metric=latency_ms&key=" + long(10<<10, "k"), 404, ""},
		{"key 1 MB", "/v1/window?metric=latency_ms&key=" + long(1<<20-200, "k"), 404, ""},
		// window.ValidName, the rule of every door: no series holds such a key, so asking
		// for one is the client's mistake (a store fed around the doors still lists them,
		// escaped, below)
		{"key NUL", "/v1/window?metric=latency_ms&key=" + url.QueryEscape("a\x00b"), 400, "key"},
		{"key newline", "/v1/window?metric=latency_ms&key=" + url.QueryEscape("line\nbreak"), 400, "key"},
		{"key ESC", "/v1/window?metric=latency_ms&key=" + url.QueryEscape("\x1b[31m"), 400, "key"},
		{"key C1", "/v1/window?metric=latency_ms&key=" + url.QueryEscape("csi\u009b31m"), 400, "key"},
		{"key bidi override", "/v1/window?metric=latency_ms&key=" + url.QueryEscape("rlo\u202ex"), 400, "key"},
		{"glob key bidi isolate", "/v1/top?metric=latency_ms&key=" + url.QueryEscape("\u2066*"), 400, "key"},
		{"prefix C1", "/v1/series?prefix=" + url.QueryEscape("\u0085"), 400, "prefix"},
		{"key invalid UTF-8", "/v1/window?metric=latency_ms&key=%FF%FE", 400, "key"},
		{"key 10 kB of invalid UTF-8", "/v1/window?metric=latency_ms&key=" + long(10<<10, "%FF"), 400, "key"},
		{"glob key 10 kB", "/v1/window?metric=latency_ms&key=" + long(5<<10, "*x"), 400, "key"},
		{"glob key at the cap", "/v1/window?metric=latency_ms&key=" + long(query.MaxKeyPatternBytes-1, "*") + "x", 404, ""},
		{"glob key in top 10 kB", "/v1/top?metric=latency_ms&key=" + long(10<<10, "*"), 400, "key"},
		// metric names: likewise
		{"metric empty", "/v1/window?metric=&key=a", 400, "metric"},
		{"metric 10 kB", "/v1/window?metric=" + long(10<<10, "m") + "&key=a", 404, ""},
		{"metric NUL", "/v1/window?metric=latency%00ms&key=tenant-1", 400, "metric"},
		{"metric bidi override", "/v1/range?metric=" + url.QueryEscape("lat\u202eency") + "&key=tenant-1&window=1m&step=10s", 400, "metric"},
		{"metric invalid UTF-8", "/v1/window?metric=%FF&key=tenant-1", 400, "metric"},
		{"prefix invalid UTF-8", "/v1/series?prefix=t%FF", 400, "prefix"},
		{"key invalid UTF-8 in top", "/v1/top?metric=latency_ms&key=t%FE*", 400, "key"},
		{"metric 10 kB in top", "/v1/top?metric=" + long(10<<10, "m"), 404, ""}, // no such metric: named, with the known ones
		{"prefix 10 kB", "/v1/series?prefix=" + long(10<<10, "p"), 200, ""},
		{"by garbage", "/v1/top?metric=latency_ms&by=" + long(10<<10, "%FF"), 400, "by"},
	}
	for _, c := range cases {
		b := e.hostile(c.name, "GET", c.path, nil, c.status, c.param)
		if c.status == 200 && strings.HasPrefix(c.path, "/v1/window") {
			var a windowAnswer
			if err := json.Unmarshal(b, &a); err != nil || a.Count == 0 {
				t.Errorf("%s: %s", c.name, b)
			}
		}
	}
	// A non-ASCII key is read as it was recorded; the odd ones (which no door admits: these
	// were put in the store directly) are listed as they were recorded, escaped in JSON.
	var a windowAnswer
	e.getJSON("/v1/window?metric=latency_ms&key="+url.QueryEscape("é-ü"), 200, &a)
	if a.Key != "é-ü" || a.Count != 1 {
		t.Errorf("key %q: answer key %q count %d", "é-ü", a.Key, a.Count)
	}
	var list struct{ Series []struct{ Key string } }
	e.getJSON("/v1/series?metric=latency_ms", 200, &list)
	var listed []string
	for _, se := range list.Series {
		listed = append(listed, se.Key)
	}
	for _, k := range odd {
		if !slices.Contains(listed, k) {
			t.Errorf("key %q not listed by /v1/series: %q", k, listed)
		}
	}
	// A request line over the server's header limit never reaches the API: net/http
	// answers 431 itself (not JSON).
	if code, _, _ := e.do("GET", "/v1/window?metric=latency_ms&key="+long(2<<20, "k"), nil); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 2 MB request line: %d, want 431 from net/http", code)
	}
	e.stillServing()
}

// TestHostileBodies throws oversized and malformed bodies at POST /v1/events and at the
// real limiter behind POST /v1/allow.
func TestHostileBodies(t *testing.T) {
	e := allowEnv(t)
	line := func(key, metric string) string {
		k, _ := json.Marshal(key)
		m, _ := json.Marshal(metric)
		return fmt.Sprintf(`{"ts":%d,"key":%s,"metric":%s,"value":1}`+"\n", t0, k, m)
	}
	// Oversized: refused whole, nothing recorded.
	e.hostile("events over the cap", "POST", "/v1/events", []byte(strings.Repeat(line("big", "latency_ms"), query.DefaultMaxBodyBytes/40)), 413, "")
	e.hostile("one event with a 1 MB key", "POST", "/v1/events", []byte(line(strings.Repeat("k", 1<<20), "latency_ms")), 413, "")
	if n := e.store.Len(); n != 0 {
		t.Fatalf("oversized bodies recorded %d series", n)
	}

	// Malformed lines are refused one by one with a reason; the request is a 200.
	for _, c := range []struct {
		name, body string
		reason     string // "" = accepted
	}{
		{"not JSON", "not json\n", "invalid_json"},
		{"truncated", `{"key":"a","metric":"m","value":1` + "\n", "invalid_json"},
		{"binary", "\x00\x01\x02\xff\n", "invalid_json"},
		{"array", "[1,2,3]\n", "invalid_json"},
		{"empty key", line("", "latency_ms"), "missing_field"},
		{"key 1 byte", line("k", "latency_ms"), ""},
		{"key 10 kB", line(strings.Repeat("k", 10<<10), "latency_ms"), "key_too_long"},
		{"key 256 bytes (the decoder's cap)", line(strings.Repeat("c", 256), "latency_ms"), ""},
		{"key 257 bytes", line(strings.Repeat("c", 257), "latency_ms"), "key_too_long"},
		{"key with NUL", line("n\x00ul", "latency_ms"), "bad_field"},
		{"key with newline (escaped)", line("new\nline", "latency_ms"), "bad_field"},
		{"key of invalid UTF-8", `{"key":"` + "\xff\xfe" + `","metric":"latency_ms","value":1}` + "\n", "bad_field"},
		{"key escaping a lone surrogate", `{"key":"t\ud800","metric":"latency_ms","value":1}` + "\n", "bad_field"},
		{"metric empty", line("k", ""), "missing_field"},
		{"metric with NUL", line("k", "lat\x00ency"), "bad_field"},
		{"metric 10 kB", line("k", strings.Repeat("m", 10<<10)), "key_too_long"},
		{"value NaN", `{"key":"k","metric":"m","value":NaN}` + "\n", "invalid_value"},
		{"value 1e999", `{"key":"k","metric":"m","value":1e999}` + "\n", "invalid_value"},
		{"value a string", `{"key":"k","metric":"m","value":"1"}` + "\n", "bad_field"},
		{"ts in the year 3000", `{"ts":32503680000000,"key":"k","metric":"m","value":1}` + "\n", "future"},
		{"deep nesting", `{"key":"k","metric":"m","value":1,"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}\n", "invalid_json"},
	} {
		b := e.hostile("events: "+c.name, "POST", "/v1/events", []byte(c.body), 200, "")
		var a eventsAnswer
		_ = json.Unmarshal(b, &a)
		switch {
		case c.reason == "" && (a.Accepted != 1 || len(a.Rejected) != 0):
			t.Errorf("events: %s: %s, want accepted", c.name, b)
		case c.reason != "" && (a.Accepted != 0 || a.Rejected[c.reason] != 1):
			t.Errorf("events: %s: %s, want refused as %s", c.name, b, c.reason)
		}
	}
	// The invalid UTF-8 key was not rewritten to U+FFFD and recorded (keys are bytes).
	e.hostile("the rewritten key", "GET", "/v1/window?metric=latency_ms&key="+url.QueryEscape("\ufffd\ufffd"), nil, 404, "")

	// POST /v1/allow: the limiter with its real memory policy.
	allow := func(name, body string, status int, param string) {
		t.Helper()
		e.hostile("allow: "+name, "POST", "/v1/allow", []byte(body), status, param)
	}
	allow("1 MB body", `{"policy":"per-tenant","key":"`+strings.Repeat("k", 1<<20)+`"}`, 413, "")
	allow("empty body", "", 400, "")
	allow("not JSON", "{", 400, "")
	allow("an array", "[]", 400, "")
	allow("null", "null", 400, "policy")
	allow("two objects", `{"policy":"per-tenant","key":"a"}{}`, 400, "")
	allow("policy a number", `{"policy":1,"key":"a"}`, 400, "policy")
	allow("unknown policy", `{"policy":"nope","key":"a"}`, 400, "policy")
	allow("17 policies", `{"policies":[`+strings.TrimSuffix(strings.Repeat(`"per-tenant",`, 17), ",")+`],"key":"a"}`, 400, "policies")
	allow("unknown field", `{"policy":"per-tenant","key":"a","kee":"b"}`, 400, "kee")
	allow("key empty", `{"policy":"per-tenant","key":""}`, 400, "key")
	allow("key 10 kB", `{"policy":"per-tenant","key":"`+strings.Repeat("k", 10<<10)+`"}`, 400, "key")
	allow("key with NUL", `{"policy":"per-tenant","key":"a\u0000b"}`, 400, "key")
	allow("key with newline", `{"policy":"per-tenant","key":"a\nb"}`, 400, "key")
	allow("key of invalid UTF-8", `{"policy":"per-tenant","key":"t`+"\xff"+`"}`, 400, "key")
	allow("key of invalid UTF-8, escaped elsewhere", `{"policy":"per-tenant","key":"t\u00e9`+"\xfe"+`"}`, 400, "key")
	allow("key escaping a lone surrogate", `{"policy":"per-tenant","key":"t\ud800"}`, 400, "key")
	allow("field name in another case", `{"Policy":"per-tenant","key":"a"}`, 400, "Policy")
	allow("duplicate field", `{"policy":"per-tenant","key":"a","key":"b"}`, 400, "key")
	allow("duplicate field, escaped", `{"policy":"per-tenant","key":"a","k\u0065y":"b"}`, 400, "key")
	allow("cost -1", `{"policy":"per-tenant","key":"a","cost":-1}`, 400, "cost")
	allow("cost 1e99", `{"policy":"per-tenant","key":"a","cost":1e99}`, 400, "cost")
	allow("cost overflows", `{"policy":"per-tenant","key":"a","cost":99999999999999999999}`, 400, "cost")
	allow("cost over the limit", `{"policy":"per-tenant","key":"a","cost":1001}`, 400, "cost")
	allow("deep nesting", `{"policy":"per-tenant","key":"a","x":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}`, 400, "x")
	allow("a good request still works", `{"policy":"per-tenant","key":"a"}`, 200, "")
	e.stillServing()
}

// stillServing checks that the server answers after the abuse and never answered 500.
func (e *env) stillServing() {
	e.t.Helper()
	if code, b, _ := e.do("GET", "/healthz", nil); code != 200 {
		e.t.Fatalf("/healthz after hostile input: %d %s", code, b)
	}
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "slide_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == "500" && m.GetCounter().GetValue() > 0 {
					e.t.Errorf("%v requests answered 500: %v", m.GetCounter().GetValue(), m.GetLabel())
				}
			}
		}
	}
}
