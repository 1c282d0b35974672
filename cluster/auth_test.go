package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"net/http"
	"strings"
	"testing"
	"time"
)

var (
	testKey  = bytes.Repeat([]byte("k"), MinPeerKeyBytes)
	otherKey = bytes.Repeat([]byte("K"), MinPeerKeyBytes)
)

// newTestAuth is an Auth over key with a clock the test moves.
func newTestAuth(t *testing.T, key []byte, clock *int64) *Auth {
	t.Helper()
	a, err := NewAuth(AuthConfig{Key: key, Now: func() int64 { return *clock }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var testMsg = Message{Method: "GET", To: "10.0.0.2:8080", Path: PeerPath, Query: "op=merge&metric=m&key=k&window=60000&now=1&parts=2"}

// A request signed with the group's key verifies once; anything changed in what it covers,
// a stale or future timestamp, a second use of its nonce, or another key is refused.
func TestAuthRequest(t *testing.T) {
	clock := t0
	signer, verifier := newTestAuth(t, testKey, &clock), newTestAuth(t, testKey, &clock)
	s := signer.SignRequest(testMsg)
	if err := verifier.VerifyRequest(testMsg, s); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	if err := verifier.VerifyRequest(testMsg, s); !errors.Is(err, ErrReplayed) {
		t.Errorf("the same request again: %v, want ErrReplayed", err)
	}
	tampered := map[string]func(m *Message, s *Stamp){
		"query":     func(m *Message, _ *Stamp) { m.Query += "&now=9223372036854775807" },
		"parts":     func(m *Message, _ *Stamp) { m.Query = "op=merge&metric=m&key=k&window=60000&now=1&parts=0" },
		"method":    func(m *Message, _ *Stamp) { m.Method = "POST" },
		"path":      func(m *Message, _ *Stamp) { m.Path = "/v1/events" },
		"addressee": func(m *Message, _ *Stamp) { m.To = "10.0.0.3:8080" },
		"body":      func(m *Message, _ *Stamp) { m.Body = []byte("x") },
		"timestamp": func(_ *Message, s *Stamp) { s.At++ },
		"nonce":     func(_ *Message, s *Stamp) { s.Nonce[0] ^= 1 },
		"mac":       func(_ *Message, s *Stamp) { s.MAC[31] ^= 1 },
	}
	for name, change := range tampered {
		m, st := testMsg, signer.SignRequest(testMsg)
		change(&m, &st)
		if err := verifier.VerifyRequest(m, st); !errors.Is(err, ErrBadSignature) {
			t.Errorf("tampered %s: %v, want ErrBadSignature", name, err)
		}
	}
	if err := verifier.VerifyRequest(testMsg, newTestAuth(t, otherKey, &clock).SignRequest(testMsg)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another key: %v, want ErrBadSignature", err)
	}
	for _, d := range []time.Duration{-DefaultAuthWindow - time.Millisecond, DefaultAuthWindow + time.Millisecond} {
		signed := t0 + d.Milliseconds()
		old := clock
		clock = signed
		st := signer.SignRequest(testMsg)
		clock = old
		if err := verifier.VerifyRequest(testMsg, st); !errors.Is(err, ErrStaleTimestamp) {
			t.Errorf("signed %v from the verifier's clock: %v, want ErrStaleTimestamp", d, err)
		}
	}
	// At the window's edges, a fresh request is still good.
	for _, d := range []time.Duration{-DefaultAuthWindow, DefaultAuthWindow} {
		clock = t0 + d.Milliseconds()
		st := signer.SignRequest(testMsg)
		clock = t0
		if err := verifier.VerifyRequest(testMsg, st); err != nil {
			t.Errorf("signed %v from the verifier's clock: %v", d, err)
		}
	}
	// Once the window has passed, the first request's nonce may be forgotten: its
	// timestamp refuses it.
	clock = t0 + 2*DefaultAuthWindow.Milliseconds()
	for range 2000 { // past the first sweep
		if err := verifier.VerifyRequest(testMsg, signer.SignRequest(testMsg)); err != nil {
			t.Fatal(err)
		}
	}
	if err := verifier.VerifyRequest(testMsg, s); !errors.Is(err, ErrStaleTimestamp) {
		t.Errorf("the first request, a window later: %v, want ErrStaleTimestamp", err)
	}
	for _, until := range verifier.seen {
		if until < clock {
			t.Fatalf("a nonce expired at %d is still remembered at %d (%d in all): not swept", until, clock, len(verifier.seen))
		}
	}
}

// An answer verifies only with the nonce of the request it answers, its exact bytes and
// the group's key.
func TestAuthAnswer(t *testing.T) {
	clock := t0
	a := newTestAuth(t, testKey, &clock)
	s1, s2 := a.SignRequest(testMsg), a.SignRequest(testMsg)
	body := []byte{0, 1, 2, 3}
	mac := a.SignAnswer(s1.Nonce, body)
	if err := a.VerifyAnswer(s1.Nonce, body, mac); err != nil {
		t.Fatalf("a good answer: %v", err)
	}
	if err := a.VerifyAnswer(s1.Nonce, []byte{0, 1, 2, 4}, mac); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a tampered answer: %v", err)
	}
	if err := a.VerifyAnswer(s2.Nonce, body, mac); !errors.Is(err, ErrBadSignature) {
		t.Errorf("an answer replayed to another request: %v", err)
	}
	if err := a.VerifyAnswer(s1.Nonce, body, newTestAuth(t, otherKey, &clock).SignAnswer(s1.Nonce, body)); !errors.Is(err, ErrBadSignature) {
		t.Errorf("an answer signed with another key: %v", err)
	}
	// A request's MAC is never an answer's: the labels differ.
	if err := a.VerifyAnswer(s1.Nonce, nil, s1.MAC); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a request's MAC as an answer's: %v", err)
	}
}

// Stamps travel in headers; a missing or malformed part is ErrUnsigned, not a panic.
func TestStampHeaders(t *testing.T) {
	clock := t0
	a := newTestAuth(t, testKey, &clock)
	s := a.SignRequest(testMsg)
	h := http.Header{}
	s.SetHeader(h)
	got, err := StampOf(h)
	if err != nil || got != s {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, s)
	}
	for _, name := range []string{HeaderTimestamp, HeaderNonce, HeaderSignature} {
		for _, v := range []string{"", "x", "AAAA", h.Get(name) + "A", "-1e9"} {
			bad := h.Clone()
			bad.Set(name, v)
			if _, err := StampOf(bad); !errors.Is(err, ErrUnsigned) {
				t.Errorf("%s %q: %v, want ErrUnsigned", name, v, err)
			}
		}
	}
	if _, err := AnswerMACOf(http.Header{}); !errors.Is(err, ErrUnsigned) {
		t.Errorf("an answer without a MAC: %v", err)
	}
}

func TestAuthConfig(t *testing.T) {
	if _, err := NewAuth(AuthConfig{Key: testKey[:MinPeerKeyBytes-1]}); !errors.Is(err, ErrPeerKeyShort) {
		t.Errorf("a 31-byte key: %v, want ErrPeerKeyShort", err)
	}
	cfg := Config{Store: newStore(t), Brokers: []string{"127.0.0.1:1"}, Advertise: "127.0.0.1:1", Local: func() []int32 { return nil }, PeerKey: []byte("short")}
	if _, err := New(cfg); !errors.Is(err, ErrPeerKeyShort) {
		t.Errorf("Config with a short peer key: %v, want ErrPeerKeyShort", err)
	}
	k1, k2 := KeyFromToken("token-a"), KeyFromToken("token-a")
	if !bytes.Equal(k1, k2) || len(k1) != 32 || bytes.Equal(k1, KeyFromToken("token-b")) || bytes.Contains(k1, []byte("token-a")) {
		t.Errorf("KeyFromToken: %x %x", k1, KeyFromToken("token-b"))
	}
	clock := t0
	a, err := NewAuth(AuthConfig{Key: testKey, MaxNonces: 3, Now: func() int64 { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		err := a.VerifyRequest(testMsg, a.SignRequest(testMsg))
		if (i < 3) != (err == nil) || (i == 3 && !errors.Is(err, ErrNonceCacheFull)) {
			t.Errorf("request %d with 3 nonces at most: %v", i, err)
		}
	}
}

// The MACs' layout is the wire format between instances of different versions (a rolling
// upgrade): the label, then each field length-prefixed (a uvarint), hashed with
// HMAC-SHA256 under the key. Computed here independently of Auth.
func TestAuthMACLayout(t *testing.T) {
	key := []byte(strings.Repeat("k", MinPeerKeyBytes))
	a, err := NewAuth(AuthConfig{Key: key, Now: func() int64 { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	mac := func(fields ...[]byte) (out [sha256.Size]byte) {
		h := hmac.New(sha256.New, key)
		for _, f := range fields {
			h.Write(binary.AppendUvarint(nil, uint64(len(f))))
			h.Write(f)
		}
		h.Sum(out[:0])
		return out
	}
	n := Nonce{1, 2, 3}
	body := []byte(strings.Repeat("b", 300)) // a two-byte length prefix
	m := Message{Method: "POST", To: "10.0.0.2:8081", Path: PeerPath, Query: "op=merge&key=k", Body: body}
	sum := sha256.Sum256(body)
	ts := binary.BigEndian.AppendUint64(nil, uint64(t0))
	if got, want := a.requestMAC(&m, t0, &n), mac([]byte(labelRequest), []byte("POST"), []byte(m.To), []byte(PeerPath), []byte(m.Query), sum[:], ts, n[:]); got != want {
		t.Errorf("request MAC %x, want %x", got, want)
	}
	if got, want := a.SignAnswer(n, body), mac([]byte(labelAnswer), n[:], body); got != want {
		t.Errorf("answer MAC %x, want %x", got, want)
	}
	// The general form hashes the same layout.
	if got, want := a.mac(func(h hash.Hash) { writeField(h, []byte(labelAnswer)); writeField(h, n[:]); writeField(h, body) }), mac([]byte(labelAnswer), n[:], body); got != want {
		t.Errorf("mac with writeField %x, want %x", got, want)
	}
}
