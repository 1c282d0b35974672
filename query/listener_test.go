package query_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/query"
)

// dialFrom opens a TCP connection to addr from the loopback address src (127.0.0.x).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	c, err := dialMaybe(t, src, addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	return c
}

// dialMaybe dials like dialFrom and returns the error: a connection the server refuses
// may be reset before connect returns.
func dialMaybe(t *testing.T, src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

// closedByPeer reports whether the server closed c: a read returns EOF or a reset within
// wait, rather than timing out.
func closedByPeer(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitFor polls cond for up to 2 s: the server side of a refused dial may lag the client.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	polltest.Eventually(t, 2*time.Second, 5*time.Millisecond, cond, func() string { return "condition not reached" })
}

// TestLimitPerClient: each IP holds at most n connections; the rest are closed right after
// Accept and counted; a closed connection frees its slot once; another IP has its own share.
func TestLimitPerClient(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := query.LimitPerClient(inner, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	addr := l.Addr().String()
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(2 * time.Second):
			t.Fatal("Accept returned no connection")
			return nil
		}
	}

	a1, a2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	s1, s2 := next(), next()
	for i := range 3 {
		// Refused: reset before connect returns, or closed right after.
		if c, err := dialMaybe(t, "127.0.0.2", addr); err == nil && !closedByPeer(c, 2*time.Second) {
			t.Errorf("connection %d over the cap is still open", i+3)
		}
	}
	waitFor(t, func() bool { return l.Refused() == 3 })
	// Another client is not affected by the first one's cap.
	b1 := dialFrom(t, "127.0.0.1", addr)
	sb := next()
	if got, want := l.OpenConns(), 3; got != want {
		t.Errorf("open conns %d, want %d", got, want)
	}
	if l.Refused() != 3 {
		t.Errorf("refused %d, want 3", l.Refused())
	}
	if closedByPeer(a1, 50*time.Millisecond) || closedByPeer(a2, 50*time.Millisecond) || closedByPeer(b1, 50*time.Millisecond) {
		t.Error("a connection under the cap was closed")
	}
	err = testutil.CollectAndCompare(l, strings.NewReader(`
# HELP slide_http_conns_open HTTP connections open on the query API's listener.
# TYPE slide_http_conns_open gauge
slide_http_conns_open 3
# HELP slide_http_conns_refused_total HTTP connections closed at once because their client already held --max-conns-per-client open connections.
# TYPE slide_http_conns_refused_total counter
slide_http_conns_refused_total 3
`))
	if err != nil {
		t.Error(err)
	}

	// Closing twice gives the slot back once; then the client may connect again.
	s1.Close()
	s1.Close()
	if got := l.OpenConns(); got != 2 {
		t.Errorf("open conns after closing one twice: %d, want 2", got)
	}
	dialFrom(t, "127.0.0.2", addr)
	s3 := next()
	if got := l.OpenConns(); got != 3 || l.Refused() != 3 {
		t.Errorf("after a slot freed: open %d refused %d, want 3 and 3", got, l.Refused())
	}
	for _, c := range []net.Conn{s2, s3, sb} {
		c.Close()
	}
	if got := l.OpenConns(); got != 0 {
		t.Errorf("open conns after closing all: %d", got)
	}
}

// TestLimitPerClientUnlimited: n = 0 caps nothing but still counts.
func TestLimitPerClientUnlimited(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := query.LimitPerClient(inner, 0)
	defer l.Close()
	const n = 20
	done := make(chan []net.Conn)
	go func() {
		var cs []net.Conn
		for range n {
			c, err := l.Accept()
			if err != nil {
				break
			}
			cs = append(cs, c)
		}
		done <- cs
	}()
	for range n {
		dialFrom(t, "127.0.0.2", l.Addr().String())
	}
	var cs []net.Conn
	select {
	case cs = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Accept stalled")
	}
	if len(cs) != n || l.OpenConns() != n || l.Refused() != 0 {
		t.Fatalf("accepted %d, open %d, refused %d; want %d, %d, 0", len(cs), l.OpenConns(), l.Refused(), n, n)
	}
	for _, c := range cs {
		c.Close()
	}
	// Accept after Close returns the listener's error, not a hang.
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
