package event

import (
	"math"
	"testing"

	"github.com/slide-metrics/slide/window"
)

func TestAppendRoundTrip(t *testing.T) {
	d := newTestDecoder(t)
	d.maxKey = 1 << 10
	evs := []window.Event{
		{TS: 1764489600123, Key: "tenant-42", Metric: "latency_ms", Value: 87.5, Count: 1},
		{TS: -5, Key: "a\"b\\c/<>&\u2028", Metric: "m é 😀", Value: -0.1, Count: 1 << 40},
		{TS: 0, Key: "k", Metric: "m", Value: 1e300, Count: 1},
		{TS: math.MaxInt64, Key: "k", Metric: "m", Value: 5e-324, Count: 1},
		{TS: 1, Key: "k\xffcode=200\xffroute=/pay", Metric: "m", Value: 1, Count: 1},
		{TS: 1, Key: "a\"b\xffZ=1\xff_=\u00e9\"\\\xffa=x y", Metric: "m", Value: 2, Count: 3},
		{TS: 1, Key: "k", Metric: "m", Value: 3, Count: 1, TraceID: [16]byte{0: 0x4b, 15: 0x36}, SpanID: [8]byte{0xff, 7: 1}},
		{TS: 1, Key: "k\xffa=1", Metric: "m", Value: 3, Count: 2, TraceID: [16]byte{8: 0x46, 15: 0xad}}, // a 64-bit id, no span id
	}
	for _, ev := range evs {
		line := Append(nil, ev)
		got, r := d.Decode(line, 0)
		if r != ReasonNone || got != ev {
			t.Errorf("%s decoded to %+v %v, want %+v", line, got, r, ev)
		}
	}
	// Control characters are escaped by the encoder, and refused by the decoder (bad_field).
	ctl := Append(nil, window.Event{TS: 1, Key: "a\n\t\r\x00\x1f\x7f", Metric: "m", Value: 1, Count: 1})
	if want := `{"ts":1,"key":"a\n\t\r\u0000\u001f` + "\x7f" + `","metric":"m","value":1}`; string(ctl) != want {
		t.Errorf("Append = %s, want %s", ctl, want)
	}
	if _, r := d.Decode(ctl, 0); r != ReasonBadField {
		t.Errorf("%s decoded with reason %v, want bad_field", ctl, r)
	}
	if got := string(Append(nil, window.Event{TS: 1, Key: "k\xff", Metric: "m", Value: 2, Count: 3})); got != `{"ts":1,"key":"k\ufffd","metric":"m","value":2,"count":3}` {
		t.Errorf("Append = %s", got) // a key holding 0xFF that is no series string is written whole, as before labels
	}
	if got := string(Append(nil, window.Event{TS: 1, Key: "k\xffb=2\xffa=1", Metric: "m", Value: 2})); got != `{"ts":1,"key":"k\ufffdb=2\ufffda=1","metric":"m","value":2}` {
		t.Errorf("Append = %s", got) // nor is one whose labels are out of order
	}
	if got := string(Append(nil, window.Event{TS: 1, Key: "k\xffa=1\xffb=2", Metric: "m", Value: 2, Count: 3})); got != `{"ts":1,"key":"k","metric":"m","value":2,"count":3,"labels":{"a":"1","b":"2"}}` {
		t.Errorf("Append = %s", got)
	}
	ids := window.Event{TS: 1, Key: "k\xffa=1", Metric: "m", Value: 2, Count: 3, TraceID: [16]byte{0: 0x4b, 15: 0xAB}, SpanID: [8]byte{0: 0xc0, 7: 1}}
	if got := string(Append(nil, ids)); got != `{"ts":1,"key":"k","metric":"m","value":2,"count":3,"labels":{"a":"1"},"trace_id":"4b0000000000000000000000000000ab","span_id":"c000000000000001"}` {
		t.Errorf("Append = %s", got) // the ids last, in lowercase hex
	}
	ids.SpanID = [8]byte{}
	if got := string(Append(nil, ids)); got != `{"ts":1,"key":"k","metric":"m","value":2,"count":3,"labels":{"a":"1"},"trace_id":"4b0000000000000000000000000000ab"}` {
		t.Errorf("Append = %s", got) // no span id: none written (zeros would make Decode drop the trace id)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		line := Append(nil, window.Event{TS: 1, Key: "k", Metric: "m", Value: v})
		if _, r := d.Decode(line, 0); r != ReasonInvalidValue {
			t.Errorf("%s: reason %v, want invalid_value", line, r)
		}
	}
}
