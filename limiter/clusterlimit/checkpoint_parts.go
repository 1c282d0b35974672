package clusterlimit

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkarange"
)

// A partition's checkpoint is one record while its entries fit in maxPartBytes. Past that
// it is written in parts, because a broker refuses a record larger than its
// message.max.bytes (1 MB by default, the embedded broker's too): at ~62 bytes a key, one
// record held only ~16,000 keys of a partition, and every checkpoint of a larger partition
// failed, so a new owner started its keys empty. The parts are records keyed group/p#i,
// written and acknowledged first; then the partition's record, keyed group/p as before,
// names them by a random id and their count. A reader takes the latest group/p record and
// the parts of its id, which precede it in the log; a record with parts missing (a
// compaction that removed superseded parts) is no checkpoint. Compaction keeps the latest
// record of each key, so a part left from an earlier, larger checkpoint stays until a
// later one overwrites it, and is ignored for its id.

// Versions of the records in parts (codec.go's version is a single record's).
const (
	versionHead = 4 // a partition's record that names its parts
	versionPart = 5 // one part
)

// maxPartBytes is the most entry bytes of one record: about half of kafkarange.MaxBatchBytes,
// so a part and its framing stay far below a broker's limit, and two parts never travel in
// one batch.
const maxPartBytes = 512 << 10

// maxParts bounds the parts a record may name (2 GB of entries).
const maxParts = 4096

// maxHeadBytes bounds the header of a record that names its parts: a single record's, its
// id and its count of parts. Every part's entries but the first are encoded after that much
// room, so that whichever is last takes it, and a part's smaller header (at most 16 bytes:
// version, id, an index under maxParts, a count) the end of it; the first part has the
// maxHeaderBytes before every partition's entries.
const maxHeadBytes = maxHeaderBytes + 8 + binary.MaxVarintLen64

// split is where a partition's entries are cut into parts while they are encoded: each
// cut is where a part's entries end, starts where each begins (after its room), counts the
// entries of each, n those of the part under way, which begins at start.
type split struct {
	start  int
	n      int
	cuts   []int
	starts []int
	counts []int
}

// before is called before an entry of size bytes is appended to body: when the part under
// way would then pass maxPartBytes, it ends there, and the next begins after room for its
// header. A part so holds at most maxPartBytes, or one entry alone: ending a part only once
// it held maxPartBytes made a part of 512 KiB of small keys and a long sliding log after
// them (~700 KB at 60,000 entries), which a broker refused.
func (s *split) before(body []byte, size int) []byte {
	if len(body)-s.start+size <= maxPartBytes || s.n == 0 {
		return body
	}
	s.cuts = append(s.cuts, len(body))
	s.starts = append(s.starts, s.start)
	s.counts = append(s.counts, s.n)
	var room [maxHeadBytes]byte
	body = append(body, room[:]...)
	s.start, s.n = len(body), 0
	return body
}

// inParts makes the records of partition p whose entries sp cut into parts, each written
// with its header into the room before it in body: the parts, and the partition's record
// naming them, which holds the entries after the last cut.
func (b *Backend) inParts(p int32, body []byte, sp *split, gen int32, final bool, at int64) ([]kafka.Message, kafka.Message) {
	id := rand.Uint64()
	key := b.recordKey(p)
	msgs := make([]kafka.Message, len(sp.cuts))
	var head [maxHeadBytes]byte
	for k, end := range sp.cuts {
		h := append(head[:0], versionPart)
		h = binary.BigEndian.AppendUint64(h, id)
		h = binary.AppendUvarint(h, uint64(k))
		h = binary.AppendUvarint(h, uint64(sp.counts[k]))
		from := sp.starts[k] - len(h)
		copy(body[from:], h)
		msgs[k] = kafka.Message{Key: []byte(key + "#" + strconv.Itoa(k)), Value: body[from:end]}
	}
	h := appendCheckpointHeader(head[:0], gen, final, at, sp.n)
	h[0] = versionHead
	h = binary.BigEndian.AppendUint64(h, id)
	h = binary.AppendUvarint(h, uint64(len(sp.cuts)))
	from := sp.start - len(h)
	copy(body[from:], h)
	return msgs, kafka.Message{Key: []byte(key), Value: body[from:]}
}

// write writes a round's parts, then, once the broker has them, the partitions' records
// that name them: a record is never in the log before its parts.
func (b *Backend) write(ctx context.Context, parts, heads []kafka.Message) error {
	if len(parts) > 0 {
		if err := b.w.WriteMessages(ctx, parts...); err != nil {
			return err
		}
	}
	return b.w.WriteMessages(ctx, heads...)
}

// decodeCheckpointPart reads a part: its checkpoint's id, its index and its entries.
func decodeCheckpointPart(v []byte) (id uint64, index int, es []checkpointEntry, err error) {
	r := reader{b: v}
	if r.byte("version") != versionPart {
		return 0, 0, nil, fmt.Errorf("%w: checkpoint part version", ErrCorrupt)
	}
	id = r.fixed64("id")
	i := r.uvarint("index")
	if i >= maxParts {
		r.fail("index")
	}
	es = r.entries(r.uvarint("count"))
	if r.end() != nil {
		return 0, 0, nil, r.err
	}
	return id, int(i), es, nil
}

// readLatest is partition p's latest checkpoint, nil when there is none. It reads the
// checkpoint partition's tail, widening until a record of p is found, and on towards the
// log's start until the parts that record names are found too.
func (b *Backend) readLatest(ctx context.Context, p int32) (*checkpointRecord, error) {
	d := b.cp.Dialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	b.topicMu.Lock()
	nparts := b.cpParts
	b.topicMu.Unlock()
	conn, err := d.DialLeader(ctx, "tcp", b.cp.Brokers[0], b.cp.Topic+TopicSuffix, b.cpPartition([]byte(b.recordKey(p)), nparts))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return nil, err
	}
	key := []byte(b.recordKey(p))
	prefix := append(append([]byte(nil), key...), '#')
	var cp *checkpointRecord
	var got map[int][]checkpointEntry // the parts of cp found so far
	cfg := kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 64 << 20, MaxWait: 100 * time.Millisecond}
	// The ranges are read newest first; within one, records in log order.
	for end, window := last, int64(16); end > first; end, window = max(first, end-window), window*8 {
		from := max(first, end-window)
		var latest []byte
		var parts [][]byte // the parts of p in this range
		if err := kafkarange.Each(conn, from, end, cfg, 2*time.Second, func(msg kafka.Message) error {
			switch {
			case bytes.Equal(msg.Key, key):
				latest = msg.Value
			case bytes.HasPrefix(msg.Key, prefix):
				parts = append(parts, msg.Value)
			}
			return nil
		}, nil); err != nil {
			return nil, err
		}
		if cp == nil {
			if latest == nil {
				continue
			}
			if cp, err = decodeCheckpoint(latest); err != nil || cp.parts == 0 {
				return cp, err
			}
			got = map[int][]checkpointEntry{}
		}
		for _, v := range parts {
			id, i, es, err := decodeCheckpointPart(v)
			if err == nil && id == cp.id && i < cp.parts && got[i] == nil {
				got[i] = es
			}
		}
		if len(got) == cp.parts {
			for i := range cp.parts {
				cp.entries = append(cp.entries, got[i]...)
			}
			return cp, nil
		}
	}
	if cp != nil {
		return nil, fmt.Errorf("the checkpoint of partition %d names %d parts, %d of which are in the log", p, cp.parts, len(got))
	}
	return nil, nil
}
