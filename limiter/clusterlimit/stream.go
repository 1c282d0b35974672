package clusterlimit

import (
	"bufio"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/slide-metrics/slide/cluster"
)

// The stream: batches and their answers as frames over one peer connection per owner
// (cluster's peer stream, upgraded from a signed POST to Path). A frame is
//
//	length(4 bytes, big endian: of what follows) body mac(macBytes, signed streams only)
//	request body: id(uvarint) deadline(varint, unix ms; 0: none) batch (versionStream's
//	              form, codec.go: each policy named once a batch)
//	answer body:  id(uvarint) code(1 byte) then, for codeOK, the POST's answer, for
//	              codeBad, why (text); for codeLate nothing
//
// mac is the GMAC (AES-256-GCM sealing no plaintext, the body as additional data) of the
// body under the direction's key, derived from the stream's key (cluster.Auth.StreamKey)
// with HKDF-SHA256 and the direction, with the nonce direction(1 byte) 0(3 bytes)
// sequence(8 bytes, big endian; each direction counts its frames from 0): a frame forged,
// replayed, reordered or sent the other way does not verify, and the connection is
// closed. (Protocol slide-stream/1 sent the first 16 bytes of an HMAC-SHA256 of the same
// direction, sequence and body; GMAC binds the same and costs a fifth of its CPU on a
// frame of 120 decisions. A sequence never repeats under a key: each stream derives its
// own, and each direction its own from it.) The owner answers a stream's frames in order
// (the answers of frames already buffered leave in one write); ids only let the caller
// check which batch an answer is of.

const (
	macBytes      = 16
	maxFrameBytes = maxRequestBytes + 32 + macBytes
	dirRequest    = 'q'
	dirAnswer     = 'a'
)

// maxHeldAnswers bounds the answers an owner holds to write together, while whole frames
// wait in its buffer.
const maxHeldAnswers = 4

// Answer codes of a stream frame.
const (
	codeOK   byte = iota // decided: the answer follows
	codeLate             // the batch arrived past its deadline: nothing decided (the POST's 504)
	codeBad              // the batch does not decode (the POST's 400)
)

var errStreamCorrupt = fmt.Errorf("%w: stream frame", ErrCorrupt)

// framer signs (or checks) one direction's frames of a stream.
type framer struct {
	mac   cipher.AEAD // nil: the stream is unsigned
	seq   uint64
	nonce [12]byte // direction, 0, 0, 0, sequence
	sum   [macBytes]byte
}

// frameLabel is the HKDF info of a direction's frame key: the protocol and the direction.
const frameLabel = "slide-stream/2 frame mac "

// newFramer is the framer of direction dir of the stream whose key is key (nil: unsigned).
func newFramer(key []byte, dir byte) (framer, error) {
	f := framer{}
	f.nonce[0] = dir
	if key == nil {
		return f, nil
	}
	k, err := hkdf.Key(sha256.New, key, nil, frameLabel+string(dir), 32)
	if err != nil {
		return f, fmt.Errorf("clusterlimit: deriving a stream's frame key: %w", err)
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return f, fmt.Errorf("clusterlimit: a stream's frame key: %w", err)
	}
	if f.mac, err = cipher.NewGCM(block); err != nil {
		return f, fmt.Errorf("clusterlimit: a stream's frame MAC: %w", err)
	}
	return f, nil
}

// next returns the MAC of the direction's next frame, body.
func (f *framer) next(body []byte) []byte {
	binary.BigEndian.PutUint64(f.nonce[4:], f.seq)
	f.seq++
	return f.mac.Seal(f.sum[:0], f.nonce[:], nil, body)
}

// frameStart starts a frame in buf: room for its length.
func frameStart(buf []byte) []byte { return append(buf[:0], 0, 0, 0, 0) }

// seal ends the frame that starts at buf[at:] (room for its length, then its body): its
// MAC, then its length.
func (f *framer) seal(buf []byte, at int) []byte {
	if f.mac != nil {
		buf = append(buf, f.next(buf[at+4:])...)
	}
	binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
	return buf
}

// frameEnd seals the frame built in buf since frameStart and writes it whole.
func (f *framer) frameEnd(w io.Writer, buf []byte) ([]byte, error) {
	buf = f.seal(buf, 0)
	_, err := w.Write(buf)
	return buf, err
}

// whole reports whether a whole frame waits in r's buffer: reading it will not block.
func whole(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 4 {
		return false
	}
	h, err := r.Peek(4)
	return err == nil && n-4 >= int(binary.BigEndian.Uint32(h))
}

// read reads the next frame into buf and returns its body once its MAC verifies.
func (f *framer) read(r *bufio.Reader, buf []byte) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(n[:]))
	least := 1
	if f.mac != nil {
		least += macBytes
	}
	if size < least || size > maxFrameBytes {
		return nil, fmt.Errorf("%w: %d bytes", errStreamCorrupt, size)
	}
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	if f.mac == nil {
		return buf, nil
	}
	body, mac := buf[:size-macBytes], buf[size-macBytes:]
	if !hmac.Equal(f.next(body), mac) { // constant time, as GCM's Open would compare
		return nil, fmt.Errorf("%w: %w", cluster.ErrBadSignature, errStreamCorrupt)
	}
	return body, nil
}

// stream is a caller's connection to one owner: batches go out as frames (send), a reader
// goroutine hands each answer to its batch's calls.
type stream struct {
	p *peer
	s *cluster.Stream

	wmu  sync.Mutex
	w    framer
	wbuf []byte
	tbl  []policyRef // a batch's policy table (appendStreamRequest)

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*flight
	err     error // set once the connection failed: every later send fails alike
}

// flight is a batch sent and not yet answered; its timer ends its calls' waits at their
// deadlines (expire).
type flight struct {
	calls []*call
	timer *time.Timer
	sent  time.Time
}

// observe counts the batch's exchange (slide_cluster_peer_requests_total{op="limit"}).
func (f *flight) observe(p *peer, err error) { p.b.g.ObservePeer("limit", err, time.Since(f.sent)) }

func newStream(p *peer, s *cluster.Stream) (*stream, error) {
	w, err := newFramer(s.Key, dirRequest)
	if err != nil {
		return nil, err
	}
	r, err := newFramer(s.Key, dirAnswer)
	if err != nil {
		return nil, err
	}
	st := &stream{p: p, s: s, w: w, pending: map[uint64]*flight{}}
	go st.read(r)
	return st, nil
}

// send writes live as one frame; each of its calls is finished by the answer, or by the
// stream's failure.
func (st *stream) send(live []*call, deadline, sent time.Time) {
	st.mu.Lock()
	if err := st.err; err != nil {
		st.mu.Unlock()
		failAll(live, err)
		st.p.done()
		return
	}
	id := st.next
	st.next++
	f := &flight{calls: live, sent: sent}
	st.pending[id] = f
	earliest := live[0].deadline
	for _, c := range live[1:] {
		earliest = min(earliest, c.deadline)
	}
	f.timer = time.AfterFunc(time.Duration(earliest-monoNow()), func() { st.expire(id, f) })
	st.mu.Unlock()

	st.p.b.sent.Add(1) // before the write: its answer may be read, and its callers return, before the write returns
	st.wmu.Lock()
	_ = st.s.Conn.SetWriteDeadline(deadline) // a write stuck past it fails the stream
	b := frameStart(st.wbuf)
	b = binary.AppendUvarint(b, id)
	b = binary.AppendVarint(b, deadline.UnixMilli())
	b, st.tbl = appendStreamRequest(b, live, st.tbl)
	b, err := st.w.frameEnd(st.s.Conn, b)
	if cap(b) <= 1<<20 {
		st.wbuf = b
	}
	st.wmu.Unlock()
	if err != nil {
		st.fail(fmt.Errorf("clusterlimit: owner %s: %w", st.p.addr, err))
	}
}

// expire ends the wait of the calls of batch id past their deadline (their callers decide
// by on_backend_error) and sets the batch's timer for the next; once none waits, the batch
// is abandoned and its slot freed. The stream stays: an owner that wakes up (SIGCONT)
// answers the batch late, deciding nothing, and the answer is dropped; closing the stream
// instead would fail the later batches on it before their own deadlines, while the owner
// may still decide them.
func (st *stream) expire(id uint64, f *flight) {
	now := monoNow()
	var next int64
	for _, c := range f.calls {
		switch {
		case !c.waiting():
		case c.deadline <= now:
			c.complete(nil, errDeadline)
		case next == 0 || c.deadline < next:
			next = c.deadline
		}
	}
	st.mu.Lock()
	still := st.pending[id] == f
	switch {
	case still && next != 0:
		f.timer.Reset(time.Duration(next - now))
	case still:
		delete(st.pending, id)
	}
	st.mu.Unlock()
	if still && next == 0 {
		f.observe(st.p, errDeadline)
		st.p.done()
	}
}

// fail closes the stream and fails every batch in flight on it with err.
func (st *stream) fail(err error) {
	st.mu.Lock()
	if st.err == nil {
		st.err = err
		_ = st.s.Conn.Close()
	}
	pending := st.pending
	st.pending = map[uint64]*flight{}
	st.mu.Unlock()
	st.p.mu.Lock()
	if st.p.st == st {
		st.p.st = nil
	}
	st.p.mu.Unlock()
	for _, f := range pending {
		f.timer.Stop()
		failAll(f.calls, st.err)
		f.observe(st.p, st.err)
		st.p.done()
	}
}

func failAll(calls []*call, err error) {
	for _, c := range calls {
		c.complete(nil, err)
	}
}

// read hands every answer to its batch, until the connection fails.
func (st *stream) read(r framer) {
	var buf []byte
	var res []result
	for {
		body, err := r.read(st.s.R, buf)
		if err != nil {
			st.fail(fmt.Errorf("clusterlimit: owner %s: %w", st.p.addr, err))
			return
		}
		buf = body
		id, n := binary.Uvarint(body)
		if n <= 0 || len(body) == n {
			st.fail(fmt.Errorf("clusterlimit: owner %s: %w", st.p.addr, errStreamCorrupt))
			return
		}
		code, rest := body[n], body[n+1:]
		st.mu.Lock()
		f := st.pending[id]
		delete(st.pending, id)
		sent := id < st.next
		st.mu.Unlock()
		if f == nil {
			if sent {
				continue // abandoned at its deadline
			}
			st.fail(fmt.Errorf("clusterlimit: owner %s: %w: an answer to no batch", st.p.addr, errStreamCorrupt))
			return
		}
		f.timer.Stop()
		switch code {
		case codeOK:
			res = slices.Grow(res[:0], len(f.calls))[:len(f.calls)]
			err = decodeAnswerTo(rest, len(res), func(i int) *result { return &res[i] })
		case codeLate:
			err = errors.New("the batch reached the owner past its deadline")
		case codeBad:
			err = fmt.Errorf("the owner refused the batch: %.200s", rest)
		default:
			err = errStreamCorrupt
		}
		f.observe(st.p, err)
		if err != nil {
			failAll(f.calls, fmt.Errorf("clusterlimit: owner %s: %w", st.p.addr, err))
			st.p.done()
			continue
		}
		// The slot is freed once the callers took their answers (peer.hold): those that
		// decide again at once join the next batch.
		at := time.Now() // the callers' latency ends here: one clock read a frame
		st.p.hold(len(f.calls))
		given := 0
		for i, c := range f.calls {
			if c.answer(&res[i], at, true) {
				given++
			}
		}
		st.p.taken(len(f.calls) - given) // those already taken (their deadline) or given up
	}
}

// serveStream decides the batches of a peer's stream in order, until it closes or sends
// what does not verify.
func (b *Backend) serveStream(s *cluster.Stream) {
	defer s.Conn.Close()
	r, err := newFramer(s.Key, dirRequest)
	w, werr := newFramer(s.Key, dirAnswer)
	if err = errors.Join(err, werr); err != nil {
		b.log.Warn("clusterlimit: a peer's stream refused", "err", err)
		return
	}
	var rbuf, out []byte // out: answers not yet written, held of them
	held := 0
	var items []item
	var tbl []policyRef
	var res []result
	var last *owned // the policy of the last item: a batch's items are mostly of one
	intern := func(name []byte) string {
		if last != nil && string(name) == last.p.Name {
			return last.p.Name
		}
		if o := b.owned[string(name)]; o != nil {
			last = o
			return o.p.Name
		}
		return string(name)
	}
	for {
		body, err := r.read(s.R, rbuf)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				b.warnf(slog.LevelWarn, "clusterlimit: a peer's stream failed", "err", err)
			}
			return
		}
		rbuf = body
		start := time.Now()
		id, n := binary.Uvarint(body)
		if n <= 0 {
			return
		}
		dl, m := binary.Varint(body[n:])
		if m <= 0 {
			return
		}
		n += m
		if b.hold != nil {
			b.hold()
			start = time.Now()
		}
		at := len(out)
		out = binary.AppendUvarint(append(out, 0, 0, 0, 0), id)
		code := http.StatusOK
		if dl != 0 && start.UnixMilli() >= dl {
			// As the POST's deadline (see serve): a batch in the deadline's millisecond is late.
			out, code = append(out, codeLate), http.StatusGatewayTimeout
		} else if items, tbl, err = decodeStreamRequestInto(items[:0], tbl, body[n:], intern, true); err != nil {
			out, code = append(append(out, codeBad), err.Error()...), http.StatusBadRequest
		} else {
			res = b.decideBatch(items, res[:0])
			out = appendAnswer(append(out, codeOK), res)
		}
		out = w.seal(out, at)
		// The keys were views of rbuf, which the next frame overwrites: the store copied
		// the new ones, and nothing else keeps them (the answers hold only their levels'
		// lengths).
		clear(items)
		clear(res)
		if held++; !whole(s.R) || held >= maxHeldAnswers || len(out) > 64<<10 {
			// Nothing more to answer at once (or enough held): the answers so far leave
			// in one write.
			held = 0
			_ = s.Conn.SetWriteDeadline(start.Add(10 * time.Second))
			if _, err := s.Conn.Write(out); err != nil {
				return
			}
			if out = out[:0]; cap(out) > 1<<20 {
				out = nil
			}
		}
		b.g.Served(code, time.Since(start))
	}
}

// serveUpgrade takes a peer's stream over and serves it until it ends. It counts the
// upgrade (slide_cluster_peer_served_total, by its code) and serveStream each batch, never
// the stream's whole life as one request.
func (b *Backend) serveUpgrade(w http.ResponseWriter, r *http.Request, start time.Time) {
	s, err := b.g.AcceptStream(w, r)
	switch {
	case errors.Is(err, cluster.ErrStreamLost):
		b.g.Served(http.StatusSwitchingProtocols, time.Since(start))
		return
	case err != nil:
		b.g.Served(plain(w, http.StatusUnauthorized, "peer stream not accepted: "+err.Error()), time.Since(start))
		return
	}
	b.g.Served(http.StatusSwitchingProtocols, time.Since(start))
	b.serveStream(s)
}

// stream returns the peer's stream, dialing it (by deadline) when there is none. ErrNoStream:
// the owner does not serve streams (an older version), use POSTs.
func (p *peer) stream(deadline time.Time) (*stream, error) {
	p.mu.Lock()
	st, post := p.st, time.Now().Before(p.postUntil)
	p.mu.Unlock()
	switch {
	case st != nil:
		return st, nil
	case post:
		return nil, cluster.ErrNoStream
	}
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	p.mu.Lock()
	st = p.st
	p.mu.Unlock()
	if st != nil {
		return st, nil
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s, err := p.b.g.DialStream(ctx, p.addr, Path)
	if err != nil {
		if errors.Is(err, cluster.ErrNoStream) {
			p.mu.Lock()
			p.postUntil = time.Now().Add(time.Minute) // ask again later: it may be upgraded
			p.mu.Unlock()
		}
		return nil, err
	}
	if st, err = newStream(p, s); err != nil {
		// No frame MAC here (GCM with counter nonces is refused under GODEBUG=fips140=only):
		// batches go as POSTs, signed with HMAC-SHA256, as to an owner without streams.
		_ = s.Conn.Close()
		p.mu.Lock()
		p.postUntil = time.Now().Add(time.Minute)
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", cluster.ErrNoStream, err)
	}
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
	return st, nil
}
