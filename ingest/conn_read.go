package ingest

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/segmentio/kafka-go"
)

// readBufferSize is how much a fetch connection reads from its socket at a time. kafka-go
// reads through a 4 KiB buffer, and a record's value past that straight from the socket: two
// or three reads of a few KiB a record, whose fixed cost (the syscall, the TCP receive path)
// was most of the consumer's reading (a 9 KB record cost ~3 µs of read syscalls, ~14 ms of
// CPU an op of BenchmarkEndToEndSpans). Read in 256 KiB, the same bytes take a few reads a
// MiB and one copy more, in memory.
const readBufferSize = 256 << 10

// fetchDialer is d (nil: kafka.DefaultDialer) whose connections read through a buffer of
// readBufferSize, above TLS when d has it (the dialer's own TLS moves into its DialFunc, as
// kafka-go does it: the server name from the address unless the config names one). The
// connection a dial made is also left in the fetchConnSlot of its context, if any: the
// consumer's own fetch (fetch_raw.go) writes and reads it under kafka-go's Conn.
func fetchDialer(d *kafka.Dialer) *kafka.Dialer {
	if d == nil {
		d = kafka.DefaultDialer
	}
	fd := *d
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{LocalAddr: d.LocalAddr, DualStack: d.DualStack, FallbackDelay: d.FallbackDelay, KeepAlive: d.KeepAlive}).DialContext
	}
	tlsConfig := d.TLS
	fd.TLS = nil
	fd.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if tlsConfig != nil {
			cfg := tlsConfig
			if cfg.ServerName == "" {
				cfg = cfg.Clone()
				cfg.ServerName = address
				if host, _, err := net.SplitHostPort(address); err == nil {
					cfg.ServerName = host
				}
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			conn = tc
		}
		fc := &fetchConn{Conn: conn, r: bufio.NewReaderSize(conn, readBufferSize)}
		if slot, ok := ctx.Value(fetchConnKey{}).(*fetchConnSlot); ok {
			slot.fc = fc // DialLeader dials the leader last
		}
		return fc, nil
	}
	return &fd
}

// fetchConn is a net.Conn whose reads go through r.
type fetchConn struct {
	net.Conn
	r *bufio.Reader
	// follow, when set before the connection is used, moves the read deadline to follow
	// from now whenever bytes arrive: kafka-go sets it once a fetch, so a record batch taking
	// longer than that to arrive whole (one past MaxBytes over a slow link) timed out at
	// every attempt.
	follow time.Duration
}

func (c *fetchConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && c.follow > 0 {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.follow))
	}
	return n, err
}

// fetchConnKey is the context key of a *fetchConnSlot.
type fetchConnKey struct{}

// fetchConnSlot receives the connection a dial made.
type fetchConnSlot struct{ fc *fetchConn }
