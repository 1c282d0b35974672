package clusterlimit

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/slide-metrics/slide/cluster"
	"github.com/slide-metrics/slide/limiter"
)

// FuzzDecode holds the decoders of hostile bytes to their word: a batch or an answer of the
// peer route, and a checkpoint record (anyone who can write to the checkpoint topic can
// write one), either decodes or is refused with ErrCorrupt; never a panic, never an
// allocation beyond the bounds.
func FuzzDecode(f *testing.F) {
	calls := []*call{
		{it: item{policy: "login", fp: 0xfeedface, key: "tenant-1", now: time.Unix(1_764_489_600, 0).UnixNano(), cost: 1}},
		{it: item{policy: "api", fp: 1, key: "ключ", now: -5, cost: 0}},
	}
	f.Add(appendRequest(nil, calls))
	stream, _ := appendStreamRequest(nil, append(calls, &call{it: item{policy: "login", fp: 0xfeedface, key: "tenant-2", now: time.Unix(1_764_489_600, 0).UnixNano() - 7, cost: 3}}), nil)
	f.Add(stream)
	f.Add(appendAnswer(nil, []result{{status: StatusOK, d: limiter.Decision{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: time.Minute}},
		{status: StatusStale}, {status: StatusOK, d: limiter.Decision{Limit: 3, RetryAfter: time.Second, Delay: 5}}}))
	entries := appendEntry(nil, "login", 7, "tenant-1", 1_764_489_660_000_000_000, []byte{2, 4})
	entries = appendEntry(entries, "api", 8, "tenant-2", 5, nil)
	f.Add(appendCheckpoint(nil, 12, true, 1_764_489_600_000, 2, entries))
	head := appendCheckpointHeader(nil, 12, true, 1_764_489_600_000, 2)
	head[0] = versionHead
	head = binary.AppendUvarint(binary.BigEndian.AppendUint64(head, 99), 1)
	f.Add(append(head, entries...)) // a checkpoint in parts: its record, and its part
	part := binary.AppendUvarint(binary.BigEndian.AppendUint64([]byte{versionPart}, 99), 0)
	f.Add(append(binary.AppendUvarint(part, 2), entries...))
	peek := item{policy: "org", fp: 0xfeedface, key: "org-1/team-a/u1", now: time.Unix(1_764_489_600, 0).UnixNano()}
	f.Add(appendPeekRequest(nil, &peek))
	f.Add(appendPeekAnswer(nil, StatusOK, []peekLevel{{n: 5, d: limiter.Decision{Allowed: true, Limit: 50, Remaining: 41, ResetAfter: time.Hour}},
		{n: 12, d: limiter.Decision{Limit: 30, RetryAfter: time.Second}}, {n: 15, d: limiter.Decision{Allowed: true, Limit: 20, Remaining: 20}}}))
	f.Add(appendPeekAnswer(nil, StatusNotReady, nil))
	f.Add([]byte{version, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeRequest(b)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeRequest: %v, not ErrCorrupt", err)
		}
		if err == nil {
			cs := make([]*call, len(items))
			for i := range items {
				cs[i] = &call{it: items[i]}
			}
			if again := appendRequest(nil, cs); !bytes.Equal(again, b) {
				// Varints have one shortest form; a longer one decodes but re-encodes shorter.
				if back, err := decodeRequest(again); err != nil || len(back) != len(items) {
					t.Fatalf("re-encoded batch does not decode alike: %v", err)
				}
			}
		}
		if items, err := decodeStreamRequest(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeStreamRequest: %v, not ErrCorrupt", err)
		} else if err == nil {
			cs := make([]*call, len(items))
			for i := range items {
				cs[i] = &call{it: items[i]}
			}
			again, _ := appendStreamRequest(nil, cs, nil)
			if back, err := decodeStreamRequest(again); err != nil || !slices.Equal(back, items) {
				t.Fatalf("re-encoded stream batch decodes as %+v, %v; want %+v", back, err, items)
			}
		}
		if it, err := decodePeekRequest(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodePeekRequest: %v, not ErrCorrupt", err)
		} else if err == nil {
			if back, err := decodePeekRequest(appendPeekRequest(nil, &it)); err != nil || back != it {
				t.Fatalf("re-encoded peek decodes as %+v, %v; want %+v", back, err, it)
			}
		}
		if st, levels, err := decodePeekAnswer(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodePeekAnswer: %v, not ErrCorrupt", err)
		} else if err == nil {
			for i, l := range levels {
				if l.d.Remaining > l.d.Limit || l.d.RetryAfter < 0 || l.d.ResetAfter < 0 || i > 0 && l.n <= levels[i-1].n {
					t.Fatalf("decoded an impossible level %+v", l)
				}
			}
			if st2, back, err := decodePeekAnswer(appendPeekAnswer(nil, st, levels)); err != nil || st2 != st || len(back) != len(levels) {
				t.Fatalf("re-encoded peek answer does not decode alike: %v", err)
			}
		}
		if _, i, es, err := decodeCheckpointPart(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeCheckpointPart: %v, not ErrCorrupt", err)
		} else if err == nil && (i < 0 || i >= maxParts || len(es) > len(b)) {
			t.Fatalf("decodeCheckpointPart: index %d, %d entries of %d bytes", i, len(es), len(b))
		}
		if cp, err := decodeCheckpoint(b); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeCheckpoint: %v, not ErrCorrupt", err)
		} else if err == nil {
			var again []byte
			for _, e := range cp.entries {
				again = appendEntry(again, e.policy, e.fp, e.key, e.expires, e.state)
			}
			back, err := decodeCheckpoint(appendCheckpoint(nil, cp.gen, cp.final, cp.at, len(cp.entries), again))
			if err != nil || len(back.entries) != len(cp.entries) || back.final != cp.final || back.gen != cp.gen {
				t.Fatalf("re-encoded checkpoint does not decode alike: %v", err)
			}
		}
		n := 0
		if len(b) > 1 {
			n = int(b[1] & 0x7f)
		}
		res, err := decodeAnswer(b, n)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeAnswer: %v, not ErrCorrupt", err)
		}
		if err == nil {
			for _, r := range res {
				if r.d.Remaining > r.d.Limit || r.d.RetryAfter < 0 || r.d.ResetAfter < 0 || r.d.Delay < 0 {
					t.Fatalf("decoded an impossible decision %+v", r.d)
				}
			}
		}
	})
}

var fuzzKey = []byte("0123456789abcdef0123456789abcdef")

// mustFramer is newFramer for a test: a key of any length derives a framer.
func mustFramer(key []byte, dir byte) framer {
	f, err := newFramer(key, dir)
	if err != nil {
		panic(err)
	}
	return f
}

// frames writes bodies as one direction's frames under key (nil: unsigned).
func frames(key []byte, dir byte, bodies ...[]byte) []byte {
	var out bytes.Buffer
	w := mustFramer(key, dir)
	for _, body := range bodies {
		if _, err := w.frameEnd(&out, append(frameStart(nil), body...)); err != nil {
			panic(err)
		}
	}
	return out.Bytes()
}

// FuzzFrame holds a stream's frame reader to its word: hostile bytes on a stream, signed or
// not, read as frames whose MAC verifies or end in an error; never a panic, never a frame
// beyond the bound. A signed frame verifies only under its key, direction and place.
func FuzzFrame(f *testing.F) {
	req := binary.AppendVarint(binary.AppendUvarint(nil, 7), 1_764_489_600_000)
	req, _ = appendStreamRequest(req, []*call{{it: item{policy: "login", fp: 1, key: "tenant-1", now: 5, cost: 1}}}, nil)
	f.Add(frames(fuzzKey, dirRequest, req, req), true)
	f.Add(frames(nil, dirRequest, req), false)
	// A peek is a POST only: on a stream it is refused as a batch of another version.
	peek := binary.AppendVarint(binary.AppendUvarint(nil, 8), 1_764_489_600_000)
	peek = appendPeekRequest(peek, &item{policy: "org", fp: 1, key: "org-1/team-a/u1", now: 5})
	f.Add(frames(fuzzKey, dirRequest, req, peek), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, false)
	f.Fuzz(func(t *testing.T, b []byte, signed bool) {
		var key []byte
		if signed {
			key = fuzzKey
		}
		r := mustFramer(key, dirRequest)
		in := bufio.NewReader(bytes.NewReader(b))
		var buf []byte
		for {
			body, err := r.read(in, buf)
			if err != nil {
				break
			}
			if len(body) > maxFrameBytes {
				t.Fatalf("a frame of %d bytes, bound %d", len(body), maxFrameBytes)
			}
			if _, n := binary.Uvarint(body); n > 0 {
				if _, m := binary.Varint(body[n:]); m > 0 {
					_, _ = decodeStreamRequest(body[n+m:])
				}
			}
			buf = body
		}
	})
}

func TestFrameMACs(t *testing.T) {
	body := []byte("a batch")
	two := frames(fuzzKey, dirRequest, body, body)
	read := func(key []byte, dir byte, b []byte) (n int, err error) {
		r := mustFramer(key, dir)
		in := bufio.NewReader(bytes.NewReader(b))
		for {
			got, err := r.read(in, nil)
			if err != nil {
				return n, err
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("frame %d read %q", n, got)
			}
			n++
		}
	}
	if n, err := read(fuzzKey, dirRequest, two); n != 2 || !errors.Is(err, io.EOF) {
		t.Fatalf("two signed frames: read %d, %v", n, err)
	}
	one := two[:len(two)/2]
	for name, c := range map[string]struct {
		key []byte
		dir byte
		b   []byte
	}{
		"other key":       {[]byte("fedcba9876543210fedcba9876543210"), dirRequest, one},
		"other direction": {fuzzKey, dirAnswer, one},
		"replayed":        {fuzzKey, dirRequest, append(append([]byte(nil), one...), one...)},
		"flipped":         {fuzzKey, dirRequest, append(append([]byte(nil), one[:6]...), append([]byte{one[6] ^ 1}, one[7:]...)...)},
		"flipped mac":     {fuzzKey, dirRequest, append(append([]byte(nil), one[:len(one)-1]...), one[len(one)-1]^0x80)},
		"reordered":       {fuzzKey, dirRequest, append(append([]byte(nil), two[len(one):]...), one...)},
	} {
		n, err := read(c.key, c.dir, c.b)
		if !errors.Is(err, cluster.ErrBadSignature) || n > 1 || name != "replayed" && n != 0 {
			t.Errorf("%s: read %d frames, then %v; want ErrBadSignature", name, n, err)
		}
	}
}
