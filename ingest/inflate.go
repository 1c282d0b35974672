package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/segmentio/kafka-go"

	"github.com/segmentio/kafka-go/compress"
)

// DefaultMaxInflatedBytes is the default of Config.MaxInflatedBytes: the most one compressed
// record batch may inflate to. Producers batch at most a few MiB (kafka-go 1 MiB, the Java
// client's batch.size 16 KiB, a broker's message.max.bytes 1 MiB compressed), so 32 MiB
// leaves room for a 30:1 ratio on the largest usual batch. While inflating, the consumer's
// buffer grows by doubling up to the budget and no further, so a bomb costs about 1.5 times
// the budget for a moment (legacy message sets, which kafka-go reads, double past it: about
// four times); TestConsumerRefusesCompressionBombs measures the process's RSS.
const DefaultMaxInflatedBytes = 32 << 20

// ErrInflateBudget is the error a record batch fails with when it inflates beyond the
// budget (Config.MaxInflatedBytes). Its records are refused as event.ReasonTooLarge.
var ErrInflateBudget = errors.New("ingest: record batch inflates beyond the decompression budget")

// inflateBudget is the process-wide decompression budget, in bytes. kafka-go decompresses
// inside its message reader through the global compress.Codecs table, so the bound is a
// wrapping codec installed there once, and the budget is process-wide: the last New sets it.
var inflateBudget atomic.Int64

var installCodecs sync.Once

// setInflateBudget installs the bounded codecs (once) and sets the budget to n bytes.
func setInflateBudget(n int64) {
	installCodecs.Do(func() {
		for i, c := range compress.Codecs {
			switch {
			case c == nil:
			case i == int(compress.Zstd):
				compress.Codecs[i] = boundedCodec{zstdCodec{c}}
			case i == int(compress.Snappy):
				compress.Codecs[i] = boundedCodec{snappyCodec{c}}
			default:
				compress.Codecs[i] = boundedCodec{c}
			}
		}
	})
	inflateBudget.Store(n)
}

// zstdCodec decodes with a window and memory bound of the budget: a zstd frame declares its
// window, and kafka-go's decoder (klauspost's defaults) allocates up to 512 MiB for it before
// it writes a byte, so a 300-byte frame declaring the largest window cost 516 MiB with the
// output bounded at 1 MiB. A frame whose window passes the budget is refused.
type zstdCodec struct{ compress.Codec }

// zstdDecoders pools decoders by the budget they were made for.
var zstdDecoders sync.Map // int64 → *sync.Pool of *zstd.Decoder

func (z zstdCodec) NewReader(r io.Reader) io.ReadCloser {
	return newZstdReader(r, inflateBudget.Load())
}

// newZstdReader is a zstd reader whose window and memory are bounded by budget (at least
// 1 MiB: smaller windows are rare and cost nothing).
func newZstdReader(r io.Reader, budget int64) io.ReadCloser {
	budget = max(budget, 1<<20)
	pv, _ := zstdDecoders.LoadOrStore(budget, &sync.Pool{})
	pool := pv.(*sync.Pool)
	dec, _ := pool.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(uint64(min(budget, zstd.MaxWindowSize))), zstd.WithDecoderMaxMemory(uint64(budget)))
		if err != nil {
			return io.NopCloser(errReader{err})
		}
	}
	if err := dec.Reset(r); err != nil {
		pool.Put(dec)
		return io.NopCloser(errReader{err})
	}
	return &zstdReader{dec: dec, pool: pool}
}

type zstdReader struct {
	dec  *zstd.Decoder
	pool *sync.Pool
}

func (r *zstdReader) Read(p []byte) (int, error) {
	n, err := r.dec.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = fmt.Errorf("%w: %w", ErrInflateBudget, err)
	}
	return n, err
}

func (r *zstdReader) Close() error {
	if r.dec != nil {
		_ = r.dec.Reset(nil) // drop the reference to the input
		r.pool.Put(r.dec)
		r.dec = nil
	}
	return nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// boundedCodec is a kafka-go codec whose readers refuse to inflate beyond inflateBudget.
// Writers are the wrapped codec's.
type boundedCodec struct{ compress.Codec }

func (b boundedCodec) NewReader(r io.Reader) io.ReadCloser {
	n := inflateBudget.Load()
	return &boundedReader{rc: b.Codec.NewReader(r), left: n, budget: n}
}

// boundedReader passes at most left bytes through, then fails with ErrInflateBudget: the
// caller (kafka-go's bytes.Buffer.ReadFrom) holds at most the budget, never the bomb.
type boundedReader struct {
	rc     io.ReadCloser
	left   int64
	budget int64
}

func (r *boundedReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		// One byte more than the budget tells a stream that ends exactly at it from a bomb.
		var one [1]byte
		if n, err := r.rc.Read(one[:]); n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			return 0, err
		}
		return 0, fmt.Errorf("%w (%d bytes)", ErrInflateBudget, r.budget)
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	return n, err
}

func (r *boundedReader) Close() error { return r.rc.Close() }

// Inflate decompresses data compressed with codec (kafka-go's compression codes: 1 gzip, 2
// snappy, 3 lz4, 4 zstd) into at most budget bytes, failing with ErrInflateBudget beyond
// them. It is the bounded reader the consumer uses, exported for tools and fuzzing.
func Inflate(codec int8, data []byte, budget int64) ([]byte, error) {
	c := compress.Compression(codec).Codec()
	if c == nil {
		return nil, fmt.Errorf("ingest: unknown compression codec %d", codec)
	}
	if bc, ok := c.(boundedCodec); ok {
		c = bc.Codec // the bound is applied below, with this call's budget
	}
	var rc io.ReadCloser
	switch compress.Compression(codec) {
	case compress.Zstd:
		rc = newZstdReader(bytes.NewReader(data), budget)
	case compress.Snappy:
		rc = &snappyReader{src: bytes.NewReader(data), left: budget}
	default:
		rc = c.NewReader(bytes.NewReader(data))
	}
	r := &boundedReader{rc: rc, left: budget, budget: budget}
	defer r.rc.Close()
	return readBounded(r, nil, budget)
}

// errSkipped wraps the error of a fetch that stopped at a record it refused and moved past:
// the partition's worker reconnects at once.
type errSkipped struct{ err error }

func (e errSkipped) Error() string { return e.err.Error() }
func (e errSkipped) Unwrap() error { return e.err }

// unblock makes the Close of a batch that failed with ErrInflateBudget return at once.
// kafka-go does not count the compressed bytes a failed decompression consumed, so Close
// would wait for that many more bytes to discard until the read deadline; the connection
// is closed on the error anyway.
func unblock(conn *kafka.Conn) { _ = conn.SetReadDeadline(time.Now()) }
