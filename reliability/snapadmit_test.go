package reliability_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
)

// Hostile snapshots (issue #25, findings 3 and 4): a writer to the snapshot topic replaces
// the latest snapshot of eleven of twelve partitions, computing every checksum as slide
// does. Partition 0's chunks are 8 MiB each (the attacker raised the topic's
// max.message.bytes) and declare 2 GiB decoded; partition 1's manifest is 37 bytes and
// claims 1 TiB; partition 2's snapshot is stamped 5 minutes ahead; partition 3's lists
// every series twice; partitions 4 to 10 each add one series with a bad key (invalid UTF-8,
// NUL, newline, ESC, a C1 control, a bidi override, 20 KB) to their real state. The next
// slide serve stays up within snapRSSBound, restores those eleven from the log, counted by
// reason, partition 11 from its snapshot, and answers every key equal to the oracle, lists
// no bad key, and exports every good series on /metrics (--export-windows).
//
// Before, slide-2 reached 3,118 MiB of RSS (the 2 GiB bomb inflated whole into a buffer of
// its declared size), loaded the doubled, future and bad-key snapshots, and /metrics
// stopped at the key that is not UTF-8.
func TestHostileSnapshotsFallBackToTheLog(t *testing.T) {
	const parts, group = 12, "snaphostile"
	_, brokers := proctest.Broker(t, slideBin, parts)
	o := newOracle()
	tr := newTraffic(t, brokers, o, 120, 11)
	tr.run(t, context.Background(), 2*time.Second, 10)

	first := startSlide(t, "slide-1", brokers, group, snapFlags...)
	eventually(t, 30*time.Second, "slide-1 did not catch up", func() bool { return first.caughtUp(t) })
	eventually(t, 20*time.Second, "slide-1 did not snapshot every partition", func() bool {
		return first.metric(t, "slide_snapshot_writes_total") >= parts
	})
	if err := first.Stop(15 * time.Second); err != nil { // no snapshot is written after this
		t.Fatal(err)
	}
	tr.run(t, context.Background(), time.Second, 10)
	tr.close(t)

	byPart := keysByPartition(o.keys(), parts)
	now := time.Now()
	raiseMaxMessageBytes(t, brokers, snapTopic, 32<<20)
	real := make([]snapManifest, parts)
	for p := range parts {
		real[p] = latestManifest(t, brokers, group, p)
	}

	// 0: 16 MiB of zstd in two 8 MiB chunks that inflate to 2 GiB: a window snapshot's
	// magic and version, then zeros.
	forge(t, brokers, group, 0, real[0], now, bombPayload(2<<30, 16<<20), codecZstd, 2<<30, 8<<20)
	// 1: a version 1 manifest of 37 bytes claiming a 1 TiB payload in one chunk.
	m1 := real[1]
	m1.id, m1.set, m1.taken, m1.chunks, m1.size = m1.id+1, otherSet(m1.set), now.UnixMilli(), 1, 1<<40
	if v := m1.value(1); len(v) > 40 {
		t.Fatalf("the 1 TiB manifest is %d bytes, want at most 40", len(v))
	} else {
		produceTo(t, brokers, 1, kafka.Message{Key: fmt.Appendf(nil, "%s/1", group), Value: v})
	}
	// 2: taken 5 minutes ahead, one of the partition's keys with an event just before then.
	ahead := now.Add(5 * time.Minute).UnixMilli()
	fut := attackerStore(t)
	if err := fut.ObserveAt(ahead, window.Event{TS: ahead - 1000, Metric: metric, Key: byPart[2][0], Value: 7, Feed: window.FeedOf(2)}); err != nil {
		t.Fatal(err)
	}
	futData, _ := fut.AppendSnapshot(nil, ahead, 2)
	forge(t, brokers, group, 2, real[2], time.UnixMilli(ahead), futData, codecNone, uint64(len(futData)), 1<<20)
	// 3: the real state with every series listed twice.
	twice := doubleSeries(t, realPayload(t, brokers, group, 3, real[3]))
	forge(t, brokers, group, 3, real[3], now, twice, codecNone, uint64(len(twice)), 1<<20)
	// 4-10: the real state and one series with a bad key, sorting among the good ones.
	badKeys := []string{"k-050\xff", "k-051\x00x", "k-052\nx", "k-053\x1b[31m", "k-054\u009b31m", "k-055\u202ex", "k-056" + strings.Repeat("x", 20<<10)}
	for i, bad := range badKeys {
		p := 4 + i
		s := attackerStore(t)
		if _, err := s.LoadSnapshot(now.UnixMilli(), int32(p), realPayload(t, brokers, group, p, real[p])); err != nil {
			t.Fatal(err)
		}
		if err := s.ObserveAt(now.UnixMilli(), window.Event{TS: now.UnixMilli(), Metric: metric, Key: bad, Value: 1, Feed: window.FeedOf(int32(p))}); err != nil {
			t.Fatal(err)
		}
		data, _ := s.AppendSnapshot(nil, now.UnixMilli(), int32(p))
		forge(t, brokers, group, p, real[p], now, data, codecNone, uint64(len(data)), 1<<20)
	}

	second := startSlide(t, "slide-2", brokers, group, append(slices.Clone(snapFlags), "--export-windows", metric+":5m:count")...)
	eventually(t, 60*time.Second, "slide-2 did not catch up", func() bool { return second.Exited() || second.caughtUp(t) })
	if second.Exited() {
		t.Fatalf("slide-2 exited:\n%s", proctest.Tail(second.Output(), 20))
	}
	peak, err := second.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if peak > snapRSSBound {
		t.Errorf("slide-2: peak RSS %d MiB, bound %d MiB", peak>>20, snapRSSBound>>20)
	}
	snap, fromLog := second.hostileRestores(t)
	want := map[string]float64{"corrupt": 1, "too_large": 1, "future": 1, "duplicate": 1, "bad_field": 6, "key_too_long": 1}
	if snap != 1 || fmt.Sprint(fromLog) != fmt.Sprint(want) {
		t.Errorf("restored %v partitions from a snapshot and from the log %v; want 1 and %v", snap, fromLog, want)
	}
	checkAll(t, o, "5m", second)
	if got := second.seriesKeys(t); !slices.Equal(got, o.keys()) {
		t.Errorf("/v1/series lists %d keys, the oracle %d: %q", len(got), len(o.keys()), clipKeys(got))
	}
	checkExport(t, second, o)
	t.Logf("hostile snapshots: %d events over %d keys; slide-2 restored 1 partition from its snapshot and %v from the log, every key equal to the oracle; peak RSS %d MiB (bound %d MiB)",
		o.count(), len(o.keys()), fromLog, peak>>20, snapRSSBound>>20)
}

// snapRSSBound is the peak RSS slide serve may reach restoring the hostile snapshots: its
// own ~40 MiB, the 16 MiB of bomb chunks held as records and kafka-go's buffers reading
// them, and the inflation's 64 KiB pieces; never the 2 GiB the bomb declares.
const snapRSSBound = 160 << 20

// hostileRestores is restores with the reasons a hostile snapshot falls back with.
func (s *slide) hostileRestores(t *testing.T) (fromSnapshot float64, fromLog map[string]float64) {
	t.Helper()
	fromSnapshot, fromLog = s.restores(t)
	for _, r := range []string{"too_large", "future", "duplicate", "bad_field", "key_too_long"} {
		if v := s.metric(t, "slide_snapshot_restore_total", "source", "log", "reason", r); v > 0 {
			fromLog[r] = v
		}
	}
	return fromSnapshot, fromLog
}

// seriesKeys lists the keys of metric s holds, through /v1/series.
func (s *slide) seriesKeys(t *testing.T) []string {
	t.Helper()
	var a struct {
		Series []struct{ Key string }
		Next   string
	}
	var keys []string
	for cursor := ""; ; cursor = a.Next {
		a.Next = ""
		q := url.Values{"metric": {metric}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := proctest.GetJSON(s.base+"/v1/series?"+q.Encode(), &a); err != nil {
			t.Fatalf("%s: /v1/series: %v", s.Name, err)
		}
		for _, se := range a.Series {
			keys = append(keys, se.Key)
		}
		if a.Next == "" {
			break
		}
	}
	slices.Sort(keys)
	return keys
}

// checkExport checks s's /metrics exports slide_window_count of every oracle key, equal to
// the oracle's count (every event is within the 5m window), and no other key.
func checkExport(t *testing.T, s *slide, o *oracle) {
	t.Helper()
	text, err := proctest.Scrape(s.base)
	if err != nil {
		t.Fatal(err)
	}
	exported := strings.Count(text, "\nslide_window_count{")
	if exported != len(o.keys()) {
		t.Errorf("/metrics exports %d series, the oracle has %d keys", exported, len(o.keys()))
	}
	bad := 0
	for _, k := range o.keys() {
		got, ok := proctest.Metric(text, "slide_window_count", `key="`+k+`"`)
		if want := o.over(k, 0, 1<<62).count; !ok || int(got) != want {
			if bad++; bad <= 5 {
				t.Errorf("/metrics: slide_window_count of %s is %v (exported %v), the oracle %d", k, got, ok, want)
			}
		}
	}
	if bad > 5 {
		t.Errorf("… %d keys exported wrong or not at all", bad)
	}
	if strings.Contains(text, "collector panic") || strings.Contains(s.Output(), "collector panic") {
		t.Errorf("a collector panicked:\n%s", proctest.Tail(s.Output(), 10))
	}
}

func clipKeys(ks []string) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		if len(k) > 16 {
			k = k[:16] + "…"
		}
		out[i] = k
	}
	return out
}

// keysByPartition maps each key to the partition ingest.Producer sends it to (kafka-go's
// Murmur2Balancer over n partitions).
func keysByPartition(keys []string, n int) map[int][]string {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	out := map[int][]string{}
	for _, k := range keys {
		p := (&kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: []byte(k)}, parts...)
		out[p] = append(out[p], k)
	}
	return out
}

// attackerStore is a store with slide serve's default rings, to write snapshots with.
func attackerStore(t *testing.T) *window.Store {
	t.Helper()
	s, err := window.NewStore(window.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raiseMaxMessageBytes sets topic's max.message.bytes, as a writer with the rights to could.
func raiseMaxMessageBytes(t *testing.T, brokers, topic string, n int) {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	resp, err := c.IncrementalAlterConfigs(context.Background(), &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
			Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "max.message.bytes", Value: fmt.Sprint(n), ConfigOperation: kafka.ConfigOperationSet}},
		}},
	})
	if err == nil {
		for _, r := range resp.Resources {
			if r.Error != nil {
				err = r.Error
			}
		}
	}
	if err != nil {
		t.Fatalf("raising %s's max.message.bytes: %v", topic, err)
	}
}

// The snapshot record formats, as an attacker who read ingest's documentation writes them.
const (
	codecNone byte = 0
	codecZstd byte = 1
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// snapManifest is a snapshot manifest's fields.
type snapManifest struct {
	id            uint64
	set           byte
	offset, taken int64
	chunks, size  uint64
	codec         byte
	raw           uint64
	crc           uint32
}

// value encodes m in manifest format version 1 (no codec, no decoded size) or 2.
func (m snapManifest) value(version byte) []byte {
	v := append([]byte("SLSM"), version)
	v = binary.LittleEndian.AppendUint64(v, m.id)
	v = append(v, m.set)
	v = binary.AppendVarint(v, m.offset)
	v = binary.AppendVarint(v, m.taken)
	v = binary.AppendUvarint(v, m.chunks)
	v = binary.AppendUvarint(v, m.size)
	if version == 2 {
		v = append(v, m.codec)
		v = binary.AppendUvarint(v, m.raw)
	}
	v = binary.LittleEndian.AppendUint32(v, m.crc)
	return binary.LittleEndian.AppendUint32(v, crc32.Checksum(v, castagnoliTable))
}

// parseSnapManifest reads a version 2 manifest, what slide writes.
func parseSnapManifest(t *testing.T, v []byte) snapManifest {
	t.Helper()
	if len(v) < 14 || string(v[:4]) != "SLSM" || v[4] != 2 {
		t.Fatalf("not a version 2 manifest: %q", v)
	}
	m := snapManifest{id: binary.LittleEndian.Uint64(v[5:]), set: v[13]}
	p := v[14:]
	varint := func() int64 { x, n := binary.Varint(p); p = p[n:]; return x }
	uvarint := func() uint64 { x, n := binary.Uvarint(p); p = p[n:]; return x }
	m.offset, m.taken = varint(), varint()
	m.chunks, m.size = uvarint(), uvarint()
	m.codec, p = p[0], p[1:]
	m.raw = uvarint()
	m.crc = binary.LittleEndian.Uint32(p)
	return m
}

// latestManifest is the latest manifest of partition p of group in the snapshot topic.
func latestManifest(t *testing.T, brokers, group string, p int) snapManifest {
	t.Helper()
	return parseSnapManifest(t, latestRecord(t, brokers, p, fmt.Appendf(nil, "%s/%d", group, p)))
}

// realPayload reassembles and decodes the window snapshot m names.
func realPayload(t *testing.T, brokers, group string, p int, m snapManifest) []byte {
	t.Helper()
	pieces := make([][]byte, m.chunks)
	prefix := fmt.Sprintf("%s/%d/%c/", group, p, m.set)
	for _, r := range records(t, brokers, p) {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(string(r.Key), prefix), "%d", &i); err != nil || !strings.HasPrefix(string(r.Key), prefix) || i >= len(pieces) {
			continue
		}
		if v := r.Value; len(v) > 13 && binary.LittleEndian.Uint64(v[5:]) == m.id {
			_, n := binary.Uvarint(v[13:])
			pieces[i] = v[13+n:]
		}
	}
	payload := bytes.Join(pieces, nil)
	if uint64(len(payload)) != m.size || crc32.Checksum(payload, castagnoliTable) != m.crc {
		t.Fatalf("partition %d: the snapshot's chunks do not add up (%d bytes, manifest %d)", p, len(payload), m.size)
	}
	if m.codec != codecZstd {
		return payload
	}
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.DecodeAll(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forge writes payload to the snapshot topic as partition p's latest snapshot, in the
// chunk set real does not use, with real's offset, taken at taken, in chunks of chunkBytes.
func forge(t *testing.T, brokers, group string, p int, real snapManifest, taken time.Time, payload []byte, codec byte, raw uint64, chunkBytes int) {
	t.Helper()
	m := snapManifest{id: real.id + 1, set: otherSet(real.set), offset: real.offset, taken: taken.UnixMilli(),
		size: uint64(len(payload)), codec: codec, raw: raw, crc: crc32.Checksum(payload, castagnoliTable)}
	var msgs []kafka.Message
	for i := 0; i*chunkBytes < len(payload); i++ {
		v := append([]byte("SLSC"), 1)
		v = binary.LittleEndian.AppendUint64(v, m.id)
		v = binary.AppendUvarint(v, uint64(i))
		v = append(v, payload[i*chunkBytes:min((i+1)*chunkBytes, len(payload))]...)
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "%s/%d/%c/%d", group, p, m.set, i), Value: v})
	}
	m.chunks = uint64(len(msgs))
	msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "%s/%d", group, p), Value: m.value(2)})
	produceTo(t, brokers, p, msgs...)
}

func otherSet(set byte) byte { return 'a' + 'b' - set }

// doubleSeries returns the window snapshot data with its series section twice: "SLWS",
// the version, the series, the shape table, the table's position and a CRC-32C.
func doubleSeries(t *testing.T, data []byte) []byte {
	t.Helper()
	body := data[:len(data)-4]
	at := int(binary.LittleEndian.Uint32(body[len(body)-4:]))
	series, table := body[5:at], body[at:len(body)-4]
	if len(series) == 0 {
		t.Fatal("the snapshot has no series")
	}
	out := append(append(append(slices.Clone(data[:5]), series...), series...), table...)
	out = binary.LittleEndian.AppendUint32(out, uint32(5+2*len(series)))
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoliTable))
}

// bombPayload is a zstd stream of size bytes that inflates to a window snapshot's magic
// and version followed by zeros, inflated bytes in all: a frame of one raw block and RLE
// blocks of 128 KiB (declaring its content size), then a skippable frame to fill size.
func bombPayload(inflated int64, size int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0xC0, 7<<3) // an 8-byte content size, no checksum; window 128 KiB
	b = binary.LittleEndian.AppendUint64(b, uint64(inflated))
	block := func(typ, sz int, last bool) {
		h := uint32(typ<<1 | sz<<3)
		if last {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16))
	}
	head := []byte("SLWS\x01")
	block(0, len(head), false)
	b = append(b, head...)
	const rle = 128 << 10
	left := inflated - int64(len(head))
	for left > 0 {
		n := min(left, rle)
		left -= n
		block(1, int(n), left == 0)
		b = append(b, 0)
	}
	pad := size - len(b) - 8
	b = binary.LittleEndian.AppendUint32(b, 0x184D2A50)
	b = binary.LittleEndian.AppendUint32(b, uint32(pad))
	return append(b, make([]byte, pad)...)
}
