package ingest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// snapshotsFor is the reading side of snapshots over st, as a Consumer with cfg sets it up.
func snapshotsFor(st *window.Store, cfg SnapshotConfig) *snapshots {
	c := &Consumer{cfg: Config{MaxInflatedBytes: DefaultMaxInflatedBytes, MaxKeyLen: event.DefaultMaxKeyLen}, store: st}
	return &snapshots{c: c, cfg: cfg.withDefaults("events")}
}

// allocated is the fewest bytes the process allocated over three calls of fn. TotalAlloc
// counts every goroutine's allocations, so one call can be charged for another test's or
// the runtime's (68 KiB once in CI); the least of three is fn's own.
func allocated(fn func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		fn()
		runtime.ReadMemStats(&b)
		least = min(least, b.TotalAlloc-a.TotalAlloc)
	}
	return least
}

// TestAssembleChecksDeclaredSizes (issue #25, finding 3): a manifest's declared sizes are
// checked against SnapshotConfig.MaxBytes, the chunk count and the chunks' real sizes
// before anything is allocated by them. A manifest claiming 1 TiB cost 2.1 GB before any
// chunk was read (assemble made a buffer of min(size, 1 GiB) each time it was called).
func TestAssembleChecksDeclaredSizes(t *testing.T) {
	key := []byte("g/0")
	chunk := func(id uint64, data []byte) map[string][]byte {
		return map[string][]byte{"g/0/a/0": chunkValue(id, 0, data)}
	}
	payload := []byte("a payload of 24 bytes...")
	good := manifest{id: 9, set: 'a', chunks: 1, size: uint64(len(payload)), codec: codecNone, raw: uint64(len(payload)), crc: crc32.Checksum(payload, castagnoli)}
	tib := good
	tib.size, tib.raw = 1<<40, 1<<40
	zbig := good
	zbig.codec, zbig.raw = codecZstd, 200*zbig.size
	for _, c := range []struct {
		name   string
		m      manifest
		max    int64
		chunks map[string][]byte
		want   string
	}{
		{"good", good, 1 << 20, chunk(9, payload), ""},
		{"1 TiB, no bound", tib, 0, chunk(9, payload), reasonCorrupt},           // more than one chunk can carry
		{"1 TiB, bound 1 MiB", tib, 1 << 20, chunk(9, payload), reasonTooLarge}, // more than the store can hold
		{"decodes to 4,800 bytes, bound 4 KiB", zbig, 4 << 10, chunk(9, payload), reasonTooLarge},
		{"chunk larger than declared", good, 0, chunk(9, append(payload, 'x')), reasonCorrupt},
		{"chunk smaller than declared", good, 0, chunk(9, payload[1:]), reasonCorrupt},
		{"chunk of another snapshot", good, 0, chunk(8, payload), reasonIncomplete},
	} {
		s := snapshotsFor(nil, SnapshotConfig{MaxBytes: c.max})
		var l *loaded
		var reason string
		n := allocated(func() { l, reason, _ = s.assemble(key, c.m.append(nil), c.chunks) })
		if reason != c.want || (c.want == "") != (l != nil) || n > 1<<20 { // before the fix: 2.1 GB
			t.Errorf("%s: %v, reason %q, %d bytes allocated; want %q", c.name, l != nil, reason, n, c.want)
		}
		if l != nil && (len(l.pieces) != 1 || !bytes.Equal(l.pieces[0], payload)) {
			t.Errorf("%s: pieces %q", c.name, l.pieces)
		}
	}
}

// TestSnapshotLoadAdmitsLikeEvents (issue #25, findings 3 and 4): through snapshots.load,
// what restore calls, a zstd payload streams within the inflation budget, whatever size it
// declares, and every series is held to an event's rules, each refusal with its reason.
func TestSnapshotLoadAdmitsLikeEvents(t *testing.T) {
	now := time.Now()
	snap := func(at time.Time, key string) []byte {
		st := newTestStore(t, 0)
		for i := range 5 {
			if err := st.ObserveAt(at.UnixMilli(), window.Event{TS: at.UnixMilli(), Metric: "latency_ms", Key: fmt.Sprint("k", i), Value: 1, Feed: window.FeedOf(0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.ObserveAt(at.UnixMilli(), window.Event{TS: at.UnixMilli(), Metric: "latency_ms", Key: key, Value: 1, Feed: window.FeedOf(0)}); err != nil {
			t.Fatal(err)
		}
		data, _ := st.AppendSnapshot(nil, at.UnixMilli(), 0)
		return data
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	zeros := append([]byte("SLWS\x01"), make([]byte, 64<<20)...) // 64 MiB of output, 2 KiB compressed
	wide, _ := zstd.NewWriter(nil, zstd.WithWindowSize(64<<20), zstd.WithZeroFrames(true))
	defer wide.Close()
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'k'
	}
	for _, c := range []struct {
		name  string
		data  []byte
		codec byte
		zenc  *zstd.Encoder
		want  string
	}{
		{"good", snap(now, "k-good"), codecZstd, enc, ""},
		{"good, uncompressed", snap(now, "k-good"), codecNone, nil, ""},
		{"zeros after the header", zeros, codecZstd, enc, reasonCorrupt},
		{"a window past the budget", snap(now, "k-good"), codecZstd, wide, ""}, // small frames declare small windows
		{"5 minutes ahead", snap(now.Add(5*time.Minute), "k"), codecZstd, enc, reasonFuture},
		{"invalid UTF-8", snap(now, "k\xff"), codecZstd, enc, reasonBadField},
		{"C1", snap(now, "k\u009b"), codecZstd, enc, reasonBadField},
		{"bidi", snap(now, "k\u2067"), codecNone, nil, reasonBadField},
		{"257 bytes", snap(now, string(long)), codecZstd, enc, reasonKeyTooLong},
	} {
		payload := c.data
		if c.codec == codecZstd {
			payload = c.zenc.EncodeAll(c.data, nil)
		}
		st := newTestStore(t, 0)
		s := snapshotsFor(st, SnapshotConfig{})
		l := &loaded{m: manifest{size: uint64(len(payload)), codec: c.codec, raw: uint64(len(c.data))}}
		for len(payload) > 0 { // pieces of 1000 bytes, as chunk records hold them
			n := min(len(payload), 1000)
			l.pieces, payload = append(l.pieces, payload[:n]), payload[n:]
		}
		var n int
		var err error
		alloc := allocated(func() { n, err = s.load(now, &partition{id: 0}, l) })
		if got := loadReason(err); got != c.want || (c.want == "" && n != 6) || (c.want != "" && st.Len() != 0) {
			t.Errorf("%s: %d series, %v (reason %q); want %q", c.name, n, err, got, c.want)
		}
		if alloc > 16<<20 {
			t.Errorf("%s: %d MiB allocated: not streamed", c.name, alloc>>20)
		}
	}
}

// TestSnapshotInflationBudget: a zstd frame whose window is past Config.MaxInflatedBytes
// is refused as too_large before it inflates, as a record batch's is.
func TestSnapshotInflationBudget(t *testing.T) {
	frame := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	frame = append(frame, 0x00, 20<<3) // no content size; window 1 GiB
	h := 1 | 1<<1 | 255<<3             // the last block: RLE of 255 bytes
	frame = append(frame, byte(h), byte(h>>8), byte(h>>16))
	frame = append(frame, 'x')
	st := newTestStore(t, 0)
	s := snapshotsFor(st, SnapshotConfig{})
	l := &loaded{m: manifest{size: uint64(len(frame)), codec: codecZstd, raw: 255}, pieces: [][]byte{frame}}
	if _, err := s.load(time.Now(), &partition{id: 0}, l); loadReason(err) != reasonTooLarge {
		t.Fatalf("a 1 GiB window: %v (reason %q), want too_large", err, loadReason(err))
	}
}
