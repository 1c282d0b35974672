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
//
// A fetch answers with at least one whole record batch however small MaxBytes is, so a
// probe reads every record of the batch it gets, not only the first: the search narrows to
// the records the batch holds once it lands on the one where the span starts, instead of
// fetching that same batch again for each of the ~log2(batch) probes inside it. The first
// probe reads the log start: a log wholly inside the span (a new topic, a short
// retention) answers there in one fetch, and a probe over a range one batch long starts at
// its low end, so that batch settles it.
func (c *Consumer) restoreStart(ctx context.Context, id int32, first, end int64, start, maxTS time.Time) (int64, error) {
	pr := &prober{c: c, id: id}
	defer pr.close()
	return pr.search(ctx, first, end, start, maxTS)
}

// search is restoreStart over the prober's partition.
func (pr *prober) search(ctx context.Context, first, end int64, start, maxTS time.Time) (int64, error) {
	lo, hi := max(first, 0), end
	mid := lo
	for lo < hi {
		got, err := pr.probe(ctx, mid, hi, start, maxTS)
		if err != nil {
			return 0, err
		}
		k := 0 // the first informative record at or after start
		for k < len(got) && got[k].ts.Before(start) {
			k++
		}
		switch {
		case k == 0: // nothing informative, or the first record read is in the span
			hi = mid
		case k < len(got): // the span starts right after got[k-1]
			lo = got[k-1].off + 1
			hi = lo
		default: // every record read is before the span
			lo = got[k-1].off + 1
		}
		mid = lo + (hi-lo)/2
		if n := len(got); n > 0 && hi-lo <= got[n-1].off-got[0].off+1 {
			mid = lo // one batch-length left: read it from its start
		}
	}
	return lo, nil
}

// sample is the offset and timestamp of one record a probe read.
type sample struct {
	off int64
	ts  time.Time
}

// prober reads records of one partition for restoreStart, over one connection that it
// redials when a bounded read has closed it.
type prober struct {
	c       *Consumer
	id      int32
	conn    *kafka.Conn
	got     []sample // the last probe's answer, reused
	fetches int      // fetches made, for tests
}

func (p *prober) close() {
	if p.conn != nil {
		p.conn.Close()
	}
}

// probe reads the records from offset from (and below end) that one fetch answers with,
// and returns those whose timestamps it could read and that are not stamped after maxTS,
// in offset order, up to the first stamped at or after start (what follows it cannot
// move the search). It fetches again past a batch that told nothing (a bomb, records stamped
// after maxTS), and returns none once probeScan records in a row from from told nothing.
// The answer is valid until the next probe.
func (p *prober) probe(ctx context.Context, from, end int64, start, maxTS time.Time) ([]sample, error) {
	p.got = p.got[:0]
	for off, passed := from, 0; off < end && passed < probeScan; {
		if p.conn == nil {
			conn, fc, err := p.c.dialLeader(ctx, p.id)
			if err != nil {
				return nil, err
			}
			if fc != nil {
				fc.follow = p.c.cfg.MaxWait + fetchMargin // a probe's batch may be one record past MaxBytes, over a slow link
			}
			p.conn = conn
		}
		if _, err := p.conn.Seek(off, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
			return nil, fmt.Errorf("seeking to offset %d: %w", off, err)
		}
		_ = p.conn.SetReadDeadline(time.Now().Add(p.c.cfg.MaxWait + fetchMargin))
		batch := p.conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 1, MaxWait: p.c.cfg.MaxWait})
		p.fetches++
		read := 0
		var err error
		for passed < probeScan {
			var m kafka.Message
			if m, err = batch.ReadMessage(); err != nil || m.Offset >= end {
				break
			}
			read++
			off = m.Offset + 1
			if !m.Time.After(maxTS) {
				p.got = append(p.got, sample{m.Offset, m.Time})
				if !m.Time.Before(start) {
					break
				}
			} else if len(p.got) == 0 {
				passed++ // stamped beyond the span: says nothing about where it starts
			}
		}
		bomb := errors.Is(err, ErrInflateBudget)
		if bomb {
			unblock(p.conn)
		}
		cerr := batch.Close()
		switch {
		case bomb:
			// A bomb tells no timestamp; kafka-go closed the connection on it.
			p.conn.Close()
			p.conn = nil
			if read == 0 {
				off++
				passed++
			}
		case read == 0 && err != nil:
			if cerr == nil {
				cerr = err
			}
			return nil, fmt.Errorf("reading offset %d: %w", off, cerr)
		case read == 0:
			return nil, nil // no record below end
		case cerr != nil:
			p.conn.Close() // redialled by the next fetch
			p.conn = nil
		}
		if len(p.got) > 0 {
			return p.got, nil
		}
	}
	return nil, nil
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
