package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestShutdownDelayDrainsBeforeClosing: with --shutdown-delay, SIGTERM does not close the
// listener at once. Until the delay ends serve goes on answering, on kept-alive connections
// and new ones, /readyz answers 503 so that Kubernetes and load balancers take the instance
// out, and every answer says Connection: close so that clients move their connections. A
// request sent on a kept-alive connection in that time is answered, not lost with an EOF.
// (The delay is ended here by a failure of background work, which also ends it in serve.)
func TestShutdownDelayDrainsBeforeClosing(t *testing.T) {
	d := &drain{delay: time.Hour}
	mux := http.NewServeMux()
	// The engine's routes: ready, and answering.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ready") })
	mux.HandleFunc("/v1/allow", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "allowed") })
	mux.HandleFunc("/v1/window", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "window") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	srv := newHTTPServer(d.handler(mux), time.Second, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	background := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(ctx, srv, ln, d, 5*time.Second, background, slog.New(slog.DiscardHandler))
	}()

	// One client with one kept-alive connection, as a service mesh or an API gateway holds.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	get := func(path string) (int, string, bool) {
		t.Helper()
		resp, err := client.Post(base+path, "application/json", nil)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body), resp.Close
	}
	if code, body, closed := get("/v1/allow"); code != 200 || closed {
		t.Fatalf("before SIGTERM: %d %q, connection close %v", code, body, closed)
	}
	if code, _, _ := get("/readyz"); code != 200 {
		t.Fatalf("before SIGTERM: /readyz %d", code)
	}

	cancel() // SIGTERM
	deadline := time.Now().Add(20 * time.Second)
	for !d.on.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the drain never began after SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The kept-alive connection is still served; its answer closes it, so the client's next
	// request comes on a new connection, still accepted while the delay lasts.
	for i := range 3 {
		code, body, closed := get("/v1/allow")
		if code != 200 || body != "allowed" || !closed {
			t.Fatalf("request %d after SIGTERM: %d %q, Connection: close %v; want answered with Connection: close", i, code, body, closed)
		}
	}
	if code, body, _ := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz after SIGTERM: %d %q; want 503 shutting down while draining", code, body)
	}
	// Only /readyz says so: reads are answered until the listener closes.
	if code, body, _ := get("/v1/window"); code != 200 || body != "window" {
		t.Errorf("a read after SIGTERM: %d %q; want it answered while draining", code, body)
	}
	select {
	case err := <-done:
		t.Fatalf("serve stopped before its --shutdown-delay ended: %v", err)
	default:
	}

	failed := errors.New("kafka consumer: boom")
	background <- failed
	select {
	case err := <-done:
		if !errors.Is(err, failed) {
			t.Errorf("serveUntilDone: %v, want the background failure", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a failure of background work did not end the drain")
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("still listening after the drain ended")
	}
}

// TestShutdownTimeoutNamesTheCut: a request still running when --shutdown-timeout ends is
// cut, and the error says so and names the flag, not a bare "context deadline exceeded".
func TestShutdownTimeoutNamesTheCut(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &drain{}
	srv := newHTTPServer(d.handler(mux), time.Second, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(ctx, srv, ln, d, 50*time.Millisecond, nil, slog.New(slog.DiscardHandler))
	}()
	cut := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err == nil {
			resp.Body.Close()
		}
		cut <- err
	}()
	<-started
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "still running after --shutdown-timeout 50ms were cut") {
			t.Errorf("serveUntilDone: %v; want the cut requests and the flag named", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown did not end after its timeout")
	}
	select {
	case err := <-cut:
		if err == nil {
			t.Error("the request still running was answered, want it cut")
		}
	case <-time.After(20 * time.Second):
		t.Error("the request still running was left open after the shutdown")
	}
}
