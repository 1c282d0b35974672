package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/kafkarange"
	"github.com/slide-metrics/slide/window"
)

// This file is the reading side of snapshots: finding the latest complete snapshot of a
// partition in the topic, loading it, and reporting the restore in Progress.

// loaded is a complete snapshot read back from the topic: its manifest and its chunks'
// payloads, in order, as the records carried them (never copied into one buffer).
type loaded struct {
	m      manifest
	pieces [][]byte
}

// read finds the latest complete snapshot of partition id for this group. It reads the
// snapshot partition backwards in growing windows from its end, keeping the latest record of
// each of the partition's keys, until the latest manifest and all its chunks are in hand or
// the log start is reached; so it is correct whether or not the broker has compacted the
// topic, and reads little when it has. The first window is a few records, where the latest
// manifest usually is (it is written last); once the manifest is found, the next window
// reaches exactly as far back as its chunks would be if they were written just before it,
// so a snapshot of one writer is read once, not with the chunk set before it (which doubled
// or tripled the bytes read: 31.5 MB for a 11.8 MB snapshot). progress is called with the
// bytes read so far.
func (s *snapshots) read(ctx context.Context, id int32, progress func(int64)) (*loaded, string, error) {
	conn, err := s.dial(ctx, s.snapPartition(id))
	if err != nil {
		return nil, reasonReadError, err
	}
	defer conn.Close()
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return nil, reasonReadError, fmt.Errorf("reading offsets: %w", err)
	}
	key := []byte(keyOf(s.c.cfg.Group, id))
	prefix := append(append([]byte{}, key...), '/')
	var man []byte // latest manifest value, nil until found
	var manOff int64
	aimed := false // the window after the manifest was aimed at its chunks
	chunks := map[string][]byte{}
	var read, held int64 // bytes read, and bytes of chunk records held (in chunks)
	end, window := last, int64(4)
	for end > first {
		from := max(first, end-window)
		// Within [from, end) later records win; records of a key already seen in a later
		// window are older and ignored.
		man0, man0Off, chunks0, held0 := []byte(nil), int64(0), map[string][]byte{}, int64(0)
		topic0, events0 := "", s.cfg.Events
		tooLarge := false
		cfg := kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: max(s.c.cfg.MaxBytes, 2*s.cfg.ChunkBytes), MaxWait: s.c.cfg.MaxWait}
		err := kafkarange.Each(conn, from, end, cfg, s.c.cfg.MaxWait+fetchMargin, func(msg kafka.Message) error {
			read += int64(len(msg.Value))
			switch {
			case bytes.Equal(msg.Key, key):
				man0, man0Off, topic0, events0 = msg.Value, msg.Offset, s.c.cfg.Topic, s.cfg.Events
				for _, h := range msg.Headers {
					switch h.Key {
					case topicHeader:
						topic0 = string(h.Value)
					case eventsHeader:
						events0 = string(h.Value)
					}
				}
			case bytes.HasPrefix(msg.Key, prefix):
				held0 += int64(len(msg.Value)) - int64(len(chunks0[string(msg.Key)]))
				chunks0[string(msg.Key)] = msg.Value
				if lim := s.cfg.MaxBytes; lim > 0 && held+held0 > 2*lim {
					tooLarge = true // more chunks than a snapshot the store can hold
					return kafkarange.ErrStop
				}
			}
			return nil
		}, func() { progress(read) })
		if tooLarge {
			return nil, reasonTooLarge, nil
		}
		if err != nil {
			return nil, reasonReadError, err
		}
		if man == nil {
			man, manOff = man0, man0Off
			if man != nil && topic0 != s.c.cfg.Topic {
				return nil, reasonOtherTopic, fmt.Errorf("the latest snapshot of %s in %s is of events topic %q, this instance reads %q: "+
					"give each deployment its own --snapshot-topic or --group", key, s.cfg.Topic, topic0, s.c.cfg.Topic)
			}
			if man != nil && events0 != s.cfg.Events {
				return nil, reasonConfigChanged, fmt.Errorf("the latest snapshot of %s was made of events read as %q, this instance reads them as %q",
					key, events0, s.cfg.Events)
			}
		}
		for k, v := range chunks0 {
			if _, seen := chunks[k]; !seen {
				chunks[k] = v
				held += int64(len(v))
			}
		}
		if man != nil {
			if l, reason, done := s.assemble(key, man, chunks); done {
				return l, reason, nil
			}
		}
		end, window = from, window*8
		if m, reason := parseManifest(man); man != nil && reason == "" && !aimed {
			aimed = true
			if need := from - (manOff - int64(m.chunks)); need > 0 {
				window = need
			}
		}
	}
	if man == nil {
		return nil, reasonMissing, nil
	}
	l, reason, _ := s.assemble(key, man, chunks)
	if l == nil && reason == "" {
		reason = reasonIncomplete
	}
	return l, reason, nil
}

// maxChunkPayload is the most payload one chunk record can carry: SnapshotConfig's largest
// ChunkBytes. A manifest declaring more than its chunk count of them is corrupt.
const maxChunkPayload = 64 << 20

// assemble puts the snapshot man names together from chunks. done is false while a chunk
// may still be found further back. Nothing is allocated by a size the manifest declares:
// the declared sizes are checked against the budget and the chunk count first, and the
// payload's size against the chunks' real sizes, which are already in memory.
func (s *snapshots) assemble(key, man []byte, chunks map[string][]byte) (l *loaded, reason string, done bool) {
	m, reason := parseManifest(man)
	if reason != "" {
		return nil, reason, true
	}
	switch {
	case s.cfg.MaxBytes > 0 && m.raw > uint64(s.cfg.MaxBytes):
		return nil, reasonTooLarge, true
	case m.size > m.chunks*maxChunkPayload:
		return nil, reasonCorrupt, true
	}
	var pieces [][]byte
	var size uint64
	for i := uint64(0); i < m.chunks; i++ {
		v, ok := chunks[fmt.Sprintf("%s/%c/%d", key, m.set, i)]
		switch {
		case !ok:
			return nil, "", false // further back, or gone
		case len(v) == 0:
			return nil, reasonIncomplete, true // deleted (a tombstone)
		}
		id, idx, piece, reason := parseChunk(v)
		switch {
		case reason != "":
			return nil, reason, true
		case id != m.id || idx != i:
			return nil, reasonIncomplete, true // overwritten by a later, unfinished snapshot
		}
		if size += uint64(len(piece)); size > m.size {
			return nil, reasonCorrupt, true
		}
		pieces = append(pieces, piece)
	}
	crc := uint32(0)
	for _, pc := range pieces {
		crc = crc32.Update(crc, castagnoli, pc)
	}
	if size != m.size || crc != m.crc {
		return nil, reasonCorrupt, true
	}
	return &loaded{m: m, pieces: pieces}, "", true
}

// load streams l into the store as partition p's, at now: the chunks read in order, a zstd
// payload inflated by the reader record batches use (its window and memory within
// Config.MaxInflatedBytes, one budget for both), the series admitted as events are
// (window.Store.LoadSnapshotFrom: key rule and length, skew, duplicates, cap).
func (s *snapshots) load(now time.Time, p *partition, l *loaded) (int, error) {
	rs := make([]io.Reader, len(l.pieces))
	for i, pc := range l.pieces {
		rs[i] = bytes.NewReader(pc)
	}
	r, size := io.MultiReader(rs...), int64(l.m.size)
	if l.m.codec == codecZstd {
		zr := newZstdReader(r, s.c.cfg.MaxInflatedBytes)
		defer zr.Close()
		r, size = zr, int64(l.m.raw)
	}
	return s.c.store.LoadSnapshotFrom(now.UnixMilli(), p.id, r, size, window.SnapshotLimits{MaxNameLen: s.c.cfg.MaxKeyLen})
}

// loadReason is the slide_snapshot_restore_total reason of a load's error: the event
// refusal's where the rule is the same.
func loadReason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrInflateBudget):
		return reasonTooLarge
	case errors.Is(err, window.ErrSnapshotVersion):
		return reasonUnknownVersion
	case errors.Is(err, window.ErrSnapshotShape):
		return reasonConfigChanged
	case errors.Is(err, window.ErrSnapshotName):
		return reasonBadField
	case errors.Is(err, window.ErrSnapshotNameLength):
		return reasonKeyTooLong
	case errors.Is(err, window.ErrSnapshotFuture):
		return reasonFuture
	case errors.Is(err, window.ErrSnapshotDuplicate):
		return reasonDuplicate
	}
	return reasonCorrupt
}

func (s *snapshots) dial(ctx context.Context, part int) (*kafka.Conn, error) {
	d := s.c.cfg.Dialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	var errs []error
	for _, b := range s.c.cfg.Brokers {
		conn, err := d.DialLeader(ctx, "tcp", b, s.cfg.Topic, part)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("dialing the leader of snapshot partition %d: %w", part, errors.Join(errs...))
}

// restore loads the latest usable snapshot of p into the store and moves p's replay to
// start at its offset. When there is none, p replays the log from the start plan chose;
// either way the choice is counted and logged. The partition's worker calls it once,
// before its first fetch.
func (s *snapshots) restore(ctx context.Context, p *partition) {
	p.snap.restored = true
	p.snap.last = time.Now() // the first snapshot one interval after assignment, not during the load
	if !s.ready.Load() {
		// Serve just started and the snapshot topic is still being checked: a restore that
		// did not wait replayed the whole log without looking for a snapshot, and said
		// nothing (a race with the group's join, lost more often on a loaded machine).
		t := time.NewTimer(settleWait)
		select {
		case <-s.settled:
		case <-ctx.Done():
		case <-t.C:
			// Said once per partition: the check goes on, and a later restore waits again.
			s.log.Warn("ingest: no usable snapshot, replaying the log", "partition", p.id, "from", p.from,
				"why", "the snapshot topic was not checked within "+settleWait.String()+" (the broker did not answer)")
		}
		t.Stop()
		if ctx.Err() != nil {
			p.snap.restored = false // the generation ended: the next one's worker looks again
			return
		}
	}
	if !s.ready.Load() { // snapshots off (said once when the topic was refused), or not checked in time
		p.snap.state(sourceLog, "replaying")
		return
	}
	p.snap.state(sourceSnapshot, "reading_snapshot")
	l, reason, err := s.read(ctx, p.id, func(n int64) {
		p.snap.mu.Lock()
		p.snap.bytes = n
		p.snap.mu.Unlock()
	})
	if ctx.Err() != nil {
		// Nothing was loaded: a next generation keeping p looks for its snapshot again,
		// rather than replay its whole log.
		p.snap.restored = false
		return
	}
	now := s.c.now()
	if l != nil {
		reason = s.usable(ctx, p, l.m, now)
	}
	n := 0
	if reason == "" {
		n, err = s.load(now, p, l)
		reason = loadReason(err)
	}
	if reason != "" {
		s.m.restores.WithLabelValues(sourceLog, reason).Inc()
		p.snap.state(sourceLog, "replaying")
		level := slog.LevelInfo
		if reason == reasonOtherTopic {
			level = slog.LevelWarn // a misconfiguration: every restore replays until it is fixed
		}
		attrs := []any{"partition", p.id, "reason", reason, "from", p.from}
		if err != nil {
			attrs = append(attrs, "err", err)
		} else if why := reasonText[reason]; why != "" {
			attrs = append(attrs, "why", why) // not "err=<nil>": a refusal found by looking, not an error
		}
		s.log.Log(ctx, level, "ingest: no usable snapshot, replaying the log", attrs...)
		return
	}
	s.m.restores.WithLabelValues(sourceSnapshot, reasonLoaded).Inc()
	p.snap.set.Store(int32('a' + 'b' - int32(l.m.set))) // never overwrite the chunks just loaded
	p.snap.mu.Lock()
	p.snap.offset = l.m.offset
	p.snap.mu.Unlock()
	p.snap.state("", "replaying")
	s.c.mu.Lock()
	full := p.from
	p.from = l.m.offset
	s.c.mu.Unlock()
	p.next.Store(l.m.offset)
	p.lag.Set(float64(max(p.hwm.Load()-l.m.offset, 0)))
	s.log.Info("ingest: snapshot loaded, replaying the log after it", "partition", p.id, "series", n,
		"bytes", l.m.raw, "offset", l.m.offset, "age", now.Sub(time.UnixMilli(l.m.taken)).Round(time.Millisecond),
		"records_saved", l.m.offset-full, "to", p.target)
	if l.m.offset >= p.target {
		s.c.markRestored(p)
	}
}

// usable returns why m cannot be used for p at now, or "".
func (s *snapshots) usable(ctx context.Context, p *partition, m manifest, now time.Time) string {
	if time.UnixMilli(m.taken).Before(now.Add(-s.c.cfg.Restore)) {
		return reasonTooOld
	}
	if time.UnixMilli(m.taken).After(now.Add(s.c.skew())) {
		// Taken at a clock ahead of this one (a wall clock that jumped, then was corrected):
		// what had left the windows then is inside them now, and a snapshot with no ring to
		// be refused as future would move the replay past it.
		return reasonFuture
	}
	offs, err := s.c.listOffsets(ctx, []int32{p.id}, func(id int32) kafka.OffsetRequest { return kafka.FirstOffsetOf(int(id)) })
	if err != nil {
		return reasonReadError
	}
	if po := offs[p.id]; po.FirstOffset > m.offset {
		return reasonTooOld // retention deleted records the snapshot does not cover
	}
	if m.offset > p.target {
		ends, err := s.c.listOffsets(ctx, []int32{p.id}, func(id int32) kafka.OffsetRequest { return kafka.LastOffsetOf(int(id)) })
		if err != nil {
			return reasonReadError
		}
		if ends[p.id].LastOffset < m.offset {
			return reasonAheadOfLog
		}
	}
	return ""
}

// SnapshotProgress is a partition's snapshot state in /readyz.
type SnapshotProgress struct {
	Source    string `json:"source"`               // "snapshot" or "log": what the restore starts from
	Phase     string `json:"phase"`                // "reading_snapshot", "replaying" or "live"
	Offset    int64  `json:"offset,omitempty"`     // offset the loaded snapshot covers up to
	BytesRead int64  `json:"bytes_read,omitempty"` // snapshot bytes read so far
}

func (ps *partSnap) progress(restored bool) *SnapshotProgress {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	sp := &SnapshotProgress{Source: ps.source, Phase: ps.phase, Offset: ps.offset, BytesRead: ps.bytes}
	if sp.Source == "" {
		sp.Source, sp.Phase = sourceLog, "replaying"
	}
	if restored {
		sp.Phase = "live"
	}
	return sp
}

// observeRestore records p's restore duration by its source.
func (s *snapMetrics) observeRestore(p *partition, d time.Duration) {
	p.snap.mu.Lock()
	src := p.snap.source
	p.snap.mu.Unlock()
	if src == "" {
		src = sourceLog
	}
	s.restoreDuration.WithLabelValues(src).Observe(d.Seconds())
}
