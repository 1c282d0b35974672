package clusterlimit

import (
	"strconv"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/internal/kafkarange"
)

// TestPartEndsBeforeALongEntry: an entry that would carry its part past maxPartBytes
// begins the next part. A part used to end only once it held maxPartBytes, so ~500 KiB of
// small keys and a sliding log of 60,000 entries after them (~720 KB, or a state of
// any key that large) made one part of a size a broker refuses.
func TestPartEndsBeforeALongEntry(t *testing.T) {
	b := &Backend{cp: CheckpointConfig{Group: "g"}}
	sp := split{start: maxHeaderBytes}
	body := make([]byte, maxHeaderBytes)
	var want []string
	add := func(key string, state []byte) {
		body = sp.before(body, entrySize("p", key, state))
		body = appendEntry(body, "p", 1, key, 5, state)
		sp.n++
		want = append(want, key)
	}
	small := make([]byte, 20)
	for i := 0; len(body)-sp.start < maxPartBytes-1000; i++ {
		add("small-"+strconv.Itoa(i), small)
	}
	add("big", make([]byte, 720_000))
	add("after", small)
	parts, head := b.inParts(0, body, &sp, 1, true, 0)
	cp, err := decodeCheckpoint(head.Value)
	if err != nil || cp.parts != len(parts) {
		t.Fatalf("the head: %v, %v", cp, err)
	}
	var got []string
	for i, m := range append(parts, head) {
		if len(m.Value) > kafkarange.MaxBatchBytes {
			t.Errorf("record %d of %d bytes: a broker refuses it", i, len(m.Value))
		}
		es := cp.entries
		if i < len(parts) {
			if _, _, es, err = decodeCheckpointPart(m.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range es {
			got = append(got, e.key)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("%d entries read back from %d records, want the %d written in order", len(got), len(parts)+1, len(want))
	}
}
