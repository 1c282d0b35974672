package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
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
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Int("max-series", 1, "")
	err := parseFlagsEnv(fs, nil, lookup)
	if err == nil || err.Error() != "SLIDE_MAX_SERIES=lots: want a whole number" {
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

func TestServeEndToEndAndGracefulStop(t *testing.T) {
	addr, kafkaAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb proctest.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--embedded-kafka-addr", kafkaAddr, "--embedded-kafka-partitions", "2"},
			stdio{strings.NewReader(""), io.Discard, &errb})
	}()
	base := "http://" + addr
	resp := waitHTTP(t, base+"/healthz")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}

	// Events through Kafka (the embedded broker, a real kafka-go producer) and over HTTP.
	now := time.Now().UnixMilli()
	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: []string{kafkaAddr}, BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var evs []window.Event
	for i := range 50 {
		evs = append(evs, window.Event{TS: now, Metric: "latency_ms", Key: "tenant-k", Value: float64(i + 1)})
	}
	if err := p.SendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	post, err := http.Post(base+"/v1/events", "application/x-ndjson", strings.NewReader(
		fmt.Sprintf(`{"ts":%d,"key":"tenant-h","metric":"latency_ms","value":5}`+"\n"+`{"key":"tenant-h","metric":"latency_ms","value":"x"}`+"\n", now)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(post.Body)
	post.Body.Close()
	if post.StatusCode != 200 || !strings.Contains(string(body), `"accepted":1`) || !strings.Contains(string(body), "bad_field") {
		t.Fatalf("POST /v1/events: %d %s", post.StatusCode, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp := waitHTTP(t, base+"/v1/window?metric=latency_ms&key=tenant-*&window=1m&q=0.5")
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `"count":51`) && strings.Contains(string(body), `"series":2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kafka and HTTP events never showed up together in /v1/window: %s\n%s", body, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp = waitHTTP(t, base+"/metrics")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"go_goroutines", "process_start_time_seconds", "slide_ingest_events_total"} {
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
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
	if !strings.Contains(errb.String(), "left consumer group") {
		t.Errorf("the consumer did not leave its group on shutdown:\n%s", errb.String())
	}
	// The log tells the shutdown in the order it happens: stopped is the last line.
	logs := strings.TrimRight(errb.String(), "\n")
	left, stopped := strings.Index(logs, "left consumer group"), strings.LastIndex(logs, "\n")
	if left < 0 || !strings.HasSuffix(logs, "level=INFO msg=stopped") || stopped < left {
		t.Errorf("shutdown log out of order (want ... left consumer group ... stopped, last):\n%s", logs)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int // 2: a flag's value is wrong (checked before anything starts); 1: its file is
	}{
		{[]string{"serve", "--sketch", "tdigest"}, 2},
		{[]string{"serve", "--rings", "cost=1m"}, 2},
		{[]string{"serve", "--policies", "/nonexistent/policies.yaml"}, 1},
		{[]string{"serve", "--export-windows", "latency_ms:7"}, 2},
		{[]string{"serve", "--export-exemplars", "--export-histograms", "latency_ms:5m"}, 2}, // without --exemplars
		{[]string{"serve", "--export-exemplars", "--exemplars"}, 2},                          // without --export-histograms
	} {
		args := c.args
		code, _, errOut := runCmd(t, context.Background(), "", append(args, "--addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0")...)
		if code != c.code || !strings.Contains(errOut, args[1]) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %s", args, code, errOut, c.code, args[1])
		}
	}
}
