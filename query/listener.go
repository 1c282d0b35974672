package query

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ClientLimitListener is a net.Listener that caps the connections one client (remote IP)
// may hold open at once, so that a slowloris, which opens many connections and trickles
// bytes into each, holds at most its share and cannot starve other clients of the server's
// connection slots. A connection beyond the cap is closed as soon as it is accepted and
// counted in slide_http_conns_refused_total; open connections are the gauge
// slide_http_conns_open. Register the listener with a prometheus.Registerer to export both.
//
// Accept never waits on a client: refusing costs one Close of a connection nobody has read
// from, and Accept goes on to the next connection. The cap counts connections, not
// requests; the http.Server's ReadHeaderTimeout is what ends a connection that never sends
// its header. Clients are told apart by IP address (IPv4-mapped IPv6 counts as IPv4), not
// port; connections whose address is not an IP (a unix socket) are counted but not capped.
// Behind a proxy or load balancer every client shares its address: raise the cap (or set
// it to 0) there, or the proxy's connections are what gets refused.
//
// It is safe for concurrent use. The zero value is not usable: build one with
// LimitPerClient. Accept and Close of a connection cost one map update under a mutex.
type ClientLimitListener struct {
	net.Listener
	max int // <= 0: no cap

	mu   sync.Mutex
	open map[netip.Addr]int // open connections by client; an entry goes when it reaches 0

	gaugeOpen prometheus.Gauge
	refused   prometheus.Counter
	nRefused  atomic.Uint64
}

// LimitPerClient wraps ln so that each remote IP holds at most n open connections; n <= 0
// means no cap (connections are still counted). Closing the returned listener closes ln.
func LimitPerClient(ln net.Listener, n int) *ClientLimitListener {
	return &ClientLimitListener{
		Listener: ln,
		max:      n,
		open:     map[netip.Addr]int{},
		gaugeOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slide_http_conns_open",
			Help: "HTTP connections open on the query API's listener.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slide_http_conns_refused_total",
			Help: "HTTP connections closed at once because their client already held --max-conns-per-client open connections.",
		}),
	}
}

var _ net.Listener = (*ClientLimitListener)(nil)
var _ prometheus.Collector = (*ClientLimitListener)(nil)

// Accept returns the next connection whose client is under the cap, closing the ones over
// it on the way. It returns the wrapped listener's errors as they are.
func (l *ClientLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, capped := clientIP(c.RemoteAddr())
		if !l.acquire(ip, capped) {
			l.refused.Inc()
			l.nRefused.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // reset at once: no FIN_WAIT state kept for an attacker
			}
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// acquire counts a new connection of ip, or reports false when ip is at the cap.
func (l *ClientLimitListener) acquire(ip netip.Addr, capped bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.open[ip]
	if capped && l.max > 0 && n >= l.max {
		return false
	}
	l.open[ip] = n + 1
	l.gaugeOpen.Inc()
	return true
}

func (l *ClientLimitListener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.open[ip]; n > 1 {
		l.open[ip] = n - 1
	} else {
		delete(l.open, ip)
	}
	l.gaugeOpen.Dec()
}

// OpenConns is the number of connections accepted and not yet closed, over all clients.
func (l *ClientLimitListener) OpenConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.open {
		n += c
	}
	return n
}

// Refused is the number of connections closed for being over the cap.
func (l *ClientLimitListener) Refused() uint64 { return l.nRefused.Load() }

// Describe sends the descriptors of slide_http_conns_open and slide_http_conns_refused_total.
func (l *ClientLimitListener) Describe(ch chan<- *prometheus.Desc) {
	l.gaugeOpen.Describe(ch)
	l.refused.Describe(ch)
}

// Collect sends the current values of both metrics.
func (l *ClientLimitListener) Collect(ch chan<- prometheus.Metric) {
	l.gaugeOpen.Collect(ch)
	l.refused.Collect(ch)
}

// clientIP is the address a connection is counted under, and whether it is an IP (capped).
func clientIP(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// limitedConn gives its slot back once, on the first Close.
type limitedConn struct {
	net.Conn
	l      *ClientLimitListener
	ip     netip.Addr
	closed atomic.Bool
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.ip)
	}
	return err
}

// CloseWrite half-closes a TCP connection: net/http uses it to let a client read an error
// answer before the connection goes away. Without it, the wrapper would hide the method.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
