package rls_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/slide-metrics/slide/rls"
)

// h2Conn is the frames load generator's client: gRPC over one cleartext
// HTTP/2 connection (h2c, what Envoy's gRPC client speaks to a rate limit
// service), driven by one goroutine that keeps a fixed number of calls in
// flight. A finished call starts the next one on the same goroutine and the
// frames written meanwhile go out in one write when no more input is buffered,
// so the generator spends its CPU on the frames themselves: no goroutine per
// call, no hand-offs between a reader, a writer and the caller (grpc-go's
// client has all three). It keeps HTTP/2's rules a server relies on: the
// connection preface and SETTINGS, PING and SETTINGS acknowledged, the
// server's connection send window (its own receive window is opened wide once,
// so the server never waits for it), HPACK state on both sides, and a call
// ends at its trailers with grpc-status 0 or fails.
type h2Conn struct {
	c       net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	fr      *http2.Framer
	hbuf    bytes.Buffer
	enc     *hpack.Encoder
	path    string
	auth    string
	nextID  uint32
	sendWin int64 // the server's connection window for our DATA
	calls   map[uint32]*h2Call
}

type h2Call struct {
	start time.Time
	body  []byte
	hdrs  bool // response headers seen
}

// h2ConnWindow is the receive window the generator opens (HTTP/2's maximum).
const h2ConnWindow = 1<<31 - 1

func dialH2(addr string) (*h2Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := &h2Conn{c: c, br: bufio.NewReaderSize(c, 32<<10), bw: bufio.NewWriterSize(c, 32<<10),
		path: "/" + "envoy.service.ratelimit.v3.RateLimitService" + "/ShouldRateLimit", auth: addr,
		nextID: 1, sendWin: 65535, calls: map[uint32]*h2Call{}}
	h.fr = http2.NewFramer(h.bw, h.br)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hbuf)
	if _, err := h.bw.WriteString(http2.ClientPreface); err != nil {
		c.Close()
		return nil, err
	}
	err = errors.Join(
		h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2ConnWindow}, http2.Setting{ID: http2.SettingEnablePush, Val: 0}),
		h.fr.WriteWindowUpdate(0, h2ConnWindow-65535),
		h.bw.Flush())
	if err != nil {
		c.Close()
		return nil, err
	}
	return h, nil
}

func (h *h2Conn) Close() error { return h.c.Close() }

// send starts a call of one gRPC message (already framed: flag, length, bytes).
func (h *h2Conn) send(msg []byte) error {
	id := h.nextID
	h.nextID += 2
	h.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: h.path}, {Name: ":authority", Value: h.auth},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		if err := h.enc.WriteField(f); err != nil {
			return err
		}
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	if err := h.fr.WriteData(id, true, msg); err != nil {
		return err
	}
	h.sendWin -= int64(len(msg))
	h.calls[id] = &h2Call{start: time.Now()}
	return nil
}

// run makes calls until left runs out, depth at a time: msg gives each call's
// framed request, done sees each answer's latency and RateLimitResponse bytes.
func (h *h2Conn) run(left *atomic.Int64, depth int, msg func() []byte, done func(time.Duration, []byte)) error {
	var waiting []byte // a request the send window cannot take yet
	next := func() error {
		for len(h.calls) < depth {
			m := waiting
			if m == nil {
				if left.Add(-1) < 0 {
					return nil
				}
				m = msg()
			}
			if int64(len(m)) > h.sendWin {
				waiting = m
				return nil
			}
			waiting = nil
			if err := h.send(m); err != nil {
				return err
			}
		}
		return nil
	}
	if err := next(); err != nil {
		return err
	}
	for len(h.calls) > 0 || waiting != nil {
		if h.br.Buffered() == 0 {
			if err := h.bw.Flush(); err != nil {
				return err
			}
		}
		f, err := h.fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("reading a frame: %w", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := h.fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := h.fr.WritePing(true, f.Data); err != nil {
					return err
				}
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				h.sendWin += int64(f.Increment)
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("server sent GOAWAY (%v): %s", f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			return fmt.Errorf("server reset stream %d: %v", f.StreamID, f.ErrCode)
		case *http2.DataFrame:
			c := h.calls[f.StreamID]
			if c == nil {
				return fmt.Errorf("DATA on unknown stream %d", f.StreamID)
			}
			c.body = append(c.body, f.Data()...)
			if f.StreamEnded() {
				return fmt.Errorf("stream %d ended without trailers", f.StreamID)
			}
		case *http2.MetaHeadersFrame:
			c := h.calls[f.StreamID]
			if c == nil {
				return fmt.Errorf("HEADERS on unknown stream %d", f.StreamID)
			}
			if !c.hdrs {
				c.hdrs = true
				if s := f.PseudoValue("status"); s != "200" {
					return fmt.Errorf("stream %d: HTTP status %q", f.StreamID, s)
				}
			}
			if !f.StreamEnded() {
				continue
			}
			if code, m := grpcStatus(f); code != "0" {
				return fmt.Errorf("stream %d: grpc-status %s: %s", f.StreamID, code, m)
			}
			if len(c.body) < 5 || int(binary.BigEndian.Uint32(c.body[1:5])) != len(c.body)-5 {
				return fmt.Errorf("stream %d: %d bytes of body are not one gRPC message", f.StreamID, len(c.body))
			}
			done(time.Since(c.start), c.body[5:])
			delete(h.calls, f.StreamID)
		}
		if err := next(); err != nil {
			return err
		}
	}
	return h.bw.Flush()
}

func grpcStatus(f *http2.MetaHeadersFrame) (code, msg string) {
	code = "(none)"
	for _, hf := range f.RegularFields() {
		switch strings.ToLower(hf.Name) {
		case "grpc-status":
			code = hf.Value
		case "grpc-message":
			msg = hf.Value
		}
	}
	return code, msg
}

// grpcFrame is m in gRPC's length-prefixed framing, uncompressed.
func grpcFrame(m []byte) []byte {
	out := make([]byte, 5, 5+len(m))
	binary.BigEndian.PutUint32(out[1:], uint32(len(m)))
	return append(out, m...)
}

// overallCode reads RateLimitResponse.overall_code (field 1) from its bytes.
func overallCode(b []byte) (pb.RateLimitResponse_Code, error) {
	code := pb.RateLimitResponse_UNKNOWN
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, protowire.ParseError(n)
			}
			code = pb.RateLimitResponse_Code(v)
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return code, nil
}

// TestFramesGenerator holds the benchmarks' frames generator to a real
// server: 60 calls on one key of 10 a minute, 4 in flight on each of two
// connections, give exactly 10 OK and 50 OVER_LIMIT, each read from the
// answer's own bytes, and a refused request fails the run with its status.
func TestFramesGenerator(t *testing.T) {
	cfg, err := rls.Parse([]byte("domain: gen\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"), "gen.yaml", rls.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, setup{cfg: cfg})
	raw, err := proto.Marshal(req("gen", 0, desc("k", "v")))
	if err != nil {
		t.Fatal(err)
	}
	var left atomic.Int64
	left.Store(60)
	var mu sync.Mutex
	codes := map[pb.RateLimitResponse_Code]int{}
	var wg sync.WaitGroup
	for range 2 {
		c, err := dialH2(h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Go(func() {
			err := c.run(&left, 4, func() []byte { return grpcFrame(raw) }, func(d time.Duration, body []byte) {
				code, err := overallCode(body)
				if err != nil || d <= 0 {
					t.Errorf("answer %x after %v: %v", body, d, err)
				}
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if want := map[pb.RateLimitResponse_Code]int{pb.RateLimitResponse_OK: 10, pb.RateLimitResponse_OVER_LIMIT: 50}; !maps.Equal(codes, want) {
		t.Errorf("answers %v, want %v", codes, want)
	}

	bad, err := proto.Marshal(req("", 0, desc("k", "v"))) // empty domain: InvalidArgument
	if err != nil {
		t.Fatal(err)
	}
	c, err := dialH2(h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	left.Store(1)
	err = c.run(&left, 1, func() []byte { return grpcFrame(bad) }, func(time.Duration, []byte) { t.Error("a refused call was answered") })
	if err == nil || !strings.Contains(err.Error(), "grpc-status 3") || !strings.Contains(err.Error(), "domain must not be empty") {
		t.Errorf("refused call: %v, want grpc-status 3 and the server's message", err)
	}
}
