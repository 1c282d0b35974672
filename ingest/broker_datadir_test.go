package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Two brokers started on one data directory both ran and both acknowledged writes into the
// same segment files; a broker started on it afterwards held a log of both with offsets
// given twice. The second is refused while the first holds the directory, naming it and the
// holder, and the directory is free again once the first is closed.
func TestBrokerDataDirHeldByOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	cfg := BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, DataDir: dir}
	first, err := StartBroker(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := StartBroker(ctx, cfg)
	var de *DataDirError
	if err == nil || !errors.As(err, &de) || de.Dir != dir || !strings.Contains(err.Error(), fmt.Sprintf("in use by another broker (pid %d)", os.Getpid())) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second broker on the directory of a running one: %v, want a DataDirError naming the holder", err)
	}
	first.Close()
	second, err = StartBroker(ctx, cfg)
	if err != nil {
		t.Fatalf("the directory after its broker closed: %v", err)
	}
	second.Close()

	// A directory that cannot be made is one error about it, before the broker starts.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", DataDir: filepath.Join(file, "d")}); !errors.As(err, &de) {
		t.Errorf("a data directory under a file: %v, want a DataDirError", err)
	}
}
