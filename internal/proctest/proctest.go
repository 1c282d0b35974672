// Package proctest runs the real slide binary as separate processes for the reliability
// tests and the soak: build it once, start it with flags, kill it (SIGKILL) or stop it
// (SIGTERM), read its output, RSS and Prometheus metrics, and wait for it over HTTP.
//
// Processes started with Start are killed by t.Cleanup, and their combined stdout and
// stderr is logged when the test fails, so a failure shows what the process said.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles ./cmd/slide of the module that contains the working directory into dir
// and returns the binary's path. It builds without the race detector, whatever the
// test binary uses: the processes under test run as users run them.
func Build(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "slide")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/slide")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building slide: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback host:port nobody listens on at the time of the call.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Proc is one running process. Its methods are safe for concurrent use.
type Proc struct {
	Name string // label in logs and errors
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{} // closed when the process has exited and was reaped
	err  error         // Wait's error, valid after done
}

// Start starts bin with args, its stdout and stderr captured together. The process is
// killed when the test ends; when the test failed, its output is logged.
func Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p, err := StartProc(name, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of %s (%s):\n%s", p.Name, strings.Join(args, " "), Tail(p.Output(), 8000))
		}
	})
	return p
}

// StartProc is Start without a test: the caller must Kill or Stop the process.
func StartProc(name, bin string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, cmd: exec.Command(bin, args...), out: &Buffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Output is everything the process wrote so far, stdout and stderr interleaved.
func (p *Proc) Output() string { return p.out.String() }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits until the process is reaped: a crash, nothing flushed,
// nothing committed, no goodbye to the consumer group.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit. It returns an error when
// the process exits non-zero or does not exit in time (it is then killed).
func (p *Proc) Stop(timeout time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("%s had already exited: %v", p.Name, p.err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s exited after SIGTERM: %w", p.Name, p.err)
		}
		return nil
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.Name, timeout)
	}
}

// Wait waits up to timeout for the process to exit on its own and returns its exit error.
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// WaitOutput waits until a line of the output contains substr and returns that line.
func (p *Proc) WaitOutput(substr string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		sc := bufio.NewScanner(strings.NewReader(p.Output()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), substr) {
				return sc.Text(), nil
			}
		}
		if p.Exited() {
			return "", fmt.Errorf("%s exited (%v) before printing %q", p.Name, p.err, substr)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not print %q within %s", p.Name, substr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RSS is the process's resident set size in bytes, from /proc/PID/status (VmRSS).
func (p *Proc) RSS() (int64, error) { return RSSOf(p.PID()) }

// PeakRSS is the largest resident set size the process has had, in bytes (VmHWM).
func (p *Proc) PeakRSS() (int64, error) { return statusKB(p.PID(), "VmHWM:") }

// RSSOf reads VmRSS of pid from /proc (Linux).
func RSSOf(pid int) (int64, error) { return statusKB(pid, "VmRSS:") }

// statusKB reads the field (e.g. "VmRSS:") of /proc/PID/status, in bytes.
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// Broker runs `slide broker` on a free port and returns the process and its address.
func Broker(t testing.TB, bin string, partitions int, extra ...string) (*Proc, string) {
	t.Helper()
	args := append([]string{"broker", "--addr", "127.0.0.1:0", "--partitions", strconv.Itoa(partitions)}, extra...)
	p := Start(t, "broker", bin, args...)
	line, err := p.WaitOutput("broker listening on ", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return p, BrokerAddr(line)
}

// BrokerAddr extracts host:port from `slide broker`'s line "broker listening on HOST:PORT
// (…"; it is empty for any other line.
func BrokerAddr(line string) string {
	_, rest, ok := strings.Cut(line, "broker listening on ")
	if !ok {
		return ""
	}
	addr, _, _ := strings.Cut(rest, " ")
	return addr
}

var client = &http.Client{Timeout: 10 * time.Second}

// Get fetches url and returns the status and body.
func Get(url string) (int, []byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// GetJSON fetches url and decodes a 200 answer into v; other statuses are errors.
func GetJSON(url string, v any) error {
	code, b, err := Get(url)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return &StatusError{URL: url, Code: code, Body: string(b)}
	}
	return json.Unmarshal(b, v)
}

// StatusError is a non-200 answer of GetJSON.
type StatusError struct {
	URL  string
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: %d %s", e.URL, e.Code, strings.TrimSpace(e.Body))
}

// WaitStatus polls url until it answers want, or fails after timeout with the last answer.
func WaitStatus(ctx context.Context, url string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		code, b, err := Get(url)
		if err == nil && code == want {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", code, Tail(string(b), 500))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer %d within %s; last: %s", url, want, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Metric sums every sample of the metric name in a Prometheus text exposition whose
// labels contain all of the given `label="value"` pairs. found is false when none matched.
func Metric(exposition, name string, labels ...string) (sum float64, found bool) {
	for line := range strings.SplitSeq(exposition, "\n") {
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lbl string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			lbl, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with this prefix
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(lbl, l)
		}
		fields := strings.Fields(rest)
		if !ok || len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// Scrape fetches base+"/metrics".
func Scrape(base string) (string, error) {
	code, b, err := Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("GET %s/metrics: %d", base, code)
	}
	return string(b), nil
}

// Tail is the last n bytes of s, marked with "…" when cut: a process's output in an error.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Buffer is a bytes.Buffer safe for concurrent writers (a process, a logger's goroutines)
// and readers (the test). The zero value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
