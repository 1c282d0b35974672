package ingest

import (
	"strings"
	"testing"
	"unsafe"
)

// TestChunkArenaSizedForItsRecords: a chunk's records of one batch are kept in one arena
// block sized from the batch, not in blocks doubling from 64 KiB (which allocated about
// twice what a chunk of large records holds: 8 KB spans, 128 to a chunk, took five blocks
// and 2 MB for 1 MB of records).
func TestChunkArenaSizedForItsRecords(t *testing.T) {
	values := make([]string, chunkLen)
	for i := range values {
		values[i] = strings.Repeat(string(rune('a'+i%26)), 8000+i) // a little larger each
	}
	got, _, err := readResponse(fetchResponse(recordBatch(0, 0, values...)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != chunkLen {
		t.Fatalf("%d records, want %d", len(got), chunkLen)
	}
	// A record's value follows the one before it in its block; a new block breaks that.
	blocks := 1
	for i := 1; i < len(got); i++ {
		prev := unsafe.Pointer(unsafe.SliceData(got[i-1].Value))
		if unsafe.Pointer(unsafe.SliceData(got[i].Value)) != unsafe.Add(prev, len(got[i-1].Value)) {
			blocks++
		}
	}
	if blocks > 2 {
		t.Errorf("a chunk of %d records of ~8 KB took %d arena blocks, want 1 (2 when the estimate falls short)", chunkLen, blocks)
	}
	for i, m := range got {
		if string(m.Value) != values[i] {
			t.Fatalf("record %d: value of %d bytes, want %d", i, len(m.Value), len(values[i]))
		}
	}
}

// TestChunksOutliveTheirApplier: the chunks of an applier that ended go to the next one
// with their arenas, so a reconnect or a new generation's fetch (or the benchmark's next
// consumer) does not grow its arenas again.
func TestChunksOutliveTheirApplier(t *testing.T) {
	const size = 100 << 10
	// sync.Pool may drop what it is given (the race detector drops a quarter of puts, a
	// collection between may take the rest): tried a few times, each time with every chunk
	// holding an arena.
	for try := range 5 {
		ap := newApplier()
		var held []*chunk
		for range chunkDepth + 1 {
			ch := ap.take(true, 0, 0)
			ch.grow(size)
			held = append(held, ch)
		}
		for _, ch := range held {
			ap.free <- ch
		}
		ap.release()
		if len(ap.free) != 0 {
			t.Fatalf("release left %d chunks with the applier", len(ap.free))
		}
		next := newApplier()
		reused := 0
		for range chunkDepth + 1 {
			if ch := next.take(true, 0, 0); cap(ch.arena) >= size {
				reused++
			}
		}
		if reused > 0 {
			return
		}
		t.Logf("try %d: no chunk came back with its arena", try)
	}
	t.Fatal("a new applier never got an ended one's chunks: their arenas are grown again")
}
