package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/slide-metrics/slide/internal/kafkatest"
)

// txnProducer is a franz-go client writing slide events to partition 0 of c's topic, as
// Kafka Streams under exactly_once_v2 or Flink's exactly-once sink does when txnID is set
// (an idempotent, non-transactional producer when it is empty).
func txnProducer(t *testing.T, c *kafkatest.Cluster, txnID string) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic(c.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceEvents writes one record a event of key to partition 0, each record its own batch.
func produceEvents(t *testing.T, cl *kgo.Client, key string, ts time.Time, n int) {
	t.Helper()
	for i := range n {
		v := fmt.Sprintf(`{"ts":%d,"key":%q,"metric":"requests","value":%d}`, ts.UnixMilli(), key, i+1)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func begin(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
}

func end(t *testing.T, cl *kgo.Client, commit kgo.TransactionEndTry) {
	t.Helper()
	if err := cl.EndTransaction(context.Background(), commit); err != nil {
		t.Fatal(err)
	}
}

// counted is the count of key's requests over the last 5 minutes at t0 (0 without a series).
func counted(r *running, key string, t0 time.Time) uint64 {
	a, err := r.store.ReadAt(t0.UnixMilli(), "requests", key, 5*time.Minute, nil)
	if err != nil {
		return 0
	}
	return a.Count
}

// TestReadCommittedSkipsAbortedTransactions writes what an exactly-once producer leaves in a
// topic: committed and aborted transactions of two transactional producers, interleaved with
// each other and with a plain producer's records, two aborted transactions of one producer
// in a row, and the commit and abort markers. Slide counts only the committed and the plain
// records, read in one fetch and one batch a fetch (the aborted list of each response).
func TestReadCommittedSkipsAbortedTransactions(t *testing.T) {
	t.Parallel()
	for _, maxBytes := range []int{0, 1} {
		t.Run(fmt.Sprintf("max_bytes=%d", maxBytes), func(t *testing.T) {
			t.Parallel()
			c := kafkatest.Start(t, "events", 1)
			t0 := time.Now()
			a, b, plain := txnProducer(t, c, "task-a"), txnProducer(t, c, "task-b"), txnProducer(t, c, "")

			produceEvents(t, plain, "plain", t0, 1)
			begin(t, a)
			produceEvents(t, a, "committed", t0, 2)
			produceEvents(t, plain, "plain", t0, 1)
			begin(t, b)
			produceEvents(t, b, "aborted", t0, 3)
			produceEvents(t, a, "committed", t0, 1)
			end(t, a, kgo.TryCommit)
			produceEvents(t, plain, "plain", t0, 1)
			produceEvents(t, b, "aborted", t0, 1)
			end(t, b, kgo.TryAbort)
			begin(t, b) // the retried task fails again
			produceEvents(t, b, "aborted", t0, 2)
			end(t, b, kgo.TryAbort)
			begin(t, b)
			produceEvents(t, b, "committed", t0, 1)
			end(t, b, kgo.TryCommit)
			produceEvents(t, plain, "plain", t0, 1)

			cfg := testConfig(c, "txn")
			cfg.MaxBytes = maxBytes
			r := start(t, cfg, newTestStore(t, 0), t0)
			eventually(t, 20*time.Second, "the topic read", func() bool { return caughtUp(t, c, r) }, progress(r))
			want := map[string]uint64{"committed": 4, "plain": 4, "aborted": 0}
			for key, n := range want {
				if got := counted(r, key, t0); got != n {
					t.Errorf("%s: counted %d requests, want %d", key, got, n)
				}
			}
		})
	}
}

// txnBatch is recordBatch written by producer pid with attrs (0x10: transactional).
func txnBatch(base, pid int64, attrs int16, values ...string) []byte {
	raw := recordBatch(base, attrs, values...)
	binary.BigEndian.PutUint64(raw[12+31:], uint64(pid)) // after base offset and length: the producer id
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// marker is producer pid's transaction marker at offset: ABORT (type 0) or COMMIT (1).
func marker(offset, pid int64, commit bool) []byte {
	raw := txnBatch(offset, pid, attrTransactional|attrControl, "")
	typ := byte(0)
	if commit {
		typ = 1
	}
	// The record's key: its length (varint 4), version 0, the type; in place of the
	// test batch's null key (varint −1), so the record is 4 bytes longer.
	r := kmsg.NewRecord()
	r.Key = []byte{0, 0, 0, typ}
	r.Value = []byte{0, 0, 0, 0, 0, 0}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	b := kmsg.NewRecordBatch()
	if err := b.ReadFrom(raw); err != nil {
		panic(err)
	}
	b.Records = r.AppendTo(nil)
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// txnLog is a partition's log from offset 10 as exactly-once producers 7 and 8 leave it,
// beside producer 9 (idempotent, not transactional) and a plain producer (−1):
//
//	10 7:a1  11 −1:ok1  12 8:c1  13 7:a2  14 7 ABORT  15 7:a3  16 9:ok2  17 8 COMMIT
//	18 7 ABORT  19 7:c2  20 7 COMMIT
//
// Producer 7 aborts two transactions in a row ([10,14] and [15,18]), then commits one.
func txnLog() []byte {
	return slices.Concat(
		txnBatch(10, 7, attrTransactional, "a1"),
		recordBatch(11, 0, "ok1"),
		txnBatch(12, 8, attrTransactional, "c1"),
		txnBatch(13, 7, attrTransactional, "a2"),
		marker(14, 7, false),
		txnBatch(15, 7, attrTransactional, "a3"),
		txnBatch(16, 9, 0, "ok2"),
		marker(17, 8, true),
		marker(18, 7, false),
		txnBatch(19, 7, attrTransactional, "c2"),
		marker(20, 7, true),
	)
}

// TestOwnFetchAbortedTransactions reads txnLog as the Kafka protocol has a read_committed
// consumer read it: the aborted transactions' writes are skipped, the committed ones and the
// non-transactional ones are handed on, the markers only move the offset, whether the fetch
// starts at the first aborted write or inside an aborted transaction, and whatever order the
// broker lists them in.
func TestOwnFetchAbortedTransactions(t *testing.T) {
	for _, tc := range []struct {
		from    int64
		aborted []abortedTxn
		want    []string
	}{
		{10, []abortedTxn{{7, 10}, {7, 15}}, []string{"11:ok1", "12:c1", "16:ok2", "19:c2"}},
		{10, []abortedTxn{{7, 15}, {7, 10}}, []string{"11:ok1", "12:c1", "16:ok2", "19:c2"}},
		{13, []abortedTxn{{7, 10}, {7, 15}}, []string{"16:ok2", "19:c2"}},
		// Nothing listed: nothing is skipped but the markers (read_uncommitted's view).
		{10, nil, []string{"10:a1", "11:ok1", "12:c1", "13:a2", "15:a3", "16:ok2", "19:c2"}},
	} {
		got, next, err := readResponse(fetchResponse(txnLog(), tc.aborted...), tc.from)
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		for _, m := range got {
			vals = append(vals, fmt.Sprintf("%d:%s", m.Offset, m.Value))
		}
		if !slices.Equal(vals, tc.want) || next != 21 {
			t.Errorf("from %d, aborted %v: records %v, next %d; want %v, next 21", tc.from, tc.aborted, vals, next, tc.want)
		}
	}
}

// TestOpenTransactionDoesNotHoldReadiness: a transaction left open (a Streams task that
// stalls, a Flink checkpoint that takes minutes) holds a read_committed consumer at its first
// record. The restore ends there (the last stable offset), so the instance becomes ready and
// its lag reads 0 rather than waiting for the transaction; once it commits, its records and
// the plain ones written after it are counted.
func TestOpenTransactionDoesNotHoldReadiness(t *testing.T) {
	t.Parallel()
	c := kafkatest.Start(t, "events", 1)
	t0 := time.Now()
	a, plain := txnProducer(t, c, "task-a"), txnProducer(t, c, "")
	produceEvents(t, plain, "plain", t0, 2)
	begin(t, a)
	produceEvents(t, a, "pending", t0, 2)
	produceEvents(t, plain, "plain", t0, 1)

	r := start(t, testConfig(c, "open"), newTestStore(t, 0), t0)
	eventually(t, 20*time.Second, "readiness with a transaction open", r.Ready, progress(r))
	// The high watermark is past the open transaction (two of its records, one plain after).
	if p := r.Progress().Partitions[0]; p.Target != 2 || p.Next != 2 || p.LastStableOffset == nil || *p.LastStableOffset != 2 || p.HighWaterMark != 5 {
		t.Errorf("progress %+v: want target, next and last stable offset at the open transaction's first offset, 2, and the high watermark at 5", p)
	}
	if got := sum(r.m.lag); got != 0 {
		t.Errorf("slide_ingest_lag = %v with everything readable read, want 0", got)
	}
	if got := counted(r, "plain", t0); got != 2 {
		t.Errorf("plain: counted %d before the transaction ends, want 2", got)
	}
	end(t, a, kgo.TryCommit)
	eventually(t, 20*time.Second, "the committed transaction and the records after it", func() bool {
		return counted(r, "pending", t0) == 2 && counted(r, "plain", t0) == 3
	}, progress(r))
}
