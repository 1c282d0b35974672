package query_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/httperr"
)

// postWholeBodyThenRead posts body to /v1/events over a raw connection as Python's urllib
// and requests do: the whole request (headers and body) is written before the answer is
// read. With chunked set the body goes as one chunk and no Content-Length.
func postWholeBodyThenRead(t *testing.T, base string, body []byte, chunked bool) (*http.Response, error) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	head := "POST /v1/events HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/x-ndjson\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", len(body))
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body))
	}
	if _, err := conn.Write([]byte(head)); err != nil {
		return nil, fmt.Errorf("writing the header: %w", err)
	}
	if _, err := conn.Write(body); err != nil {
		return nil, fmt.Errorf("writing the body: %w", err)
	}
	if chunked {
		if _, err := conn.Write([]byte("\r\n0\r\n\r\n")); err != nil {
			return nil, fmt.Errorf("ending the body: %w", err)
		}
	}
	return http.ReadResponse(bufio.NewReader(conn), nil)
}

// TestEventsTooLargeReachesClientsThatWriteFirst: a client that sends its whole body before
// reading gets the 413 and its JSON error, not a connection reset, whether the size was
// announced (Content-Length, refused before reading) or found while reading (chunked). 1.4
// MiB is the size of the report; 12 MiB is more than loopback's socket buffers take, so the
// server must read it for the client to get as far as reading. Nothing is recorded.
func TestEventsTooLargeReachesClientsThatWriteFirst(t *testing.T) {
	e := newEnv(t, nil) // the default 1 MiB limit
	line := event{ts: t0, key: "big", metric: "latency_ms", value: 3}.line()
	for _, c := range []struct {
		size    int
		chunked bool
	}{{1<<20 + 400<<10, false}, {1<<20 + 400<<10, true}, {12 << 20, false}, {12 << 20, true}} {
		chunked := c.chunked
		body := []byte(strings.Repeat(line, c.size/len(line)))
		resp, err := postWholeBodyThenRead(t, e.http.URL, body, chunked)
		if err != nil {
			t.Fatalf("%d bytes, chunked=%v: %v (the server closed before the client could read its answer)", len(body), chunked, err)
		}
		var got struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != 413 || err != nil || got.Error.Code != string(httperr.BodyTooLarge) {
			t.Errorf("%d bytes, chunked=%v: %d %+v (%v); want 413 %s", len(body), chunked, resp.StatusCode, got, err, httperr.BodyTooLarge)
		}
	}
	if e.store.Len() != 0 {
		t.Errorf("a refused body recorded %d series", e.store.Len())
	}
}

// TestEventsTooLargeExpectContinue: a client that asks "Expect: 100-continue" (curl does for
// large bodies) gets the 413 before it sends the body, and no 100 Continue.
func TestEventsTooLargeExpectContinue(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := url.Parse(e.http.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", u.Host, 2<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status %d, want 413 before the body is sent", resp.StatusCode)
	}
}
