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
