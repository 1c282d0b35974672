package looktest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ended by a NUL byte on fds 3 and 4), for what
// --dump-dom cannot tell: layout (where things are drawn) and the page in real time. It
// holds one page.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      *os.File // chromium reads commands here (its fd 3)
	out     *bufio.Reader
	id      int
	session string
}

// openPage starts Chromium at a width × height window and opens url in it.
func openPage(t *testing.T, url string, width, height int) *browser {
	t.Helper()
	bin := need(t, "chromium", "chromium")
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", fmt.Sprintf("--window-size=%d,%d", width, height))
	cmd.ExtraFiles = []*os.File{cmdR, resW}
	// Its own process group, its output in a file: no renderer outlives the test holding
	// go test's stdout open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.Create(filepath.Join(t.TempDir(), "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	resW.Close()
	b := &browser{t: t, cmd: cmd, in: cmdW, out: bufio.NewReader(resR)}
	t.Cleanup(func() {
		cmdW.Close() // the browser quits when its pipe closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cancel()
			<-done
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cancel()
		resR.Close()
		log.Close()
	})
	var target struct{ TargetID string }
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct{ SessionID string }
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
	return b
}

// call sends one command and waits for its answer, skipping events.
func (b *browser) call(session, method string, params any, result any) {
	b.t.Helper()
	b.id++
	msg := map[string]any{"id": b.id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	m, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(m, 0)); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		line, err := b.out.ReadBytes(0)
		if err != nil {
			b.t.Fatalf("%s: reading the answer: %v", method, err)
		}
		var a struct {
			ID     int
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(line[:len(line)-1], &a); err != nil {
			b.t.Fatalf("%s: %v in %q", method, err, line)
		}
		if a.ID != b.id {
			continue // an event, or another session's
		}
		if a.Error != nil {
			b.t.Fatalf("%s: %s", method, a.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(a.Result, result); err != nil {
				b.t.Fatalf("%s: %v in %s", method, err, a.Result)
			}
		}
		return
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise) into v.
func (b *browser) eval(expr string, v any) {
	b.t.Helper()
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if r.ExceptionDetails != nil {
		b.t.Fatalf("%s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if v != nil {
		if err := json.Unmarshal(r.Result.Value, v); err != nil {
			b.t.Fatalf("%s: %v in %s", expr, err, r.Result.Value)
		}
	}
}

// waitRefreshed waits until the page has finished n refreshes (body's data-refreshed).
func (b *browser) waitRefreshed(n int, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var got string
		b.eval(`document.body ? (document.body.dataset.refreshed || "0") : "0"`, &got)
		var k int
		fmt.Sscan(got, &k)
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			var html string
			b.eval(`document.documentElement.outerHTML`, &html)
			b.t.Fatalf("the page did not finish %d refreshes in %v (%s done):\n%s", n, timeout, got, strings.TrimSpace(html))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
