package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamUpgrade: a signed upgrade over TLS (as peers with --tls) yields a stream whose
// two ends hold the same key and exchange bytes; a stranger's key is refused before the
// connection is taken over, and a route that does not upgrade answers ErrNoStream.
func TestStreamUpgrade(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	auth, err := NewAuth(AuthConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	keys := make(chan []byte, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsUpgrade(r) {
			http.Error(w, "no streams here", http.StatusBadRequest)
			return
		}
		self := r.Host
		s, err := AcceptStream(w, r, auth, self)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		defer s.Conn.Close()
		keys <- s.Key
		_, _ = io.Copy(s.Conn, s.R) // an echo
	}))
	srv.EnableHTTP2 = true // the upgrade must still be HTTP/1.1
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s, err := StreamDialer{Auth: auth, TLS: &tls.Config{RootCAs: pool.RootCAs}, Self: "me:1"}.Dial(ctx, addr, "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Conn.Close()
	if theirs := <-keys; len(s.Key) != 32 || string(theirs) != string(s.Key) {
		t.Fatalf("stream keys differ: %x and %x", s.Key, theirs)
	}
	if _, err := s.Conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(s.R, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo: %q, %v", got, err)
	}

	other, _ := NewAuth(AuthConfig{Key: []byte("fedcba9876543210fedcba9876543210")})
	if _, err := (StreamDialer{Auth: other, TLS: &tls.Config{RootCAs: pool.RootCAs}, Self: "x:1"}).Dial(ctx, addr, "/stream"); !errors.Is(err, errUnauthenticated) {
		t.Errorf("a stranger's upgrade: %v, want refused", err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if _, err := (StreamDialer{Auth: auth, Self: "me:1"}).Dial(ctx, strings.TrimPrefix(plain.URL, "http://"), "/stream"); !errors.Is(err, ErrNoStream) {
		t.Errorf("a route without streams: %v, want ErrNoStream", err)
	}
}
