package ingest

import (
	"bufio"
	"context"
	"net"

	"github.com/segmentio/kafka-go"
)

// readBufferSize is how much a fetch connection reads from its socket at a time. kafka-go
// reads through a 4 KiB buffer, and a record's value past that straight from the socket: two
// or three reads of a few KiB a record, whose fixed cost (the syscall, the TCP receive path)
// was most of the consumer's reading (a 9 KB record cost ~3 µs of read syscalls, ~14 ms of
// CPU an op of BenchmarkEndToEndSpans). Read in 256 KiB, the same bytes take a few reads a
// MiB and one copy more, in memory.
const readBufferSize = 256 << 10

// fetchDialer is d (nil: kafka.DefaultDialer) whose connections read their socket through a
// buffer of readBufferSize. TLS, if d has it, sits above the buffer.
func fetchDialer(d *kafka.Dialer) *kafka.Dialer {
	if d == nil {
		d = kafka.DefaultDialer
	}
	fd := *d
	dial := d.DialFunc
	if dial == nil {
		dial = (&net.Dialer{LocalAddr: d.LocalAddr, DualStack: d.DualStack, FallbackDelay: d.FallbackDelay, KeepAlive: d.KeepAlive}).DialContext
	}
	fd.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &bufferedConn{Conn: conn, r: bufio.NewReaderSize(conn, readBufferSize)}, nil
	}
	return &fd
}

// bufferedConn is a net.Conn whose reads go through r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
