package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/internal/kafkatest"
)

// rssBytes is this process's resident set, from /proc/self/status.
func rssBytes(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestConsumerRefusesCompressionBombs is the first probe against the embedded
// broker: a 32 KiB zstd record that inflates to 1 GiB and a 512 KiB gzip record that
// inflates to 512 MiB, between good records. Before the bounded codecs the consumer
// inflated each whole (3.2 GiB RSS, then out of memory); now each is refused as too_large,
// dead-lettered as a pointer to its offset, the records after it are observed, and the
// process's RSS stays within 256 MiB of where it started (the budget is 32 MiB; kafka-go's
// buffer doubles as it grows; 768 MiB under the race detector). The restore search probes the bombs too, and the broker
// (kfake, in this process) never inflates them: slide no longer lists offsets by time.
func TestConsumerRefusesCompressionBombs(t *testing.T) {
	c := kafkatest.Start(t, "events", 1, "events-dlq")
	t0 := time.Now()
	good := func(i int) kafka.Message {
		return kafka.Message{Time: t0, Value: fmt.Appendf(nil, `{"ts":%d,"key":"k","metric":"latency_ms","value":%d}`, t0.UnixMilli(), i)}
	}
	c.ProduceTo(t, 0, good(1))
	for _, b := range []struct {
		codec    int8
		inflated int64
	}{{kafkatest.Zstd, 1 << 30}, {kafkatest.Gzip, 512 << 20}} {
		batch, err := kafkatest.BombBatch(b.codec, b.inflated, t0)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := kafkatest.ProduceRaw(c.Addr, "events", 0, batch); err != nil || code != 0 {
			t.Fatalf("producing a %d-byte bomb (codec %d): code %d, %v", len(batch), b.codec, code, err)
		}
		c.ProduceTo(t, 0, good(2))
	}

	runtime.GC()
	base := rssBytes(t)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), rssBytes(t)))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	cfg := testConfig(c, "bombs")
	cfg.DeadLetterTopic = "events-dlq"
	store := newTestStore(t, 0)
	a := start(t, cfg, store, t0)
	eventually(t, 30*time.Second, "the consumer to pass both bombs", func() bool { return caughtUp(t, c, a) }, progress(a))
	a.stop(t)
	close(stop)
	<-sampled

	if got := testutil.ToFloat64(a.m.rejectedBy[event.ReasonTooLarge]); got != 2 {
		t.Errorf("slide_ingest_rejected_total{reason=too_large} = %v, want 2", got)
	}
	agg, err := store.ReadAt(t0.UnixMilli(), "latency_ms", "k", 10*time.Second, nil)
	if err != nil || agg.Count != 3 || agg.Sum != 5 {
		t.Errorf("good records around the bombs: %+v %v, want 3 summing to 5", agg, err)
	}
	bound := int64(256 << 20)
	if raceEnabled {
		bound = 768 << 20 // shadow memory; still below the 1 GiB bomb inflated once
	}
	if grew := peak.Load() - base; grew > bound {
		t.Errorf("RSS grew by %d MiB reading the bombs, bound %d MiB", grew>>20, bound>>20)
	}
	t.Logf("RSS %d MiB before, peak %d MiB", base>>20, peak.Load()>>20)
	letters := readDeadLetters(t, c, "events-dlq")
	if len(letters) != 2 {
		t.Fatalf("dead letters %+v, want two pointers", letters)
	}
	for i, l := range letters {
		if want := fmt.Sprintf("events/0/%d", 1+2*i); l.reason != "too_large" || l.line != "" || l.source != want {
			t.Errorf("dead letter %+v, want a too_large pointer to %s with no value", l, want)
		}
		if !strings.HasPrefix(l.detail, "its record batch inflates beyond ") {
			t.Errorf("dead letter %+v: no detail of the budget", l)
		}
	}
}

// TestInflateBudget: Inflate stops at the budget with ErrInflateBudget and passes a stream
// that ends exactly at it.
func TestInflateBudget(t *testing.T) {
	for _, codec := range []int8{kafkatest.Zstd, kafkatest.Gzip} {
		recs, err := kafkatest.BombRecords(codec, 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Inflate(codec, recs, 1<<20)
		if !errors.Is(err, ErrInflateBudget) || len(out) > 1<<20 {
			t.Errorf("codec %d: %d bytes, %v; want at most 1 MiB and ErrInflateBudget", codec, len(out), err)
		}
		out, err = Inflate(codec, recs, 9<<20)
		if err != nil || len(out) < 8<<20 || !bytes.Equal(out[len(out)-1:], []byte{0}) {
			t.Errorf("codec %d within the budget: %d bytes, %v", codec, len(out), err)
		}
		exact := int64(len(out))
		if _, err := Inflate(codec, recs, exact); err != nil {
			t.Errorf("codec %d: a stream of exactly the budget (%d bytes) refused: %v", codec, exact, err)
		}
	}
}

// FuzzInflate: no input panics the bounded reader, and none gets more than the budget out
// of it. The seed corpus (testdata/fuzz/FuzzInflate) holds zstd and gzip bombs of 8 MiB;
// it is part of scripts/fuzz-short.sh.
func FuzzInflate(f *testing.F) {
	for _, codec := range []int8{kafkatest.Zstd, kafkatest.Gzip} {
		recs, err := kafkatest.BombRecords(codec, 1<<20)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(codec, recs)
	}
	f.Add(int8(2), []byte("not snappy"))
	f.Add(int8(3), []byte{0x04, 0x22, 0x4d, 0x18})
	f.Fuzz(func(t *testing.T, codec int8, data []byte) {
		const budget = 64 << 10 // small, so a bomb costs little and fuzzing stays fast
		if codec < 1 || codec > 4 {
			codec = 1 + (codec&0x7f)%4
		}
		out, err := Inflate(codec, data, budget)
		if len(out) > budget {
			t.Fatalf("codec %d: %d bytes out of a %d-byte budget (%v)", codec, len(out), budget, err)
		}
	})
}

// A zstd frame declares its window, and the decoder allocated it before writing a byte: a
// 300-byte frame declaring 512 MiB cost 516 MiB with the output bounded at 1 MiB. A window
// beyond the budget is refused as too large, before any allocation of its size.
func TestInflateRefusesHugeZstdWindow(t *testing.T) {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xFD2FB528)
	b = append(b, 0x00, 19<<3) // no content size; window 2^29 = 512 MiB
	for range 64 {
		h := uint32(1<<1 | (128<<10)<<3) // RLE blocks of 128 KiB
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	_, err := Inflate(kafkatest.Zstd, b, 1<<20)
	runtime.ReadMemStats(&ms)
	if !errors.Is(err, ErrInflateBudget) {
		t.Errorf("a 512 MiB window under a 1 MiB budget: %v, want ErrInflateBudget", err)
	}
	if got := ms.TotalAlloc - before; got > 64<<20 {
		t.Errorf("allocated %d MiB refusing it", got>>20)
	}
}

// Snappy: kafka-go allocated what a xerial chunk header or a block header claimed (up to
// 4 GiB from a few bytes) before checking it. A claim beyond the input or the budget is
// refused before anything of its size is allocated; real snappy, raw or in xerial chunks
// (as kafka-go writes it), inflates as before.
func TestInflateSnappy(t *testing.T) {
	raw := bytes.Repeat([]byte(`{"key":"k","metric":"m","value":1}`+"\n"), 10_000)
	var z bytes.Buffer
	w := (&compress.SnappyCodec).NewWriter(&z)
	w.Write(raw)
	w.Close()
	if out, err := Inflate(2, z.Bytes(), 1<<20); err != nil || !bytes.Equal(out, raw) {
		t.Fatalf("snappy from kafka-go's writer: %d bytes, %v", len(out), err)
	}
	if _, err := Inflate(2, z.Bytes(), 64<<10); !errors.Is(err, ErrInflateBudget) {
		t.Errorf("over the budget: %v, want ErrInflateBudget", err)
	}
	xerial := append([]byte{130, 83, 78, 65, 80, 80, 89, 0, 0, 0, 0, 1, 0, 0, 0, 1}, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3)
	block := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0} // a block claiming 4 GiB decoded
	for name, b := range map[string][]byte{"xerial chunk of 2 GiB": xerial, "block of 4 GiB": block} {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		_, err := Inflate(2, b, 1<<20)
		runtime.ReadMemStats(&ms)
		if err == nil || ms.TotalAlloc-before > 16<<20 {
			t.Errorf("%s: %v, %d MiB allocated", name, err, (ms.TotalAlloc-before)>>20)
		}
	}
}
