package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// probeScan is how many records a restore probe reads past one it learns nothing from (a
// batch over the decompression budget, a record stamped beyond now + skew) before it
// gives up on the probe.
const probeScan = 8

// restoreStart finds the first offset in [first, end) of partition id whose record was
// stamped at or after start, by a binary search over offsets that reads record timestamps
// (one small fetch per probe). It returns end when no record qualifies.
//
// Slide does not ask the broker (ListOffsets by time) for two reasons. A broker answers with
// the first record after which the running maximum of timestamps reaches start, so one
// record stamped in the future at a partition's head makes it answer offset 0 and every
// restore replays the whole partition. And kfake (the embedded broker, `slide broker`)
// inflates the whole batch the lookup lands in, so a compression bomb in the restore span
// inflates inside the broker on every assignment. A probe here reads through the bounded
// codecs, and a record it learns nothing from (too large, stamped beyond maxTS) is passed
// over for the next one. The search assumes timestamps that do not decrease along the log
// by more than the skew the restore span already allows for; a probe that finds nothing
// informative within probeScan records counts as "at or after start", which replays more,
// never less.
func (c *Consumer) restoreStart(ctx context.Context, id int32, first, end int64, start, maxTS time.Time) (int64, error) {
	pr := &prober{c: c, id: id}
	defer pr.close()
	lo, hi := max(first, 0), end
	for lo < hi {
		mid := lo + (hi-lo)/2
		off, ts, ok, err := pr.probe(ctx, mid, hi, maxTS)
		if err != nil {
			return 0, err
		}
		if !ok || !ts.Before(start) {
			hi = mid
		} else {
			lo = off + 1
		}
	}
	return lo, nil
}

// prober reads single records of one partition for restoreStart, over one connection
// that it redials when a bounded read has closed it.
type prober struct {
	c    *Consumer
	id   int32
	conn *kafka.Conn
}

func (p *prober) close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

// probe reads the first record at or after offset from (and below end) whose timestamp
// it can read and that is not stamped after maxTS, looking at most probeScan records far.
func (p *prober) probe(ctx context.Context, from, end int64, maxTS time.Time) (int64, time.Time, bool, error) {
	for off, n := from, 0; off < end && n < probeScan; n++ {
		if p.conn == nil {
			conn, err := p.c.dialLeader(ctx, p.id)
			if err != nil {
				return 0, time.Time{}, false, err
			}
			p.conn = conn
		}
		if _, err := p.conn.Seek(off, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
			return 0, time.Time{}, false, fmt.Errorf("seeking to offset %d: %w", off, err)
		}
		_ = p.conn.SetReadDeadline(time.Now().Add(p.c.cfg.MaxWait + fetchMargin))
		batch := p.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 1, MaxWait: p.c.cfg.MaxWait})
		m, err := batch.ReadMessage()
		if errors.Is(err, ErrInflateBudget) {
			unblock(p.conn)
		}
		cerr := batch.Close()
		switch {
		case err == nil && m.Time.After(maxTS):
			off = m.Offset + 1 // stamped beyond the span: says nothing about where it starts
		case err == nil:
			return m.Offset, m.Time, true, nil
		case errors.Is(err, ErrInflateBudget):
			// A bomb tells no timestamp; kafka-go closed the connection on it.
			p.conn.Close()
			p.conn = nil
			off++
		default:
			if cerr == nil {
				cerr = err
			}
			return 0, time.Time{}, false, fmt.Errorf("reading offset %d: %w", off, cerr)
		}
	}
	return 0, time.Time{}, false, nil
}

// restoreStarts searches the restore start of every partition in ids, in parallel, within
// [log start, end) as firsts and ends answered.
func (c *Consumer) restoreStarts(ctx context.Context, ids []int32, firsts, ends map[int32]kafka.PartitionOffsets, now time.Time) (map[int32]int64, error) {
	start, maxTS := now.Add(-c.cfg.Restore), now.Add(c.skew())
	out := make(map[int32]int64, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for _, id := range ids {
		end, ok := ends[id]
		if !ok || end.LastOffset < 0 {
			continue // partitionsFrom reports it
		}
		first := firsts[id].FirstOffset
		wg.Add(1)
		go func() {
			defer wg.Done()
			off, err := c.restoreStart(ctx, id, first, end.LastOffset, start, maxTS)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("partition %d: searching the restore start: %w", id, err))
				return
			}
			out[id] = off
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// skew is how far past now a record may be stamped and still tell where the restore span
// starts: the default ring's skew.
func (c *Consumer) skew() time.Duration { return c.store.RingConfig("").Skew }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
