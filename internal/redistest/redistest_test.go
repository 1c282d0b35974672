package redistest

import (
	"net"
	"testing"
	"time"
)

func TestStartStopStartSamePort(t *testing.T) {
	s := Start(t)
	addr := s.Addr
	if got, err := s.Do("SET", "k", "v"); err != nil || got != "OK" {
		t.Fatalf("SET = %q, %v; want OK", got, err)
	}
	s.Stop()
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		t.Fatalf("port %s still accepts connections after Stop", addr)
	}
	s.Start()
	if s.Addr != addr {
		t.Fatalf("Addr changed across restart: %s → %s", addr, s.Addr)
	}
	// No persistence: the restarted server is empty.
	if got, err := s.Do("GET", "k"); err != nil || got != "(nil)" {
		t.Fatalf("GET after restart = %q, %v; want (nil)", got, err)
	}
	if got, err := s.Do("CONFIG", "GET", "appendonly"); err != nil || got != "appendonly\nno" {
		t.Fatalf("CONFIG GET appendonly = %q, %v", got, err)
	}
}

func TestMissingBinaryMessage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := binary()
	if err == nil || err.Error() != "redis-server not found: run `make deps` (installs it with apt-get) or apt-get install redis-server" {
		t.Fatalf("error = %v", err)
	}
}
