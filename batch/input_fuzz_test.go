package batch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// drain reads every row of src (at most limit), as a job does.
func drain(src rowSource, limit int) error {
	for i := 0; i < limit; i++ {
		_, _, err := src.Next()
		if err == io.EOF {
			return nil
		}
		var re *RowError
		if err != nil && !errors.As(err, &re) {
			return err
		}
	}
	return nil
}

// FuzzParquet feeds hostile Parquet files to the reader: it must return rows or an error
// wrapping ErrParquet (or a missing column), never panic, and never allocate what a header
// claims (pages are checked against parquetMaxPage and the file size before they are read).
func FuzzParquet(f *testing.F) {
	rows := genOrders(300, 3, 9)
	valid := ordersParquet(f, rows, 100)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	corrupt := bytes.Clone(valid)
	for i := 8; i < len(corrupt)/2; i += 97 {
		corrupt[i] ^= 0x5a
	}
	f.Add(corrupt)
	f.Add(crcParquet(f, rows, 1)) // page CRCs set, dictionary pages, snappy
	f.Add(crcParquet(f, rows, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := newParquetRows(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrParquet) {
				t.Fatalf("open: error not wrapping ErrParquet: %v", err)
			}
			return
		}
		defer src.Close()
		if err := src.Select(src.Columns()); err != nil {
			if !errors.Is(err, ErrParquet) && !errors.Is(err, ErrMissingColumn) {
				t.Fatalf("select: %v", err)
			}
			return
		}
		if err := drain(src, 100_000); err != nil && !errors.Is(err, ErrParquet) {
			t.Fatalf("read: error not wrapping ErrParquet: %v", err)
		}
		// The fast reader of plain jobs (typed pages, parallel row groups): the same rule, or a
		// bad row's *RowError.
		for _, col := range src.Columns() {
			fast, ok := newParquetFast(src, col, "")
			if !ok {
				continue
			}
			vals := make([]float64, 4096)
			for n := 0; n < 100_000; {
				k, err := fast.Read(vals, nil)
				n += k
				var re *RowError
				if err == io.EOF || errors.As(err, &re) {
					break
				}
				if err != nil {
					if !errors.Is(err, ErrParquet) {
						t.Fatalf("fast read: error not wrapping ErrParquet: %v", err)
					}
					break
				}
			}
			fast.Close()
		}
	})
}

// FuzzCompressed feeds hostile gzip and zstd streams to the CSV path of RunAll: a clear error
// (ErrCompressed for a bad stream) or an answer, never a panic.
func FuzzCompressed(f *testing.F) {
	csvText := ordersCSVText(genOrders(200, 3, 4), ",")
	f.Add(gzipped(f, csvText))
	f.Add(zstded(f, csvText))
	f.Add(gzipped(f, csvText)[:40])
	f.Add(zstded(f, csvText)[:40])
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, magicGzip) && !bytes.HasPrefix(data, magicZstd) {
			return
		}
		j := Job{Size: 3, Column: "amount", SkipBad: true}
		rep, err := j.RunAll(context.Background(), bytes.NewReader(data), "-", nil)
		if err == nil && len(rep.Results) == 0 {
			t.Fatal("no error and no result")
		}
	})
}

// A decompression bomb (a few hundred KB that inflate to 256 MiB of one endless line) is read
// as a stream: the job stops at the 64 MiB line limit, and the heap never holds the inflated
// data.
func TestDecompressionBomb(t *testing.T) {
	const inflated = 256 << 20
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = '7'
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write([]byte("amount\n"))
	var zs bytes.Buffer
	zsw, _ := zstd.NewWriter(&zs, zstd.WithEncoderLevel(zstd.SpeedFastest))
	zsw.Write([]byte("amount\n"))
	for i := 0; i < inflated/len(zeros); i++ {
		zw.Write(zeros)
		zsw.Write(zeros)
	}
	zw.Close()
	zsw.Close()
	for name, data := range map[string][]byte{"gzip": gz.Bytes(), "zstd": zs.Bytes()} {
		t.Run(name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			began := time.Now()
			_, err := Job{Size: 2, Column: "amount"}.RunAll(context.Background(), bytes.NewReader(data), "-", nil)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrLineTooLong) && !errors.Is(err, ErrNoRows) {
				t.Fatalf("%d compressed bytes: err %v, want the line limit", len(data), err)
			}
			// The line buffer grows to 64 MiB (doubling, so about 128 MiB allocated in all);
			// the 256 MiB behind it is never held.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 200<<20 {
				t.Fatalf("allocated %d MiB reading a %d KiB bomb", grew>>20, len(data)>>10)
			}
			t.Logf("%s: %d KiB → stopped with %v in %v, %d MiB allocated", name, len(data)>>10,
				strings.SplitN(err.Error(), ":", 2)[0], time.Since(began).Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20)
		})
	}
}

// A zstd frame that asks for a window beyond the decoder's limit is refused, not allocated.
func TestZstdWindowLimit(t *testing.T) {
	// Frame header: magic, descriptor 0x00 (window descriptor present, no checksum),
	// window descriptor 0xf8: exponent 31 (2 GiB window).
	frame := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf8, 0x01, 0x00, 0x00}
	_, err := Job{Size: 1, Column: "amount"}.RunAll(context.Background(), bytes.NewReader(frame), "-", nil)
	if !errors.Is(err, ErrCompressed) {
		t.Fatalf("err %v, want ErrCompressed", err)
	}
}
