package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func runCmd(t *testing.T, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(ctx, args, stdio{strings.NewReader(stdin), &out, &errb})
	return code, out.String(), errb.String()
}

func TestVersionAndUnknownCommand(t *testing.T) {
	if code, out, _ := runCmd(t, context.Background(), "", "version"); code != 0 || out != "slide dev\n" {
		t.Fatalf("version: code %d, out %q", code, out)
	}
	code, _, errOut := runCmd(t, context.Background(), "", "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "batch") {
		t.Fatalf("unknown command: code %d, stderr %q", code, errOut)
	}
}

func TestEnvironmentSetsFlagsAndCommandLineWins(t *testing.T) {
	env := map[string]string{"SLIDE_ADDR": "10.0.0.1:9", "SLIDE_MAX_SERIES": "7"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("addr", "127.0.0.1:8080", "")
	maxSeries := fs.Int("max-series", 1, "")
	if err := parseFlagsEnv(fs, []string{"--addr", "127.0.0.1:1"}, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:1" || *maxSeries != 7 {
		t.Fatalf("addr %q (command line must win), max-series %d (from SLIDE_MAX_SERIES)", *addr, *maxSeries)
	}
	env["SLIDE_MAX_SERIES"] = "lots"
	err := parseFlagsEnv(fs, nil, lookup)
	if err == nil || !strings.Contains(err.Error(), "SLIDE_MAX_SERIES") {
		t.Fatalf("a bad environment value must name the variable: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP polls url until it answers or the deadline passes.
func waitHTTP(t *testing.T, url string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeHealthMetricsAndGracefulStop(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr}, stdio{strings.NewReader(""), io.Discard, &errb})
	}()
	resp := waitHTTP(t, "http://"+addr+"/healthz")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}
	resp = waitHTTP(t, "http://"+addr+"/metrics")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"go_goroutines", "process_start_time_seconds"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cancel() // what SIGTERM does through signal.NotifyContext
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after shutdown: %s", code, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}
