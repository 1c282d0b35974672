package reliability_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/internal/proctest"
)

// Slow consumer: the broker holds a backlog of 10× the retention (600 s of events for a
// 60 s window; 60 s rather than 30 s so that writing and producing the backlog on a loaded
// machine cannot outlast the retention and leave nothing to restore), written as history (each record at its event's time), and slide reads it
// over a link throttled to 4 MiB/s. slide seeks each partition to now − retention, so it
// reads only the tail; its memory stays within a budget that does not depend on the backlog;
// /readyz and slide_ingest_lag report the restore while it runs; the windows then equal the
// oracle.
func TestBacklogRestoresInBoundedMemory(t *testing.T) {
	const (
		retention = 60 * time.Second
		backlog   = 10 * retention
		perSecond = 3000 // events per second of event time
		keys      = 1000
	)
	// The proxy listens first: the broker must advertise its address.
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	brokerAddr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	brokerProc(t, "--addr", brokerAddr, "--advertise", pln.Addr().String())
	proxy := startThrottle(t, pln, brokerAddr)
	brokers := pln.Addr().String()

	// History: 600 s of events at 3,000/s ending now, replayed with their own timestamps.
	o := newOracle()
	end := time.Now().UnixMilli()
	path := filepath.Join(t.TempDir(), "backlog.ndjson")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(3, 3))
	n := int(backlog.Seconds()) * perSecond
	batch := make([]event, 0, n)
	var buf []byte
	for i := range n {
		ev := event{
			key:   "k-" + strconv.Itoa(rng.IntN(keys)),
			ts:    end - backlog.Milliseconds() + int64(i)*backlog.Milliseconds()/int64(n),
			value: float64(1 + rng.IntN(2000)),
		}
		batch = append(batch, ev)
		// strconv, not fmt: under -race fmt made writing the backlog eat most of the retention.
		buf = strconv.AppendInt(append(buf[:0], `{"ts":`...), ev.ts, 10)
		buf = strconv.AppendQuote(append(buf, `,"metric":`...), metric)
		buf = strconv.AppendQuote(append(buf, `,"key":`...), ev.key)
		buf = strconv.AppendFloat(append(buf, `,"value":`...), ev.value, 'g', -1, 64)
		buf = append(buf, "}\n"...)
		w.Write(buf)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	o.add(batch)
	st, _ := os.Stat(path)
	prod := proctest.Start(t, "produce", slideBin, "produce", "--brokers", brokers, "--file", path, "--timestamps", "event")
	if err := prod.Wait(2 * time.Minute); err != nil {
		t.Fatalf("slide produce: %v\n%s", err, prod.Output())
	}
	if want := fmt.Sprintf("sent %d records", n); !strings.Contains(prod.Output(), want) {
		t.Fatalf("slide produce did not say %q:\n%s", want, prod.Output())
	}

	// slide comes up behind a slow link.
	proxy.setRate(4 << 20)
	s := startSlide(t, "slide", brokers, "backlog", "--slot", "1s", "--slots", "60", "--rings", "")
	baseline, err := s.RSS()
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		at     time.Duration
		status int
		done   []float64
		lag    float64
		lagSec float64
		rss    int64
	}
	var samples []sample
	start := time.Now()
	for {
		code, body, err := proctest.Get(s.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		sm := sample{at: time.Since(start), status: code, lag: s.metric(t, "slide_ingest_lag"), lagSec: s.metric(t, "slide_ingest_lag_seconds")}
		sm.rss, _ = s.RSS()
		if code == 503 {
			sm.done = restoreDone(string(body))
		}
		samples = append(samples, sm)
		if code == 200 {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("not ready after a minute; last /readyz: %s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	restoreTook := time.Since(start)
	eventually(t, 30*time.Second, "slide did not catch up", func() bool { return s.caughtUp(t) })
	checkAll(t, o, "60s", s)

	// Progress was reported while the restore ran: assigned partitions with a share done
	// below 1 that grew, and a positive lag.
	var restoring, grew int
	var lastDone, maxLag, maxLagSec float64
	var peak int64
	for _, sm := range samples {
		peak = max(peak, sm.rss)
		maxLag = max(maxLag, sm.lag)
		maxLagSec = max(maxLagSec, sm.lagSec)
		if len(sm.done) == 0 {
			continue
		}
		avg := 0.0
		for _, d := range sm.done {
			avg += d / float64(len(sm.done))
		}
		if avg < 1 {
			restoring++
		}
		if avg > lastDone && lastDone > 0 {
			grew++
		}
		lastDone = avg
	}
	if restoring < 3 || grew < 2 || maxLag == 0 || maxLagSec < 1 {
		t.Errorf("restore progress not reported: %d samples restoring, %d with progress, max lag %v records, %v s", restoring, grew, maxLag, maxLagSec)
	}
	if l := s.metric(t, "slide_ingest_lag_seconds"); l != 0 {
		t.Errorf("caught up, slide_ingest_lag_seconds is %v, want 0", l)
	}
	// Memory: none of the budget depends on the backlog's size.
	budget := memoryBudget(baseline, keys)
	read := s.metric(t, "slide_ingest_bytes_total")
	if peak > budget {
		t.Errorf("peak RSS %d MiB over the budget %d MiB", peak>>20, budget>>20)
	}
	t.Logf("backlog: %d events, %d MiB over %s (10× the %s retention); slide read %.0f MiB of it at 4 MiB/s, ready after %.1f s; "+
		"%d samples while restoring, max lag %.0f records / %.1f s; RSS %d MiB at start, peak %d MiB (budget %d MiB)",
		n, st.Size()>>20, backlog, retention, read/(1<<20), restoreTook.Seconds(), restoring, maxLag, maxLagSec, baseline>>20, peak>>20, budget>>20)
}

// restoreDone extracts each partition's share done from a 503 /readyz body, whose message
// ends with the consumer's progress as JSON.
func restoreDone(body string) []float64 {
	var e struct {
		Error struct{ Message string }
	}
	if json.Unmarshal([]byte(body), &e) != nil {
		return nil
	}
	_, js, ok := strings.Cut(e.Error.Message, "restoring windows from Kafka: ")
	if !ok {
		return nil
	}
	var p struct {
		Partitions []struct{ Done float64 }
	}
	if json.Unmarshal([]byte(js), &p) != nil {
		return nil
	}
	var out []float64
	for _, pp := range p.Partitions {
		out = append(out, pp.Done)
	}
	return out
}
