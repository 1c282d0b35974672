package ingest

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// This file is read_committed for the consumer's own fetch (fetch_raw.go): the records of
// aborted transactions are passed over, as Kafka's own consumer does (KIP-98; the Java
// client's CompletedFetch). A read_committed fetch response ends at the last stable offset
// and lists, per partition, the aborted transactions its records overlap: {producer id, first
// offset}. Read in offset order, a transactional batch first moves every aborted transaction
// that began at or before its last offset into the set of aborted producers; a producer's
// ABORT marker takes it out again; a transactional data batch of a producer in the set is
// an aborted write, skipped whole. The list is per response (the broker lists again, in the
// next response, a transaction whose marker it did not reach), so no state crosses fetches.
//
// The common case costs a branch a batch: without aborted transactions in the response
// (a topic no transactional producer writes, or one whose transactions all committed), no
// batch looks further, and nothing is done per record.

// isolation is the Fetch and ListOffsets isolation level the consumer reads with.
func (c *Consumer) isolation() kafka.IsolationLevel {
	if c.cfg.ReadUncommitted {
		return kafka.ReadUncommitted
	}
	return kafka.ReadCommitted
}

// end returns how far the consumer can read by part, a response's partition read with error
// err: its last stable offset under read_committed, else its high watermark. It keeps the
// high watermark in f.top.
func (f *rawFetch) end(part fetchPart, err error) int64 {
	end := part.hwm
	if f.level == kafka.ReadCommitted && part.lso >= 0 {
		end = part.lso // as far as a read_committed fetch reaches: the lag and restore's end
	}
	if err == nil && part.err == nil {
		if f.top != nil {
			f.top.Store(part.hwm)
		}
		if f.seen != nil {
			f.seen(end)
		}
	}
	return end
}

// Record batch attributes (the Kafka protocol's).
const (
	attrTransactional = 0x10
	attrControl       = 0x20
)

// abortedTxn is one entry of a fetch response's aborted transactions.
type abortedTxn struct{ producer, first int64 }

// abortedTxns is the read_committed filter of the response being read; the zero value
// filters nothing. Owned by the fetcher.
type abortedTxns struct {
	list    []abortedTxn       // the response's aborted transactions by first offset, reused
	next    int                // list[next:] have not begun at the batches read so far
	aborted map[int64]struct{} // producers inside an aborted transaction at the batch being read
}

// read reads n entries of a response's aborted transactions, keeping them when keep.
func (a *abortedTxns) read(rr *respReader, n int32, keep bool) {
	a.list, a.next = a.list[:0], 0
	clear(a.aborted)
	if n <= 0 {
		return // none, or null
	}
	if !keep {
		rr.skip(16 * int(n))
		return
	}
	// Bounded by the size the response declares, and ended by the first read that fails: a
	// count read from garbage costs what really came.
	for range min(n, int32(rr.left/16)) {
		p, first := rr.int64(), rr.int64()
		if rr.err != nil {
			return
		}
		a.list = append(a.list, abortedTxn{producer: p, first: first})
	}
	if int(n) > len(a.list) {
		rr.skip(16 * int(n)) // past the end: the response's error
	}
	slices.SortFunc(a.list, func(x, y abortedTxn) int { return cmp.Compare(x.first, y.first) })
}

// skip reports whether the transactional batch body (after its base offset and length),
// at offsets base to last, is a write of an aborted transaction. It is called for every
// transactional batch of the response, in offset order, control batches included.
func (a *abortedTxns) skip(f *rawFetch, body []byte, base, last int64) bool {
	for ; a.next < len(a.list) && a.list[a.next].first <= last; a.next++ {
		if a.aborted == nil {
			a.aborted = map[int64]struct{}{}
		}
		a.aborted[a.list[a.next].producer] = struct{}{}
	}
	producer := int64(binary.BigEndian.Uint64(body[31:]))
	if binary.BigEndian.Uint16(body[9:])&attrControl != 0 {
		if f.abortMarker(body) {
			delete(a.aborted, producer) // the producer's writes after it are its next transaction's
		}
		return false // a marker is passed over anyway
	}
	_, aborted := a.aborted[producer]
	return aborted
}

// abortMarker reports whether control batch body holds an ABORT marker: its record's key is
// a version (int16) and a type, 0 for ABORT and 1 for COMMIT.
func (f *rawFetch) abortMarker(body []byte) bool {
	recs := body[batchHeader:]
	if codec := binary.BigEndian.Uint16(body[9:]) & 7; codec != 0 {
		var err error
		if recs, err = f.inflate(compress.Compression(codec), recs); err != nil {
			return false
		}
	}
	var r rawRecord
	if _, err := r.read(recs); err != nil || len(r.key) < 4 {
		return false
	}
	return binary.BigEndian.Uint16(r.key[2:]) == 0
}
