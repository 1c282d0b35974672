package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// rtFunc is an http.RoundTripper of a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The memory of refusals holds the peers that refused within olderFor, not every address
// that ever refused: a group whose old members come and go (a rolling update giving each
// pod a new address, a member rejoining under new ones) grew it for ever.
func TestOlderForgetsPastRefusals(t *testing.T) {
	ti := newTwo(t, "", nil)
	c := ti.a
	c.rt = rtFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("op") == opExtents {
			return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Header: http.Header{},
				Body: io.NopCloser(bytes.NewReader([]byte("unknown op " + opExtents)))}, nil
		}
		body := binary.AppendUvarint(appendServed(nil, nil), 0)
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}, nil
	})
	held := func() int {
		n := 0
		c.older.Range(func(any, any) bool { n++; return true })
		return n
	}
	clock := t0
	c.now = func() int64 { return clock }
	r := &request{op: opExtents, older: opSlots, metric: "m", now: t0, at: t0}
	for i := range 50 {
		if _, err := c.askOlder(context.Background(), "10.0.0."+strconv.Itoa(i)+":1", r); err != nil {
			t.Fatal(err)
		}
	}
	if n := held(); n != 50 {
		t.Fatalf("%d refusals held, want the 50 of the last minute", n)
	}
	clock += olderFor.Milliseconds()
	if _, err := c.askOlder(context.Background(), "10.0.1.1:1", r); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Errorf("a minute on, %d refusals held, want the 1 of the last minute", n)
	}
}
