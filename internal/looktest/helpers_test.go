package looktest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
)

// slideBin is the slide binary under test, built once by TestMain.
var slideBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "slide-looktest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	slideBin, err = proctest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// need returns the path of a program the test cannot run without, or fails saying how to
// install it: no skip hides a missing Prometheus or browser.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		t.Fatalf("%s is not installed: run `make deps` (as root it runs apt-get install %s)", prog, pkg)
	}
	return p
}

// serve runs `slide serve` with its embedded broker on free ports and waits until it is
// ready; it returns the HTTP base URL.
func serve(t *testing.T, extra ...string) string {
	t.Helper()
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	kafka, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--addr", addr, "--embedded-kafka-addr", kafka, "--embedded-kafka-partitions", "1"}, extra...)
	proctest.Start(t, "slide", slideBin, args...)
	base := "http://" + addr
	if err := proctest.WaitStatus(context.Background(), base+"/readyz", 200, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return base
}

// post sends NDJSON events to POST /v1/events and fails unless all are accepted.
func post(t *testing.T, base string, lines []string) {
	t.Helper()
	body := strings.Join(lines, "\n") + "\n"
	resp, err := http.Post(base+"/v1/events", "application/x-ndjson", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(b.String(), fmt.Sprintf(`"accepted":%d`, len(lines))) {
		t.Fatalf("POST /v1/events: %d %s", resp.StatusCode, b.String())
	}
}

// eventually polls cond every 100 ms until it holds or timeout passes, then fails with what.
func eventually(t *testing.T, timeout time.Duration, what func() string, cond func() bool) {
	t.Helper()
	polltest.Eventually(t, timeout, 100*time.Millisecond, cond, what)
}
