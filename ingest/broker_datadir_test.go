package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestBrokerDataDirSurvivesRestart writes records and commits a group's offset to a broker
// keeping its log in a directory, closes it, and starts another on the same directory and
// port: the records and the committed offset are there. A broker without one (the control)
// comes back empty.
func TestBrokerDataDirSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	for _, keep := range []bool{true, false} {
		cfg := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 2, Topic: "kept"}
		if keep {
			cfg.DataDir, cfg.SyncWrites = dir, true
		}
		b, err := StartBroker(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		addr := b.Addrs()[0]
		p, err := NewProducer(ProducerConfig{Brokers: []string{addr}, Topic: "kept", BatchTimeout: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		for i := range n {
			if err := p.Send(ctx, []byte{byte(i)}, []byte("record")); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		cl := &kafka.Client{Addr: kafka.TCP(addr), Transport: &kafka.Transport{}}
		if _, err := cl.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: "g", GenerationID: -1,
			Topics: map[string][]kafka.OffsetCommit{"kept": {{Partition: 0, Offset: 7}}}}); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}

		cfg.Addr = addr // the same port: clients come back to it
		b, err = StartBroker(ctx, cfg)
		if err != nil {
			t.Fatalf("restarting (data dir %v): %v", keep, err)
		}
		cl = &kafka.Client{Addr: kafka.TCP(addr), Transport: &kafka.Transport{}} // the default one's pooled connections died with the broker
		records := 0
		end, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"kept": {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, po := range end.Topics["kept"] {
			records += int(po.LastOffset)
		}
		fetched, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "g", Topics: map[string][]int{"kept": {0}}})
		if err != nil {
			t.Fatal(err)
		}
		committed := int64(-1)
		if ps := fetched.Topics["kept"]; len(ps) == 1 {
			committed = ps[0].CommittedOffset
		}
		b.Close()
		switch {
		case keep && (records != n || committed != 7):
			t.Fatalf("restarted on its data dir: %d records and offset %d committed, want %d and 7", records, committed, n)
		case !keep && (records != 0 || committed == 7):
			t.Fatalf("restarted in memory: %d records and offset %d committed, want an empty broker (the control)", records, committed)
		}
	}
}
