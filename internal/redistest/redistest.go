// Package redistest starts a real redis-server for tests: on a free loopback
// port, without persistence, stopped by t.Cleanup. Stop and Start simulate an
// outage: Start brings the server back on the same port. StartWith adds a
// password, an ACL user or TLS; StartCluster (cluster.go) a Redis Cluster and
// StartSentinel a master, a replica and three Sentinels.
package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NotFound is the failure message when redis-server is not on PATH.
const NotFound = "redis-server not found: run `make deps` (installs it with apt-get) or apt-get install redis-server"

// Server is a redis-server process owned by one test. Its methods may be
// called from the test goroutine and from goroutines the test waits for.
type Server struct {
	// Addr is host:port, stable across Stop/Start.
	Addr string

	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	opts Opts

	mu  sync.Mutex
	cmd *exec.Cmd
	log *bytes.Buffer
}

// Start launches redis-server with `--save ” --appendonly no` plus args
// (e.g. "--maxmemory", "1mb"), waits until it answers PING, and registers a
// cleanup that stops it. It fails the test if redis-server is missing or does
// not come up within 10 s.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartWith(t, Opts{Args: args})
}

// Opts are the settings of StartWith. The zero value is Start's server.
type Opts struct {
	// Args are extra redis-server arguments.
	Args []string
	// Password is requirepass, the default user's password.
	Password string
	// User and UserPassword add an ACL user allowed every command and key.
	User, UserPassword string
	// TLSCert, TLSKey and TLSCA (PEM files, e.g. from tlstest) make the server speak
	// TLS only, on Addr; clients need not present a certificate. TLSClient is the
	// client config the package's own PING and Do use.
	TLSCert, TLSKey, TLSCA string
	TLSClient              *tls.Config

	config   string // a config file, the first argument (Sentinel needs one it can rewrite)
	sentinel bool
}

// StartWith is Start with a password, an ACL user or TLS.
func StartWith(t testing.TB, o Opts) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("redistest: finding a free port: %v", err)
	}
	s := &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		t:    t,
		bin:  bin,
		port: port,
		dir:  t.TempDir(),
		args: o.serverArgs(),
		opts: o,
	}
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// binary finds redis-server on PATH; its error is NotFound.
func binary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(NotFound)
	}
	return bin, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start (re)starts the server on the same port and waits for PING. It is a
// no-op while the server runs.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.opts.TLSCert != "" {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	var first []string
	if s.opts.config != "" {
		first = []string{s.opts.config}
	}
	if s.opts.sentinel {
		first = append(first, "--sentinel")
	}
	args := append(append(append(first, port...),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
	), s.args...)
	cmd := exec.Command(s.bin, args...)
	s.log = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting redis-server: %v", err)
	}
	s.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s.ping() == nil {
			// Hand the reaper over to Stop through cmd.Process only.
			go func() { <-exited }()
			return
		}
		select {
		case err := <-exited:
			s.cmd = nil
			s.t.Fatalf("redistest: redis-server exited: %v\n%s", err, s.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			s.cmd = nil
			s.t.Fatalf("redistest: redis-server on %s did not answer PING within 10s\n%s", s.Addr, s.log.String())
		}
	}
}

// Running reports whether the server was started and not stopped.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// startSentinel starts redis-server in Sentinel mode with config file conf.
func startSentinel(t testing.TB, conf string) *Server {
	t.Helper()
	return StartWith(t, Opts{config: conf, sentinel: true})
}

// Stop kills the server (like a crash: no shutdown save) and waits until the
// port refuses connections. Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	s.cmd = nil
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
}

// Do sends one command over a fresh connection and returns the reply in
// redis-cli's plain form: integers and bulk strings as text, arrays as one
// element per line. For assertions that should not depend on go-redis.
func (s *Server) Do(args ...string) (string, error) {
	c, err := s.dial(time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return do(c, args...)
}

func do(c net.Conn, args ...string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	var lines []string
	if err := readReply(bufio.NewReader(c), &lines); err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

func readReply(r *bufio.Reader, out *[]string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		*out = append(*out, line[1:])
	case '-':
		return fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return err
		}
		if n < 0 {
			*out = append(*out, "(nil)")
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, string(buf[:n]))
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func (o Opts) serverArgs() []string {
	args := append([]string{}, o.Args...)
	if o.Password != "" {
		args = append(args, "--requirepass", o.Password)
	}
	if o.User != "" {
		args = append(args, "--user", o.User, "on", ">"+o.UserPassword, "~*", "&*", "+@all")
	}
	if o.TLSCert != "" {
		args = append(args, "--tls-cert-file", o.TLSCert, "--tls-key-file", o.TLSKey,
			"--tls-ca-cert-file", o.TLSCA, "--tls-auth-clients", "no")
	}
	return args
}

// dial connects to the server (TLS when it speaks TLS) and authenticates as the
// default user when it has a password.
func (s *Server) dial(timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var err error
	if s.opts.TLSClient != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", s.Addr, s.opts.TLSClient)
	} else {
		c, err = net.DialTimeout("tcp", s.Addr, timeout)
	}
	if err != nil || s.opts.Password == "" {
		return c, err
	}
	if _, err := do(c, "AUTH", s.opts.Password); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s *Server) ping() error {
	c, err := s.dial(200 * time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	out, err := do(c, "PING")
	if err != nil {
		return err
	}
	if out != "PONG" {
		return fmt.Errorf("PING answered %q", out)
	}
	return nil
}

func ping(addr string) error {
	return (&Server{Addr: addr}).ping()
}
