package cluster

import (
	"cmp"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Peer authentication (issue #25): the instances of a group prove to each other that they
// hold the group's key, without the key (or the API's bearer token) ever crossing the
// wire. A request is signed over what the receiver acts on and the receiver's identity; an
// answer is signed over its bytes and the request's nonce. Auth knows nothing of the
// partial-read route: it signs and verifies bytes, and the headers below carry the result,
// so any request/answer exchange between peers can use it.

// Headers of a signed peer exchange.
const (
	// HeaderTimestamp is the signer's clock when it signed a request, unix ms.
	HeaderTimestamp = "X-Slide-Timestamp"
	// HeaderNonce is the request's nonce: 16 random bytes, base64url without padding.
	HeaderNonce = "X-Slide-Nonce"
	// HeaderSignature is the HMAC-SHA256 of a request (on the request) or of an answer (on
	// the answer), base64url without padding.
	HeaderSignature = "X-Slide-Signature"
)

const (
	// MinPeerKeyBytes is the shortest shared key Auth accepts: HMAC-SHA256's block of
	// security, 256 bits.
	MinPeerKeyBytes = 32
	// DefaultAuthWindow is how far a signed request's timestamp may lie from the verifier's
	// clock, either way: clocks of one group agree to milliseconds under NTP, and a request
	// lives at most --peer-timeout. A request outside it is refused (stale, or from the
	// future), so the verifier remembers nonces only that long.
	DefaultAuthWindow = 30 * time.Second
	// DefaultMaxNonces bounds the nonces a verifier remembers (about 60 bytes each): at
	// DefaultAuthWindow, 17,000 signed requests a second. Past it, new requests are
	// refused (ErrNonceCacheFull) until old nonces expire: only a key holder can fill it.
	DefaultMaxNonces = 1 << 20
)

// Errors of Auth. A caller counts every one as unauthenticated; they differ for logs.
var (
	ErrPeerKeyShort    = fmt.Errorf("cluster: peer key shorter than %d bytes", MinPeerKeyBytes)
	ErrUnsigned        = errors.New("cluster: peer message not signed")
	ErrBadSignature    = errors.New("cluster: peer signature does not verify")
	ErrStaleTimestamp  = errors.New("cluster: signed timestamp outside the window")
	ErrReplayed        = errors.New("cluster: nonce seen before (a replay)")
	ErrNonceCacheFull  = errors.New("cluster: too many signed requests in the window")
	errUnauthenticated = errors.New("unauthenticated")
)

// keyAdvice ends the errors of a peer that does not share this instance's group key: what
// an operator changes so that the group reads itself again.
const keyAdvice = "every instance of a group needs the same --peer-key-file (or, without one, the same --auth-token-file)"

// refusedErr is the error of peer addr's 401 to a request of this instance, keyed or not
// (signed), with the peer's reason: a peer with no key never refuses, so the peer holds a
// key and this instance none, or another one (or its clock is off by more than the window).
func refusedErr(addr string, signed bool, reason string) error {
	if !signed {
		return fmt.Errorf("%w: peer %s refuses unsigned requests: it holds a group key and this instance has none; %s", errUnauthenticated, addr, keyAdvice)
	}
	if reason != "" {
		reason = " (" + reason + ")"
	}
	return fmt.Errorf("%w: peer %s refused this instance's signature%s: it holds another group key, or its clock is more than %v off; %s", errUnauthenticated, addr, reason, DefaultAuthWindow, keyAdvice)
}

// unprovenErr is the error of an answer (what) of peer addr that does not verify with this
// instance's key: an unsigned one comes from a peer with no group key.
func unprovenErr(what, addr string, err error) error {
	if errors.Is(err, ErrUnsigned) {
		return fmt.Errorf("%w: %s of %s is not signed: %s has no group key and this instance has one (%w); %s", errUnauthenticated, what, addr, addr, err, keyAdvice)
	}
	return fmt.Errorf("%w: %s of %s does not prove itself: %w", errUnauthenticated, what, addr, err)
}

// Nonce makes one signed request unique; its answer is signed together with it.
type Nonce [16]byte

// Stamp is what a signed request carries besides itself: when it was signed, its nonce,
// and the MAC.
type Stamp struct {
	At    int64 // unix ms, the signer's clock
	Nonce Nonce
	MAC   [sha256.Size]byte
}

// Message is what a request's signature covers. To is the receiver's identity, its
// advertised host:port (the signer's dial address, the verifier's own Config.Advertise),
// so a request captured on its way to one peer is refused by every other. Body is hashed
// (nil for a GET).
type Message struct {
	Method, To, Path, Query string
	Body                    []byte
}

// AuthConfig configures an Auth. Key is required; every other zero field takes the
// default documented on it.
type AuthConfig struct {
	// Key is the group's shared key, at least MinPeerKeyBytes (--peer-key-file, or
	// KeyFromToken of --auth-token-file).
	Key []byte
	// Window is how far a request's timestamp may lie from this clock; default
	// DefaultAuthWindow.
	Window time.Duration
	// MaxNonces bounds the nonces remembered against replays; default DefaultMaxNonces.
	MaxNonces int
	// Now is the clock, unix ms; nil is the wall clock.
	Now func() int64
}

// Validate reports a config NewAuth would refuse.
func (c AuthConfig) Validate() error {
	switch {
	case len(c.Key) < MinPeerKeyBytes:
		return fmt.Errorf("%w (%d bytes)", ErrPeerKeyShort, len(c.Key))
	case c.Window < 0 || c.MaxNonces < 0:
		return errors.New("cluster: negative auth window or max nonces")
	}
	return nil
}

// Auth signs and verifies the messages of one group's peers with HMAC-SHA256 over a shared
// key. A request's MAC covers a domain label, the method, the receiver (Message.To), the
// path, the raw query, the body's SHA-256, the timestamp and the nonce, each length
// prefixed; the verifier checks it in constant time, then the timestamp against its
// window, then that the nonce is new (nonces are remembered only once a MAC verified, so
// strangers cannot fill the cache). An answer's MAC covers another label, the request's
// nonce and the answer's bytes, so an answer forged without the key, or replayed from an
// earlier request, does not verify. It is safe for concurrent use.
type Auth struct {
	key       []byte
	window    int64 // ms
	maxNonces int
	now       func() int64
	macs      sync.Pool // *macState: HMAC-SHA256 under key

	mu        sync.Mutex
	seen      map[Nonce]int64 // nonce → when it stops mattering (its timestamp + window), unix ms
	pruneAt   int             // len(seen) at which expired nonces are swept
	lastPrune int64
}

// NewAuth returns an Auth for cfg, or cfg's error.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Window = cmp.Or(cfg.Window, DefaultAuthWindow)
	cfg.MaxNonces = cmp.Or(cfg.MaxNonces, DefaultMaxNonces)
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixMilli() }
	}
	key := append([]byte(nil), cfg.Key...)
	a := &Auth{key: key, window: cfg.Window.Milliseconds(), maxNonces: cfg.MaxNonces, now: cfg.Now,
		seen: map[Nonce]int64{}, pruneAt: 1024}
	a.macs.New = func() any { return &macState{h: hmac.New(sha256.New, key), buf: make([]byte, 0, 256)} }
	return a, nil
}

// KeyFromToken derives the group's peer key from the API's bearer token (HKDF-SHA256 with
// a fixed label), for a group configured with --auth-token-file alone: every instance
// sharing the token derives the same key, and neither the token nor the key is sent.
func KeyFromToken(token string) []byte {
	k, _ := hkdf.Key(sha256.New, []byte(token), nil, "slide peer key v1", 32) // fails only beyond 255 × 32 bytes
	return k
}

// Domain labels: a request's MAC can never verify as an answer's, nor the reverse.
const (
	labelRequest = "slide peer request v1"
	labelAnswer  = "slide peer answer v1"
)

// macState is one HMAC-SHA256 under the key and a scratch buffer, pooled: a MAC's fields
// are laid out in the buffer and hashed in one Write, so signing allocates nothing.
type macState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// macOf is the MAC of the fields written by fields into the scratch buffer, then of tail
// (an answer's bytes, hashed in place rather than copied): the form of the MACs made for
// every peer request and answer.
func (a *Auth) macOf(fields func(b []byte) []byte, tail []byte) (out [sha256.Size]byte) {
	st := a.macs.Get().(*macState)
	st.h.Reset()
	st.buf = fields(st.buf[:0])
	st.h.Write(st.buf)
	st.h.Write(tail)
	copy(out[:], st.h.Sum(st.sum[:0]))
	if cap(st.buf) <= 4096 {
		a.macs.Put(st)
	}
	return out
}

// mac is the MAC of what fn writes to the hash with writeField: the general form, for MACs
// made once in a while (a key derived per connection). It hashes what macOf hashes for the
// same fields.
func (a *Auth) mac(fn func(h hash.Hash)) (out [sha256.Size]byte) {
	st := a.macs.Get().(*macState)
	st.h.Reset()
	fn(st.h)
	copy(out[:], st.h.Sum(st.sum[:0]))
	a.macs.Put(st)
	return out
}

// writeField writes b to h length-prefixed, as appendField lays it out.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// appendField appends s length-prefixed, so that no two messages encode alike.
func appendField[S string | []byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (a *Auth) requestMAC(m *Message, at int64, n *Nonce) [sha256.Size]byte {
	body := sha256.Sum256(m.Body)
	return a.macOf(func(b []byte) []byte {
		b = appendField(b, labelRequest)
		b = appendField(b, m.Method)
		b = appendField(b, m.To)
		b = appendField(b, m.Path)
		b = appendField(b, m.Query)
		b = appendField(b, body[:])
		var ts [8]byte
		binary.BigEndian.PutUint64(ts[:], uint64(at))
		b = appendField(b, ts[:])
		return appendField(b, n[:])
	}, nil)
}

// SignRequest signs m with a fresh nonce at this clock.
func (a *Auth) SignRequest(m Message) Stamp {
	s := Stamp{At: a.now()}
	_, _ = rand.Read(s.Nonce[:]) // crypto/rand.Read never fails (Go 1.24)
	s.MAC = a.requestMAC(&m, s.At, &s.Nonce)
	return s
}

// VerifyRequest checks s against m: the MAC (ErrBadSignature), the timestamp within the
// window of this clock (ErrStaleTimestamp), and that the nonce was not seen in the window
// (ErrReplayed), which it then remembers.
func (a *Auth) VerifyRequest(m Message, s Stamp) error {
	want := a.requestMAC(&m, s.At, &s.Nonce)
	if !hmac.Equal(want[:], s.MAC[:]) {
		return ErrBadSignature
	}
	now := a.now()
	if s.At < now-a.window || s.At > now+a.window {
		return fmt.Errorf("%w: signed at %d, %d ms from this clock (window %d ms)", ErrStaleTimestamp, s.At, s.At-now, a.window)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) >= a.pruneAt || now-a.lastPrune > 2*a.window {
		a.prune(now)
	}
	if _, ok := a.seen[s.Nonce]; ok {
		return ErrReplayed
	}
	if len(a.seen) >= a.maxNonces {
		return ErrNonceCacheFull
	}
	a.seen[s.Nonce] = s.At + a.window // after that the timestamp alone refuses it
	return nil
}

// prune drops the nonces whose timestamp has left the window; a.mu is held. The next sweep
// waits until the map has doubled, so sweeps cost O(1) per request amortized.
func (a *Auth) prune(now int64) {
	for n, until := range a.seen {
		if until < now {
			delete(a.seen, n)
		}
	}
	a.pruneAt = max(2*len(a.seen), 1024)
	a.lastPrune = now
}

func (a *Auth) answerMAC(n *Nonce, body []byte) [sha256.Size]byte {
	return a.macOf(func(b []byte) []byte {
		b = appendField(b, labelAnswer)
		b = appendField(b, n[:])
		return binary.AppendUvarint(b, uint64(len(body))) // body's own field: its prefix here, its bytes hashed in place
	}, body)
}

// SignAnswer is the MAC of an answer body to the request of nonce n.
func (a *Auth) SignAnswer(n Nonce, body []byte) [sha256.Size]byte { return a.answerMAC(&n, body) }

// VerifyAnswer checks mac against an answer body to the request of nonce n
// (ErrBadSignature).
func (a *Auth) VerifyAnswer(n Nonce, body []byte, mac [sha256.Size]byte) error {
	want := a.answerMAC(&n, body)
	if !hmac.Equal(want[:], mac[:]) {
		return ErrBadSignature
	}
	return nil
}

var b64 = base64.RawURLEncoding

// SetHeader puts s on a request's headers.
func (s *Stamp) SetHeader(h http.Header) {
	h.Set(HeaderTimestamp, strconv.FormatInt(s.At, 10))
	h.Set(HeaderNonce, b64.EncodeToString(s.Nonce[:]))
	h.Set(HeaderSignature, b64.EncodeToString(s.MAC[:]))
}

// StampOf reads a request's stamp from its headers (ErrUnsigned when any part is missing
// or malformed).
func StampOf(h http.Header) (Stamp, error) {
	var s Stamp
	at, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return s, fmt.Errorf("%w: %s", ErrUnsigned, HeaderTimestamp)
	}
	s.At = at
	if !decodeFixed(s.Nonce[:], h.Get(HeaderNonce)) {
		return s, fmt.Errorf("%w: %s", ErrUnsigned, HeaderNonce)
	}
	if !decodeFixed(s.MAC[:], h.Get(HeaderSignature)) {
		return s, fmt.Errorf("%w: %s", ErrUnsigned, HeaderSignature)
	}
	return s, nil
}

// SetAnswerHeader puts an answer's MAC on its headers.
func SetAnswerHeader(h http.Header, mac [sha256.Size]byte) {
	h.Set(HeaderSignature, b64.EncodeToString(mac[:]))
}

// AnswerMACOf reads an answer's MAC from its headers (ErrUnsigned when missing or
// malformed).
func AnswerMACOf(h http.Header) ([sha256.Size]byte, error) {
	var mac [sha256.Size]byte
	if !decodeFixed(mac[:], h.Get(HeaderSignature)) {
		return mac, fmt.Errorf("%w: answer without %s", ErrUnsigned, HeaderSignature)
	}
	return mac, nil
}

// decodeFixed decodes base64url s into dst, which it must fill exactly.
func decodeFixed(dst []byte, s string) bool {
	if len(s) != b64.EncodedLen(len(dst)) {
		return false
	}
	n, err := b64.Decode(dst, []byte(s))
	return err == nil && n == len(dst)
}
