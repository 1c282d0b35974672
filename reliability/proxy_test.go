package reliability_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/time/rate"
)

// throttle is a TCP proxy in front of a broker whose broker-to-client direction is limited
// to a settable number of bytes per second: a slow network, or a broker far away. The
// broker advertises the proxy's address, so every connection a client opens goes through it.
type throttle struct {
	ln      net.Listener
	target  string
	limiter *rate.Limiter
	mu      sync.Mutex
	conns   []net.Conn
}

func startThrottle(t *testing.T, ln net.Listener, target string) *throttle {
	p := &throttle{ln: ln, target: target, limiter: rate.NewLimiter(rate.Inf, 64<<10)}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// setRate limits the broker-to-client bytes per second; 0 lifts the limit.
func (p *throttle) setRate(bytesPerSecond int) {
	if bytesPerSecond == 0 {
		p.limiter.SetLimit(rate.Inf)
		return
	}
	p.limiter.SetLimit(rate.Limit(bytesPerSecond))
}

func (p *throttle) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(b, c); b.Close() }()
		go func() { p.copyLimited(c, b); c.Close() }()
	}
}

// copyLimited copies src to dst in chunks of at most the limiter's burst, waiting for
// tokens before each write.
func (p *throttle) copyLimited(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.limiter.WaitN(context.Background(), n) != nil {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *throttle) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
