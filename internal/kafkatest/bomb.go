package kafkatest

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Compression codes of a record batch's attributes.
const (
	Gzip int8 = 1
	Zstd int8 = 4
)

// ZstdRLE returns a zstd frame of head, then n bytes c (rounded down to whole 128 KiB), then
// tail, without holding the n bytes: head and tail are raw blocks (each under 128 KiB), the
// run RLE blocks of 4 bytes per 128 KiB (32 KiB per GiB).
func ZstdRLE(head []byte, c byte, n int64, tail []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xFD2FB528)
	b = append(b, 0x00, 7<<3) // no content size, no checksum; window 128 KiB
	block := func(typ, sz int, last bool) {
		h := uint32(typ<<1 | sz<<3)
		if last {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16))
	}
	block(0, len(head), false)
	b = append(b, head...)
	const rle = 128 << 10
	for range n / rle {
		block(1, rle, false)
		b = append(b, c)
	}
	block(0, len(tail), true)
	return append(b, tail...)
}

// BombRecords returns the compressed records section of a record batch holding one record
// whose value is about inflated zero bytes (rounded up to whole MiB), compressed with codec
// (Gzip or Zstd), without ever holding the inflated bytes: a zstd frame of RLE blocks (32 KiB
// per GiB) or a deflate stream of one repeated block (about 1 MiB per GiB). Both are valid
// streams: a decoder given the memory inflates them to the end.
func BombRecords(codec int8, inflated int64) ([]byte, error) {
	const mib = 1 << 20
	chunks := max((inflated+mib-1)/mib, 1)
	n := chunks * mib
	// The record: length, attributes, timestamp delta, offset delta, key length -1, value
	// length, value (n zeros), header count 0.
	var head []byte
	head = append(head, 0)              // attributes
	head = binary.AppendVarint(head, 0) // timestamp delta
	head = binary.AppendVarint(head, 0) // offset delta
	head = binary.AppendVarint(head, -1)
	head = binary.AppendVarint(head, n)
	tail := binary.AppendVarint(nil, 0)
	size := int64(len(head)) + n + int64(len(tail))
	head = append(binary.AppendVarint(nil, size), head...)

	switch codec {
	case Zstd:
		return ZstdRLE(head, 0, n, tail), nil
	case Gzip:
		var b []byte
		b = append(b, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff)
		stored := func(p []byte, final bool) {
			var f byte
			if final {
				f = 1
			}
			b = append(b, f)
			b = binary.LittleEndian.AppendUint16(b, uint16(len(p)))
			b = binary.LittleEndian.AppendUint16(b, ^uint16(len(p)))
			b = append(b, p...)
		}
		stored(head, false)
		// The first MiB of zeros, then one MiB-block that only refers back (to zeros),
		// repeated: each ends on a sync flush, so the blocks can be concatenated.
		var z bytes.Buffer
		fw, err := flate.NewWriter(&z, flate.BestCompression)
		if err != nil {
			return nil, err
		}
		zeros := make([]byte, mib)
		if _, err := fw.Write(zeros); err != nil {
			return nil, err
		}
		if err := fw.Flush(); err != nil {
			return nil, err
		}
		first := bytes.Clone(z.Bytes())
		z.Reset()
		if _, err := fw.Write(zeros); err != nil {
			return nil, err
		}
		if err := fw.Flush(); err != nil {
			return nil, err
		}
		again := z.Bytes()
		b = append(b, first...)
		for range chunks - 1 {
			b = append(b, again...)
		}
		stored(tail, true)
		crc := crc32.Update(0, crc32.IEEETable, head)
		for range chunks {
			crc = crc32.Update(crc, crc32.IEEETable, zeros)
		}
		crc = crc32.Update(crc, crc32.IEEETable, tail)
		b = binary.LittleEndian.AppendUint32(b, crc)
		return binary.LittleEndian.AppendUint32(b, uint32(int64(len(head))+n+int64(len(tail)))), nil
	}
	return nil, fmt.Errorf("kafkatest: no bomb for codec %d", codec)
}

// BombBatch returns a v2 record batch (as a Produce request carries it) of one record
// stamped ts whose value inflates to about inflated bytes with codec.
func BombBatch(codec int8, inflated int64, ts time.Time) ([]byte, error) {
	recs, err := BombRecords(codec, inflated)
	if err != nil {
		return nil, err
	}
	return RecordBatch(codec, recs, 1, ts), nil
}

// RecordBatch frames records (already compressed with codec, numRecords of them, all
// stamped ts) as a v2 record batch with its length and CRC.
func RecordBatch(codec int8, records []byte, numRecords int32, ts time.Time) []byte {
	rb := kmsg.RecordBatch{
		Magic: 2, Attributes: int16(codec), LastOffsetDelta: numRecords - 1,
		FirstTimestamp: ts.UnixMilli(), MaxTimestamp: ts.UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: numRecords, Records: records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// ProduceRaw sends batch (a v2 record batch) to topic/partition of the broker at addr with
// a raw Produce request, as a producer that compressed it itself would, and returns the
// broker's error code (0 when it took the batch).
func ProduceRaw(addr, topic string, partition int32, batch []byte) (int16, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return produceRaw(conn, topic, partition, batch)
}

// produceRaw is ProduceRaw over an open connection, which stays usable for the next batch.
func produceRaw(conn net.Conn, topic string, partition int32, batch []byte) (int16, error) {
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	msg := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kafkatest")).AppendRequest(nil, req, 1)
	if _, err := conn.Write(msg); err != nil {
		return 0, err
	}
	var sz [4]byte
	if _, err := io.ReadFull(conn, sz[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return 0, err
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = req.Version
	if err := resp.ReadFrom(body[4:]); err != nil {
		return 0, fmt.Errorf("decoding the produce response: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce answered %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}
