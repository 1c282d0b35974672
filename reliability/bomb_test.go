package reliability_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/kafkatest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// bombRSSBound is the peak RSS `slide serve` may reach reading a 1 GiB zstd bomb and a
// 512 MiB gzip bomb with the default 32 MiB decompression budget (kafka-go's buffer doubles
// as it grows, so about four budgets for a moment, plus the process's own ~40 MiB). Before
// the budget, the zstd bomb alone took serve from 72 MiB to 3.2 GiB.
const bombRSSBound = 320 << 20

// produceBombs writes a good event, a zstd bomb, a gzip bomb and a good event to
// partition 0 of topic "events" at addr, stamped now.
func produceBombs(t *testing.T, addr string) {
	t.Helper()
	now := time.Now()
	good := func(v int) {
		line := fmt.Appendf(nil, `{"ts":%d,"key":"bomb-neighbour","metric":"latency_ms","value":%d}`, now.UnixMilli(), v)
		if code, err := kafkatest.ProduceRaw(addr, "events", 0, kafkatest.RecordBatch(0, recordOf(line), 1, now)); err != nil || code != 0 {
			t.Fatalf("producing a good record: code %d, %v", code, err)
		}
	}
	good(1)
	for _, b := range []struct {
		codec    int8
		inflated int64
	}{{kafkatest.Zstd, 1 << 30}, {kafkatest.Gzip, 512 << 20}} {
		batch, err := kafkatest.BombBatch(b.codec, b.inflated, now)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := kafkatest.ProduceRaw(addr, "events", 0, batch); err != nil || code != 0 {
			t.Fatalf("producing a bomb (codec %d): code %d, %v", b.codec, code, err)
		}
	}
	good(2)
}

// recordOf is the uncompressed records section of a batch of one record with value v.
func recordOf(v []byte) []byte {
	body := []byte{0, 0, 0, 1} // attributes, timestamp delta 0, offset delta 0, key length -1 (zigzag 1)
	body = appendVarint(body, int64(len(v)))
	body = append(body, v...)
	body = append(body, 0) // no headers
	return append(appendVarint(nil, int64(len(body))), body...)
}

func appendVarint(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// checkBombs waits for s to read past both bombs and checks what the probe found
// broken: s is alive, counted both bombs as too_large, observed the events around them, and
// its peak RSS stayed under bombRSSBound.
func checkBombs(t *testing.T, s *slide) {
	t.Helper()
	eventually(t, 30*time.Second, s.Name+" to read past the bombs", func() bool {
		return s.metric(t, "slide_ingest_rejected_total", `reason="too_large"`) == 2 && s.caughtUp(t)
	})
	if s.Exited() {
		t.Fatalf("%s exited:\n%s", s.Name, proctest.Tail(s.Output(), 20))
	}
	var a windowAnswer
	if err := proctest.GetJSON(s.base+"/v1/window?metric=latency_ms&key=bomb-neighbour&window=1m", &a); err != nil || a.Count != 2 {
		t.Errorf("%s: the events around the bombs: %+v %v, want 2", s.Name, a, err)
	}
	peak, err := s.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if peak > bombRSSBound {
		t.Errorf("%s: peak RSS %d MiB, bound %d MiB", s.Name, peak>>20, bombRSSBound>>20)
	}
	t.Logf("%s: peak RSS %d MiB (bound %d MiB)", s.Name, peak>>20, bombRSSBound>>20)
	if !strings.Contains(s.Output(), "reason=too_large") {
		t.Errorf("%s: no too_large refusal logged", s.Name)
	}
}

// TestCompressionBombThroughSlideBroker: bombs already in `slide broker`'s log when serve
// starts. The restore search and the replay meet them; serve refuses them within its
// budget, and the broker does not inflate them either (slide no longer asks it for offsets
// by time, where kfake inflates the batch its lookup lands in).
func TestCompressionBombThroughSlideBroker(t *testing.T) {
	broker, addr := brokerProc(t)
	produceBombs(t, addr)
	s := startSlide(t, "serve", addr, "bombs")
	checkBombs(t, s)
	peak, err := broker.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if peak > bombRSSBound {
		t.Errorf("slide broker: peak RSS %d MiB, bound %d MiB: it inflated a bomb", peak>>20, bombRSSBound>>20)
	}
}

// TestCompressionBombThroughEmbeddedBroker: bombs produced to `slide serve`'s embedded
// broker while it runs; the broker lives in serve's process, so its RSS covers both.
func TestCompressionBombThroughEmbeddedBroker(t *testing.T) {
	kafkaAddr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := &slide{Proc: proctest.Start(t, "serve", slideBin, "serve", "--embedded-kafka-addr", kafkaAddr, "--embedded-kafka-partitions", "1",
		"--addr", addr, "--log-level", "info"), base: "http://" + addr}
	if err := proctest.WaitStatus(t.Context(), s.base+"/readyz", 200, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	produceBombs(t, kafkaAddr)
	checkBombs(t, s)
}
