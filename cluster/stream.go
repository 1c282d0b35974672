package cluster

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"hash"
	"net"
	"net/http"
	"strings"
	"time"
)

// A peer stream (issue #30): one connection to a peer, upgraded from a signed HTTP/1.1
// POST, that then carries the caller's own frames both ways until either side closes it.
// It spares a protocol that exchanges many small messages with one peer (the limiter's
// forwarded decisions, limiter/clusterlimit) an HTTP request, a signature over headers and
// a goroutine handoff per message.
//
// The upgrade is a signed request as any peer POST (Auth: the receiver, the path, an empty
// body, a fresh nonce, so a replayed upgrade is refused), answered 101 with the
// receiver's nonce (HeaderStreamNonce), signed as an answer to the request's nonce. Both
// sides then derive the stream's key from the group's key and the two nonces
// (Auth.StreamKey): a frame MAC under it proves a frame comes from the other end of this
// stream, and only a holder of the group's key can open one. Without a group key the
// stream is as open as the route it upgrades, and Stream.Key is nil.

// StreamProtocol is the Upgrade token of a peer stream. Its version is the frames' (their
// format and MAC are the caller's, limiter/clusterlimit's): a peer of another version does
// not take the upgrade (IsUpgrade is false for it), and the asker falls back as it does for
// a peer without streams (ErrNoStream). slide-stream/1 MACed frames with HMAC-SHA256,
// slide-stream/2 with GMAC.
const StreamProtocol = "slide-stream/2"

// streamProtocols is the prefix of every version's Upgrade token.
const streamProtocols = "slide-stream/"

// IsOtherUpgrade reports whether r asks for a peer stream of a version other than
// StreamProtocol (a peer of another slide version), to be refused clearly.
func IsOtherUpgrade(r *http.Request) bool {
	u := r.Header.Get("Upgrade")
	return u != StreamProtocol && strings.HasPrefix(u, streamProtocols)
}

// HeaderStreamNonce carries the receiver's nonce in a stream's 101 answer, base64url.
const HeaderStreamNonce = "X-Slide-Stream-Nonce"

// ErrNoStream is a peer that answered an upgrade with something other than 101: it does
// not serve streams on that path (an older version); the caller uses plain POSTs.
var ErrNoStream = errors.New("cluster: peer does not serve streams")

// ErrStreamLost is an upgrade accepted whose connection failed before the 101 was written:
// the connection is closed, and nothing more can be answered on it.
var ErrStreamLost = errors.New("cluster: the stream's connection failed during the upgrade")

// Stream is one upgraded peer connection: read from R (buffered), write to Conn. Key is the
// stream's MAC key, nil when the group has none.
type Stream struct {
	Conn net.Conn
	R    *bufio.Reader
	Key  []byte
}

// labelStream is the domain of a stream's derived key.
const labelStream = "slide peer stream v1"

// StreamKey is the key of the stream opened with the asker's nonce asked and the receiver's
// answered: an HMAC under the group's key, so it never crosses the wire either.
func (a *Auth) StreamKey(asked, answered Nonce) []byte {
	k := a.mac(func(h hash.Hash) {
		writeField(h, []byte(labelStream))
		writeField(h, asked[:])
		writeField(h, answered[:])
	})
	return k[:]
}

// StreamDialer opens peer streams: Auth signs (nil: unsigned), TLS makes the connection TLS
// (nil: plain TCP), Self is this instance's advertised address (HeaderPeer).
type StreamDialer struct {
	Auth *Auth
	TLS  *tls.Config
	Self string
}

// Dial connects to path at addr and upgrades the connection to a stream; ctx bounds the
// whole handshake. ErrNoStream: the peer answered without upgrading.
func (d StreamDialer) Dial(ctx context.Context, addr, path string) (*Stream, error) {
	conn, err := (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	s, err := d.upgrade(ctx, conn, addr, path)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return s, nil
}

func (d StreamDialer) upgrade(ctx context.Context, conn net.Conn, addr, path string) (*Stream, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	scheme := "http://"
	if d.TLS != nil {
		cfg := d.TLS.Clone()
		cfg.NextProtos = []string{"http/1.1"} // an upgrade is HTTP/1.1's
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		conn, scheme = tc, "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+path, http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamProtocol)
	req.Header.Set(HeaderPeer, d.Self)
	var stamp Stamp
	if d.Auth != nil {
		stamp = d.Auth.SignRequest(Message{Method: http.MethodPost, To: addr, Path: path})
		stamp.SetHeader(req.Header)
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("asking %s to upgrade: %w", addr, err)
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		return nil, fmt.Errorf("reading the upgrade of %s: %w", addr, err)
	}
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, refusedErr(addr, d.Auth != nil, "")
	case resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != StreamProtocol:
		return nil, fmt.Errorf("%w: %s answered %s", ErrNoStream, addr, resp.Status)
	}
	s := &Stream{Conn: conn, R: r}
	if d.Auth != nil {
		var answered Nonce
		mac, err := AnswerMACOf(resp.Header)
		if err == nil && !decodeFixed(answered[:], resp.Header.Get(HeaderStreamNonce)) {
			err = fmt.Errorf("%w: %s", ErrUnsigned, HeaderStreamNonce)
		}
		if err == nil {
			err = d.Auth.VerifyAnswer(stamp.Nonce, answered[:], mac)
		}
		if err != nil {
			return nil, unprovenErr("the upgrade", addr, err)
		}
		s.Key = d.Auth.StreamKey(stamp.Nonce, answered)
	}
	_ = conn.SetDeadline(time.Time{})
	return s, nil
}

// IsUpgrade reports whether r asks for a peer stream.
func IsUpgrade(r *http.Request) bool { return r.Header.Get("Upgrade") == StreamProtocol }

// AcceptStream verifies r, an upgrade to a stream addressed to self (signed with auth when
// auth is not nil: ErrBadSignature, ErrReplayed ... before anything is answered; answer
// 401), then takes its connection over and answers 101, signed. The returned stream has no
// deadlines: the caller owns the connection and closes it.
func AcceptStream(w http.ResponseWriter, r *http.Request, auth *Auth, self string) (*Stream, error) {
	var stamp Stamp
	if auth != nil {
		var err error
		if stamp, err = StampOf(r.Header); err == nil {
			err = auth.VerifyRequest(Message{Method: r.Method, To: self, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery}, stamp)
		}
		if err != nil {
			return nil, err
		}
	}
	if r.Header.Get(HeaderPeer) == "" {
		return nil, fmt.Errorf("not a peer request: %s missing", HeaderPeer)
	}
	if r.ContentLength != 0 {
		return nil, errors.New("an upgrade to a stream has no body")
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, fmt.Errorf("taking the connection over (HTTP/1.1 only): %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	var answered Nonce
	_, _ = rand.Read(answered[:])
	head := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + StreamProtocol + "\r\n"
	s := &Stream{Conn: conn, R: rw.Reader}
	if auth != nil {
		mac := auth.SignAnswer(stamp.Nonce, answered[:])
		head += HeaderStreamNonce + ": " + b64.EncodeToString(answered[:]) + "\r\n" +
			HeaderSignature + ": " + b64.EncodeToString(mac[:]) + "\r\n"
		s.Key = auth.StreamKey(stamp.Nonce, answered)
	}
	if _, err := conn.Write([]byte(head + "\r\n")); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %w", ErrStreamLost, err)
	}
	return s, nil
}

// DialStream opens a stream to path at addr, signed with the group's key (see
// StreamDialer).
func (c *Cluster) DialStream(ctx context.Context, addr, path string) (*Stream, error) {
	return StreamDialer{Auth: c.auth, TLS: c.cfg.TLS, Self: c.cfg.Advertise}.Dial(ctx, addr, path)
}

// AcceptStream takes a peer's upgrade to a stream over (see AcceptStream).
func (c *Cluster) AcceptStream(w http.ResponseWriter, r *http.Request) (*Stream, error) {
	return AcceptStream(w, r, c.auth, c.cfg.Advertise)
}
