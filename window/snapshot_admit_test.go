package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// chunkyReader hands out data in pieces of random sizes (1 to max bytes), as a
// decompressor does, and counts what it gave.
type chunkyReader struct {
	data []byte
	rng  *rand.Rand
	max  int
	read int
}

func (r *chunkyReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(r.max))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	r.read += n
	return n, nil
}

// tableLen is the shape table and trailer's length in a snapshot's data.
func tableLen(data []byte) int {
	return len(data) - int(binary.LittleEndian.Uint32(data[len(data)-8:]))
}

// loadStreamed loads data into s as LoadSnapshotFrom does, read through chunky pieces, a
// read buffer of chunk bytes and a tail of tail bytes, so the streaming phase runs on small
// snapshots too.
func loadStreamed(s *Store, now int64, p int32, data []byte, chunk int, tail int64, seed uint64) (int, error) {
	r := &chunkyReader{data: data, rng: rand.New(rand.NewPCG(seed, 1)), max: 3 * chunk}
	return s.load(s.streamLoad(now, r, int64(len(data)), SnapshotLimits{}, chunk, tail), p)
}

// TestSnapshotStreamedEqualsInMemory: a snapshot streamed in pieces (a read buffer of 7 to
// 4,096 bytes, the tail just holding the shape table) loads exactly what LoadSnapshot loads
// from memory, and so does LoadSnapshotFrom.
func TestSnapshotStreamedEqualsInMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	now := int64(1_764_489_600_000)
	a := snapStore(t)
	feed(a, rng, now, 5000)
	data, n := a.AppendSnapshot(nil, now, 1)
	var b *Store
	for i, chunk := range []int{7, 64, 4096} {
		b = snapStore(t)
		got, err := loadStreamed(b, now, 1, data, chunk, int64(tableLen(data)+i), uint64(i))
		if err != nil || got != n {
			t.Fatalf("streamed by %d: %d of %d series, %v", chunk, got, n, err)
		}
		equalReads(t, a, b, now, 1)
	}

	// The real LoadSnapshotFrom, on this snapshot (read whole: it is under the tail) and on
	// one of 700 KB streamed with the real read buffer and a tail of 64 KiB.
	b = snapStore(t)
	if got, err := b.LoadSnapshotFrom(now, 1, &chunkyReader{data: data, rng: rng, max: 999}, int64(len(data)), SnapshotLimits{}); err != nil || got != n {
		t.Fatalf("LoadSnapshotFrom: %d of %d series, %v", got, n, err)
	}
	equalReads(t, a, b, now, 1)
	big, err := NewStore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1500 {
		for j := range 12 {
			ev := Event{TS: now - int64(j)*20_000 - rng.Int64N(10_000), Metric: "latency_ms", Key: fmt.Sprintf("tenant-%d", i), Value: float64(rng.IntN(1000)), Feed: FeedOf(3)}
			if err := big.ObserveAt(now, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	data, n = big.AppendSnapshot(nil, now, 3)
	if len(data) < 64<<10+4*snapReadBytes {
		t.Fatalf("a %d-byte snapshot does not stream", len(data))
	}
	b, err = NewStore(StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r := &chunkyReader{data: data, rng: rng, max: 50_000}
	if got, err := b.load(b.streamLoad(now, r, int64(len(data)), SnapshotLimits{}, snapReadBytes, 64<<10), 3); err != nil || got != n {
		t.Fatalf("streamed %d bytes: %d of %d series, %v", len(data), got, n, err)
	}
	equalReads(t, big, b, now, 3)
}

// TestSnapshotStreamStopsAtGarbage: a stream declaring 1 GiB of a snapshot's header and
// zeros (a decompression bomb's output) is refused as corrupt after reading its first read
// buffer, not 1 GiB; one shorter or longer than it declares is corrupt too.
func TestSnapshotStreamStopsAtGarbage(t *testing.T) {
	s := snapStore(t)
	zeros := &countingZeros{}
	_, err := s.LoadSnapshotFrom(0, 0, io.MultiReader(strings.NewReader("SLWS\x01"), zeros), 1<<30, SnapshotLimits{})
	if !errors.Is(err, ErrSnapshotCorrupt) || zeros.n > 2*snapReadBytes || s.Len() != 0 {
		t.Fatalf("bomb: %v after %d bytes of zeros", err, zeros.n)
	}
	a := snapStore(t)
	feed(a, rand.New(rand.NewPCG(1, 2)), 1_764_489_600_000, 300)
	data, _ := a.AppendSnapshot(nil, 1_764_489_600_000, 0)
	for name, size := range map[string]int64{"short": int64(len(data)) + 1, "long": int64(len(data)) - 1} {
		if _, err := s.LoadSnapshotFrom(1_764_489_600_000, 0, bytes.NewReader(data), size, SnapshotLimits{}); !errors.Is(err, ErrSnapshotCorrupt) || s.Len() != 0 {
			t.Errorf("%s stream: %v", name, err)
		}
	}
}

type countingZeros struct{ n int }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += len(p)
	return len(p), nil
}

// doubled is data with its series listed twice, the checksum made right.
func doubled(data []byte) []byte {
	at := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	out := append(append(slices.Clone(data[:at]), data[5:at]...), data[at:len(data)-8]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(2*at-5))
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// TestSnapshotAdmission (issue #25): a snapshot is admitted as its events would be. One
// series with a key or metric no door admits, a name over the limit, a ring stamped ahead
// of now by more than the skew, a series listed twice, or a ring holding more slots than
// the store's, refuses the whole snapshot with its reason, in memory and streamed, and the
// store is unchanged; within the skew it loads.
func TestSnapshotAdmission(t *testing.T) {
	now := int64(1_764_489_600_000)
	snap := func(at int64, key, metric string, extra ...Event) []byte {
		s := snapStore(t)
		for i := range 20 {
			if err := s.ObserveAt(at, Event{TS: at - int64(i)*7_000, Metric: "latency_ms", Key: fmt.Sprintf("good-%d", i), Value: float64(i), Feed: FeedOf(0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.ObserveAt(at, Event{TS: at, Metric: metric, Key: key, Value: 1, Feed: FeedOf(0)}); err != nil {
			t.Fatal(err)
		}
		for _, ev := range extra {
			if err := s.ObserveAt(at, ev); err != nil {
				t.Fatal(err)
			}
		}
		data, _ := s.AppendSnapshot(nil, at, 0)
		return data
	}
	wide, _ := NewStore(StoreConfig{Ring: RingConfig{Skew: time.Minute}})
	for i := range 36 { // 30 slots and 6 ahead: a ring of this store's shape but a wider skew
		ts := now - 290_000 + int64(i)*10_000
		if err := wide.ObserveAt(now, Event{TS: ts, Metric: "latency_ms", Key: "k", Value: 1, Feed: FeedOf(0)}); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	wideData, _ := wide.AppendSnapshot(nil, now, 0)
	for _, c := range []struct {
		name string
		data []byte
		at   int64 // now of the load
		want error // nil: loads
	}{
		{"good", snap(now, "k", "latency_ms"), now, nil},
		{"taken a skew ahead", snap(now+10_000, "k", "latency_ms"), now, nil},
		{"taken 5 min ahead", snap(now+5*60_000, "k", "latency_ms"), now, ErrSnapshotFuture},
		{"taken two slots ahead", snap(now+20_000, "k", "latency_ms"), now, ErrSnapshotFuture},
		{"invalid UTF-8 key", snap(now, "k\xff", "latency_ms"), now, ErrSnapshotName},
		{"NUL key", snap(now, "k\x00", "latency_ms"), now, ErrSnapshotName},
		{"newline key", snap(now, "k\nx", "latency_ms"), now, ErrSnapshotName},
		{"ESC key", snap(now, "k\x1b[31m", "latency_ms"), now, ErrSnapshotName},
		{"C1 key", snap(now, "k\u009b31m", "latency_ms"), now, ErrSnapshotName},
		{"bidi key", snap(now, "k\u202ex", "latency_ms"), now, ErrSnapshotName},
		{"bidi metric", snap(now, "k", "lat\u2066ency"), now, ErrSnapshotName},
		{"20 KB key", snap(now, strings.Repeat("k", 20<<10), "latency_ms"), now, ErrSnapshotNameLength},
		{"257-byte metric", snap(now, "k", strings.Repeat("m", 257)), now, ErrSnapshotNameLength},
		{"256-byte key", snap(now, strings.Repeat("k", 256), "latency_ms"), now, nil},
		{"labelled series", snap(now, "k\xffcode=200\xffroute=/pay", "latency_ms"), now, nil},
		{"16 labels of 256-byte values", snap(now, sixteenLabels(strings.Repeat("k", 256)), "latency_ms"), now, nil},
		{"labels out of order", snap(now, "k\xffroute=/pay\xffcode=200", "latency_ms"), now, ErrSnapshotName},
		{"label named key", snap(now, "k\xffkey=x", "latency_ms"), now, ErrSnapshotName},
		{"label value with a newline", snap(now, "k\xffcode=2\n00", "latency_ms"), now, ErrSnapshotName},
		{"label without =", snap(now, "k\xffcode", "latency_ms"), now, ErrSnapshotName},
		{"257-byte key with a label", snap(now, strings.Repeat("k", 257)+"\xffcode=200", "latency_ms"), now, ErrSnapshotNameLength},
		{"every series twice", doubled(snap(now, "k", "latency_ms")), now, ErrSnapshotDuplicate},
		{"a wider skew's ring", wideData, now + 60_000, ErrSnapshotShape},
	} {
		for _, streamed := range []bool{false, true} {
			s := snapStore(t)
			var n int
			var err error
			if streamed {
				n, err = loadStreamed(s, c.at, 0, c.data, 16, int64(tableLen(c.data)), 3)
			} else {
				n, err = s.LoadSnapshot(c.at, 0, c.data)
			}
			switch {
			case c.want == nil && (err != nil || n != 21 || s.Len() != 21):
				t.Errorf("%s (streamed %v): %d series, %v; want 21", c.name, streamed, n, err)
			case c.want != nil && (!errors.Is(err, c.want) || n != 0 || s.Len() != 0):
				t.Errorf("%s (streamed %v): %d series, %v; want none and %v", c.name, streamed, n, err, c.want)
			}
		}
	}
}

// sixteenLabels is key with MaxLabels labels of MaxLabelValueLen-byte values: the longest
// series string the doors admit with short label names.
func sixteenLabels(key string) string {
	b := []byte(key)
	for i := range MaxLabels {
		b = append(b, LabelSep)
		b = append(b, fmt.Sprintf("l%02d=", i)...)
		b = append(b, strings.Repeat("v", MaxLabelValueLen)...)
	}
	return string(b)
}

// TestSnapshotBeyondCapIsCounted: of a snapshot holding more series than MaxSeries, the
// first MaxSeries load and each other one is counted as refused, as its first event would
// be; the store holds no more than its cap at any time.
func TestSnapshotBeyondCapIsCounted(t *testing.T) {
	now := int64(1_764_489_600_000)
	a := snapStore(t)
	for i := range 50 {
		if err := a.ObserveAt(now, Event{TS: now, Metric: "latency_ms", Key: fmt.Sprintf("k%02d", i), Value: 1, Feed: FeedOf(0)}); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := a.AppendSnapshot(nil, now, 0)
	for _, streamed := range []bool{false, true} {
		c, _ := NewStore(StoreConfig{MaxSeries: 5})
		var n int
		var err error
		if streamed {
			n, err = loadStreamed(c, now, 0, data, 16, int64(tableLen(data)), 9)
		} else {
			n, err = c.LoadSnapshot(now, 0, data)
		}
		if err != nil || n != 5 || c.Len() != 5 || c.Stats().Refused != 45 {
			t.Errorf("streamed %v: %d series, %v, %d live, %d refused; want 5, 5, 45", streamed, n, err, c.Len(), c.Stats().Refused)
		}
	}
}
