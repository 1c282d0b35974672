package ingest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/segmentio/kafka-go/compress"
)

// snappyCodec decodes snappy (raw, or in xerial chunks as the Java client writes it) within
// the budget. kafka-go's reader allocates what the input claims before it checks anything:
// a xerial chunk length, or a block's decoded length, up to 4 GiB from a few bytes. Here a
// chunk must lie within the input and a block's decoded length within the budget left
// before anything of that size is allocated.
type snappyCodec struct{ compress.Codec }

var xerialMagic = []byte{130, 83, 78, 65, 80, 80, 89, 0}

func (c snappyCodec) NewReader(r io.Reader) io.ReadCloser {
	return &snappyReader{src: r, left: max(inflateBudget.Load(), 0)}
}

type snappyReader struct {
	src  io.Reader
	in   []byte // compressed input not yet decoded; nil until read
	read bool
	out  []byte // decoded, not yet returned
	left int64  // budget left
}

func (r *snappyReader) Read(p []byte) (int, error) {
	if !r.read {
		// The input is one record batch, bounded by the fetch size.
		in, err := io.ReadAll(r.src)
		if err != nil {
			return 0, err
		}
		r.in, r.read = in, true
		if bytes.HasPrefix(in, xerialMagic) && len(in) >= 16 {
			r.in = in[16:]
		} else {
			r.in = nil
			if err := r.block(in); err != nil {
				return 0, err
			}
		}
	}
	for len(r.out) == 0 {
		if len(r.in) == 0 {
			return 0, io.EOF
		}
		if len(r.in) < 4 {
			return 0, fmt.Errorf("snappy: truncated xerial chunk header")
		}
		n := binary.BigEndian.Uint32(r.in)
		if uint64(n) > uint64(len(r.in)-4) {
			return 0, fmt.Errorf("snappy: xerial chunk of %d bytes in %d left", n, len(r.in)-4)
		}
		chunk := r.in[4 : 4+n]
		r.in = r.in[4+n:]
		if err := r.block(chunk); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// block decodes one snappy block into r.out, within the budget left.
func (r *snappyReader) block(b []byte) error {
	n, err := snappy.DecodedLen(b)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if int64(n) > r.left {
		return fmt.Errorf("%w: a snappy block of %d bytes", ErrInflateBudget, n)
	}
	out, err := snappy.Decode(nil, b)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	r.left -= int64(len(out))
	r.out = out
	return nil
}

func (r *snappyReader) Close() error { return nil }
