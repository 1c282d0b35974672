package event

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/window"
)

// confluentFrame is value as Confluent's JSON Schema serializer writes it: magic byte 0 and
// the schema id (big endian) before the JSON.
func confluentFrame(id uint32, value string) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, id), value...)
}

// A record written through Confluent Schema Registry (KafkaJsonSchemaSerializer, Connect's
// JsonSchemaConverter) is read past its 5-byte frame, for slide's JSON and an --event-map's,
// whatever bytes its schema id holds (10 is a newline, 0x7b7b7b7b braces); a frame alone and
// a frame before something not JSON are refused as the JSON they are not.
func TestTakeRecordReadsSchemaRegistryFrame(t *testing.T) {
	in, _ := newTestIntake(t)
	now := defTS
	rec := Record{TS: now, Feed: window.FeedOf(0)}
	nginx := presetDecoder(t, "nginx")
	for _, tc := range []struct {
		name  string
		f     Format
		value string
	}{
		{"slide", in.NewDecoder(), fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":12}`, now)},
		{"event-map", nginx, nginxLine(fmt.Sprintf("%d.000", now/1000), "pay.example.com", "GET", "/", 200, "0.012", 512)},
	} {
		for _, id := range []uint32{1, 10, 0x7b7b7b7b} {
			var refused []string
			acc, n := in.TakeRecord(tc.f, confluentFrame(id, tc.value), now, rec, func(part []byte, r Reason) {
				refused = append(refused, r.String()+": "+in.Explain(tc.f, part, r, now, &rec))
			})
			if want := map[string]int{"slide": 1, "event-map": 2}[tc.name]; acc != want || n != want || len(refused) > 0 {
				t.Errorf("%s, schema id %d: %d accepted of %d, refused %q; want %d of %d", tc.name, id, acc, n, refused, want, want)
			}
		}
	}
	// A frame before no JSON object (Avro through the registry, say) is refused, and the
	// detail says what the bytes are.
	for _, d := range []Format{in.NewDecoder(), nginx} {
		for _, value := range [][]byte{confluentFrame(3, ""), confluentFrame(3, "\x02\x10tenant-1")} {
			var got []string
			in.TakeRecord(d, value, now, rec, func(part []byte, r Reason) { got = append(got, r.String()+": "+in.Explain(d, part, r, now, &rec)) })
			const want = "invalid_json: invalid JSON: starts with Confluent Schema Registry framing (magic 0, schema id 3) and no JSON object after it"
			if len(got) != 1 || !strings.HasPrefix(got[0], want) {
				t.Errorf("%T, %q: refused %q, want one %q", d, value, got, want)
			}
		}
	}
}

// A value of Kafka Connect's JsonConverter with schemas.enable=true (its default) is refused
// with a detail that says so and what to change, not as "an access log?".
func TestExplainConnectEnvelope(t *testing.T) {
	d, err := NewDecoder(Config{})
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"key"},` +
		`{"type":"double","optional":false,"field":"value"}],"optional":false},"payload":{"key":"tenant-1","metric":"latency_ms","value":12}}`)
	const want = `no field "key", "metric" or "value": a Kafka Connect JsonConverter envelope`
	if got := d.Explain(line); !strings.HasPrefix(got, want) || !strings.Contains(got, "schemas.enable=false") {
		t.Errorf("Explain = %q, want %q… naming schemas.enable=false", got, want)
	}
}

// What the detail above offers works: an --event-map naming the payload's fields reads the
// envelope.
func TestMapReadsConnectEnvelope(t *testing.T) {
	md, err := NewMapDecoder(Map{Metrics: []MapMetric{{Metric: "latency_ms", Value: MapValue{Field: "payload.value"}, Key: MapKey{Field: "payload.key"}}}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAll(md, `{"schema":{"type":"struct","optional":false},"payload":{"key":"tenant-1","value":12}}`, defTS)
	if len(got) != 1 || got[0].r != ReasonNone || got[0].ev.Value != 12 {
		t.Fatalf("decoded %+v, want one event of value 12", got)
	}
}

// Framed gives back a refused part with its record's frame only when the part is where the
// framed JSON starts in that very record.
func TestFramed(t *testing.T) {
	v := confluentFrame(9, ` {"a":1}`)
	for _, tc := range []struct {
		name       string
		value, got []byte
		want       string
	}{
		{"the body", v, v[6:], string(v)},
		{"a later part", v, v[7:], string(v[7:])},
		{"a copy", v, []byte(`{"a":1}`), `{"a":1}`},
		{"not framed", []byte(`{"a":1}`), []byte(`{"a":1}`)[0:], `{"a":1}`},
	} {
		if got := Framed(tc.value, tc.got); string(got) != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A framed JSON value posted to POST /v1/events (a dead letter, which keeps its frame, sent
// back over HTTP) is not read past its frame, as only a Kafka record's is; the refusal says
// so, not that no JSON object follows the frame.
func TestTakeRefusesAFramedBodySayingWhy(t *testing.T) {
	in, _ := newTestIntake(t)
	body := confluentFrame(7, fmt.Sprintf(`{"ts":%d,"key":"tenant-1","metric":"latency_ms","value":12}`, defTS))
	res := in.Take(body, defTS)
	got := res.First[ReasonInvalidJSON]
	if res.Refused[ReasonInvalidJSON] != 1 || strings.Contains(got, "no JSON object") || !strings.Contains(got, "without the frame") {
		t.Errorf("a framed JSON body: %+v, detail %q; want it refused saying to send the JSON without the frame", res, got)
	}
}
