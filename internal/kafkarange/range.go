// Package kafkarange reads a range of one partition's records through a kafka-go Conn: what
// the restores of ingest's snapshots and of clusterlimit's checkpoints do when they look back
// from a partition's end for the latest records of their keys. It also names the most record
// bytes slide's writers put in one batch (MaxBatchBytes).
package kafkarange

import (
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// MaxBatchBytes is the most record bytes slide's Kafka writers put in one partition's batch:
// Kafka's default largest message (message.max.bytes, 1,048,588, which the embedded broker
// keeps too) less room for the batch's framing. A broker refuses a larger batch whole.
const MaxBatchBytes = 1_000_000

// ErrStop, returned by Each's fn, ends the reading early without an error.
var ErrStop = errors.New("kafkarange: stop")

// Each seeks conn to from and calls fn for every record of its partition in [from, end), in
// log order, reading batches of cfg, each with a read deadline of wait from its fetch. It
// stops at end, or where nothing more comes below it (compaction left a gap up to end). After
// each batch it calls after, when not nil. It returns fn's error (nil for ErrStop), or the
// seek's or a batch's (a broker's RequestTimedOut is an empty batch, not an error).
func Each(conn *kafka.Conn, from, end int64, cfg kafka.ReadBatchConfig, wait time.Duration, fn func(kafka.Message) error, after func()) error {
	if _, err := conn.Seek(from, kafka.SeekAbsolute); err != nil {
		return fmt.Errorf("seeking to %d: %w", from, err)
	}
	for off := from; off < end; {
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		batch := conn.ReadBatchWith(cfg)
		n := 0
		var stop error
		for stop == nil {
			msg, err := batch.ReadMessage()
			if err != nil {
				break
			}
			n++
			if msg.Offset < end {
				stop = fn(msg)
			}
		}
		err := batch.Close()
		if stop != nil {
			if errors.Is(stop, ErrStop) {
				return nil
			}
			return stop
		}
		next, _ := conn.Offset()
		if err != nil && !errors.Is(err, kafka.RequestTimedOut) {
			return fmt.Errorf("reading at %d: %w", next, err)
		}
		if next <= off && n == 0 {
			break // nothing more below end
		}
		off = next
		if after != nil {
			after()
		}
	}
	return nil
}
