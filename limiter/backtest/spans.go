package backtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/window"
)

// MaxSpanRequest bounds one request of a span log (ReadSpans).
const MaxSpanRequest = 64 << 20

// ReadSpans reads a log of OpenTelemetry trace requests with f (event.NewOTLPJSON: one
// ExportTraceServiceRequest in OTLP/JSON a line; event.NewOTLPProto with framed: each request
// in protobuf after its length as 4 big-endian bytes) and calls fn for each span, in time
// order: a request of the span's key (the resource attribute the decoder keys spans by,
// service.name by default) of cost 1 at the span's end, then the metric event of its series
// (duration_ms with the span's key and labels), which usage rules read. Exporters batch spans
// out of time order, so the log is read whole and its spans sorted first (stably: a
// request's spans keep their order among equal times); memory is O(spans). A refused span,
// or a request that is not one, is an error wrapping ErrLog that names the request (Line:
// from 1) and the span, as a bad line of a request log is.
func ReadSpans(r io.Reader, f event.Format, framed bool, fn func(Request) error) error {
	var reqs []Request
	var bad error
	n := int64(0)
	take := func(body []byte) {
		n++
		f.DecodeLines(body, 0, func(part []byte, ev window.Event, reason event.Reason) {
			if bad != nil {
				return
			}
			if reason != event.ReasonNone {
				where := "span"
				if l, ok := f.(event.Locator); ok {
					where = l.Where(body, part)
				}
				bad = lineErr(n, "%s refused: %s: %s", where, reason, f.Explain(part))
				return
			}
			at := time.UnixMilli(ev.TS)
			reqs = append(reqs, Request{Time: at, Key: window.SeriesKeyOf(ev.Key), Cost: 1, Line: n},
				Request{Time: at, Key: ev.Key, Line: n, Metric: ev.Metric, Value: ev.Value, Count: ev.Count})
		})
	}
	var err error
	if framed {
		err = readFramed(r, func(b []byte) error { take(b); return bad })
	} else {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), MaxSpanRequest)
		for sc.Scan() && bad == nil {
			if b := sc.Bytes(); len(b) > 0 {
				take(b)
			} else {
				n++
			}
		}
		if err = sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			err = lineErr(n+1, "longer than %d bytes", MaxSpanRequest)
		}
	}
	if bad != nil {
		return bad
	}
	if err != nil {
		return err
	}
	slices.SortStableFunc(reqs, func(a, b Request) int { return a.Time.Compare(b.Time) })
	for _, req := range reqs {
		if err := fn(req); err != nil {
			return err
		}
	}
	return nil
}

// readFramed calls fn with each request of r: its length as 4 big-endian bytes, then that
// many bytes.
func readFramed(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var head [4]byte
	var buf []byte
	for n := int64(1); ; n++ {
		if _, err := io.ReadFull(br, head[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return lineErr(n, "a length of 4 bytes: %v", err)
		}
		size := binary.BigEndian.Uint32(head[:])
		if size > MaxSpanRequest {
			return lineErr(n, "a request of %d bytes, more than %d", size, MaxSpanRequest)
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if _, err := io.ReadFull(br, buf); err != nil {
			return lineErr(n, "%d bytes announced: %v", size, err)
		}
		if err := fn(buf); err != nil {
			return err
		}
	}
}
