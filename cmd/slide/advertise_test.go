package main

import (
	"net"
	"os"
	"testing"
)

// The advertised address is the flag, else the listener's, with this host's name in place
// of a wildcard; an address peers cannot reach is refused.
func TestAdvertiseAddr(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, listening, want string }{
		{"", "127.0.0.1:8081", "127.0.0.1:8081"},
		{"", "[::]:8081", net.JoinHostPort(host, "8081")},
		{"", "0.0.0.0:8081", net.JoinHostPort(host, "8081")},
		{"slide-0.slide:8080", "0.0.0.0:8081", "slide-0.slide:8080"},
	} {
		got, err := advertiseAddr(tc.flag, tc.listening)
		if err != nil || got != tc.want {
			t.Errorf("advertiseAddr(%q, %q) = %q, %v; want %q", tc.flag, tc.listening, got, err, tc.want)
		}
	}
	for _, flag := range []string{":8081", "0.0.0.0:8081", "nohost", "h:0"} {
		if _, err := advertiseAddr(flag, "127.0.0.1:8081"); err == nil {
			t.Errorf("--advertise-addr %q accepted", flag)
		}
	}
}
