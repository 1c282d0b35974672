package batch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression of an input, found by Detect.
const (
	CompressionNone = ""
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
)

// FormatParquet is the Parquet input format (Job.Format): detected by the file's "PAR1" magic
// or a .parquet name; it needs a file (io.ReaderAt), not a stream.
const FormatParquet = "parquet"

// ErrCompressed wraps every error of a gzip or zstd stream (corrupt, truncated, too large a
// window).
var ErrCompressed = errors.New("bad compressed input")

var (
	magicGzip    = []byte{0x1f, 0x8b}
	magicZstd    = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicParquet = []byte("PAR1")
)

// zstdMaxWindow bounds the decoder's window (and so its memory): zstd's own default limit for
// frames a decoder must accept is 8 MiB; files compressed with --long up to 128 MiB are still
// read. A frame asking for more is refused, not allocated.
const zstdMaxWindow = 128 << 20

// sniff classifies the first bytes of an input (and its name, for names that say more).
func sniff(head []byte, name string) (compression, format string) {
	lower := strings.ToLower(name)
	switch {
	case bytes.HasPrefix(head, magicGzip):
		compression = CompressionGzip
	case bytes.HasPrefix(head, magicZstd):
		compression = CompressionZstd
	case bytes.HasPrefix(head, magicParquet):
		format = FormatParquet
	case strings.HasSuffix(lower, ".parquet") && len(head) == 0:
		format = FormatParquet
	}
	return compression, format
}

// decompress returns a reader of r's decompressed content for compression (gzip or zstd),
// and a close function. Memory is bounded by the decoders' windows, never by the output size:
// a small file that inflates to terabytes is read as a long stream in O(window) memory.
func decompress(r io.Reader, compression string) (io.Reader, func(), error) {
	switch compression {
	case CompressionGzip:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %w", ErrCompressed, err)
		}
		return errWrap{z, "gzip"}, func() { z.Close() }, nil
	case CompressionZstd:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderMaxMemory(1<<40))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %w", ErrCompressed, err)
		}
		return errWrap{z, "zstd"}, z.Close, nil
	}
	return r, func() {}, nil
}

// errWrap marks the decoders' errors (other than io.EOF) with ErrCompressed.
type errWrap struct {
	r    io.Reader
	kind string
}

func (e errWrap) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %s: %w", ErrCompressed, e.kind, err)
	}
	return n, err
}

// peekReader returns a reader equivalent to r and up to n of its first bytes.
func peekReader(r io.Reader, n int) (io.Reader, []byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(n)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, nil, fmt.Errorf("reading input: %w", err)
	}
	return br, head, nil
}

// countingReader counts the bytes read through it (for progress).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
