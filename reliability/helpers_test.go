package reliability_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slide-metrics/slide/ingest"
	"github.com/slide-metrics/slide/internal/polltest"
	"github.com/slide-metrics/slide/internal/proctest"
	"github.com/slide-metrics/slide/window"
)

// slideBin is the slide binary under test, built once by TestMain.
var slideBin string

func TestMain(m *testing.M) {
	if os.Getenv(measureRSSEnv) != "" { // the test binary as a launcher: see measureRSS
		os.Exit(measureRSS(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "slide-reliability-")
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

const metric = "latency_ms"

// slide is one `slide serve` process and its HTTP base URL.
type slide struct {
	*proctest.Proc
	base string
}

// startSlide runs `slide serve` against brokers in group, on a free port, and waits until
// its HTTP server answers /healthz (not /readyz: callers decide what ready means).
func startSlide(t *testing.T, name, brokers, group string, extra ...string) *slide {
	t.Helper()
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--brokers", brokers, "--group", group, "--addr", addr, "--log-level", "info"}, extra...)
	s := &slide{Proc: proctest.Start(t, name, slideBin, args...), base: "http://" + addr}
	if err := proctest.WaitStatus(context.Background(), s.base+"/healthz", 200, 20*time.Second); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// partitions lists the partitions this instance owns now, from its lag gauges.
func (s *slide) partitions(t *testing.T) []int {
	t.Helper()
	text, err := proctest.Scrape(s.base)
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	var out []int
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, `slide_ingest_lag{partition="`)
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, `"`)
		p, err := strconv.Atoi(n)
		if err == nil {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// metric sums a metric of this instance's /metrics.
func (s *slide) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	text, err := proctest.Scrape(s.base)
	if err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	v, _ := proctest.Metric(text, name, labels...)
	return v
}

// caughtUp reports whether the instance is ready, has restored every partition it owns
// (once ready, /readyz stays 200 while a rebalance's gains restore) and has read each to
// the end of the log (lag 0 everywhere).
func (s *slide) caughtUp(t *testing.T) bool {
	t.Helper()
	code, _, err := proctest.Get(s.base + "/readyz")
	if err != nil || code != 200 {
		return false
	}
	return len(s.partitions(t)) > 0 && s.metric(t, "slide_ingest_partitions", `state="restoring"`) == 0 &&
		s.metric(t, "slide_ingest_lag") == 0
}

// eventually polls cond every 50 ms until it holds or timeout passes, then fails with what.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	polltest.Eventually(t, timeout, 50*time.Millisecond, cond, func() string { return what })
}

// event is one produced latency event, as the oracle remembers it.
type event struct {
	key   string
	ts    int64
	value float64
}

// oracle is every event produced, by key. Safe for concurrent use.
type oracle struct {
	mu    sync.Mutex
	byKey map[string][]event
	n     int
}

func newOracle() *oracle { return &oracle{byKey: map[string][]event{}} }

func (o *oracle) add(evs []event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range evs {
		o.byKey[ev.key] = append(o.byKey[ev.key], ev)
	}
	o.n += len(evs)
}

func (o *oracle) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

func (o *oracle) keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ks := make([]string, 0, len(o.byKey))
	for k := range o.byKey {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// exact is the oracle's answer for one key over [from, to).
type exact struct {
	count         int
	sum, min, max float64
	values        []float64 // sorted
}

func (o *oracle) over(key string, from, to int64) exact {
	o.mu.Lock()
	defer o.mu.Unlock()
	var x exact
	for _, ev := range o.byKey[key] {
		if ev.ts < from || ev.ts >= to {
			continue
		}
		if x.count == 0 || ev.value < x.min {
			x.min = ev.value
		}
		if x.count == 0 || ev.value > x.max {
			x.max = ev.value
		}
		x.count++
		x.sum += ev.value
		x.values = append(x.values, ev.value)
	}
	slices.Sort(x.values)
	return x
}

// quantile is the value of rank floor(q × (count − 1)), the rank the sketches estimate.
func (x exact) quantile(q float64) float64 { return x.values[int(q*float64(x.count-1))] }

// windowAnswer is the part of a /v1/window answer the oracle checks.
type windowAnswer struct {
	From, To  int64
	Series    int
	Count     int
	Sum       float64
	Min, Max  *float64
	Quantiles map[string]*float64
}

var quantiles = []float64{0.5, 0.95, 0.99}

func (s *slide) window(key, win string) (windowAnswer, error) {
	var a windowAnswer
	q := url.Values{"metric": {metric}, "key": {key}, "window": {win}, "q": {"0.5,0.95,0.99"}}
	err := proctest.GetJSON(s.base+"/v1/window?"+q.Encode(), &a)
	return a, err
}

// mismatch compares one key's answer with the oracle over the answer's own span: counts,
// sums, minima and maxima exactly (values are whole numbers, so float sums are exact in any
// order), quantiles within DDSketch's 1%. It returns "" when they agree.
func mismatch(o *oracle, key string, a windowAnswer) string {
	x := o.over(key, a.From, a.To)
	var errs []string
	if a.Count != x.count {
		errs = append(errs, fmt.Sprintf("count %d, oracle %d (%+d)", a.Count, x.count, a.Count-x.count))
	}
	if a.Sum != x.sum {
		errs = append(errs, fmt.Sprintf("sum %v, oracle %v", a.Sum, x.sum))
	}
	if x.count > 0 {
		if a.Min == nil || a.Max == nil || *a.Min != x.min || *a.Max != x.max {
			errs = append(errs, fmt.Sprintf("min/max %v/%v, oracle %v/%v", deref(a.Min), deref(a.Max), x.min, x.max))
		}
		for _, q := range quantiles {
			got, want := a.Quantiles[strconv.FormatFloat(q, 'f', -1, 64)], x.quantile(q)
			if got == nil || math.Abs(*got-want) > 0.01*want+1e-9 {
				errs = append(errs, fmt.Sprintf("p%v %v, oracle %v", q*100, deref(got), want))
			}
		}
	}
	if len(errs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s over [%d, %d): %s", key, a.From, a.To, strings.Join(errs, "; "))
}

func deref(p *float64) any {
	if p == nil {
		return "null"
	}
	return *p
}

// checkAll asks each key of the oracle from every instance given and compares: with
// several instances in one group, each answers every key (its own partitions' series and
// its peers'), equal to the oracle. A 503 (an owner's view or restore still settling) is
// retried for a few seconds; a 404 or a wrong answer fails.
func checkAll(t *testing.T, o *oracle, win string, instances ...*slide) {
	t.Helper()
	bad := 0
	for _, key := range o.keys() {
		for _, s := range instances {
			a, err := s.window(key, win)
			for deadline := time.Now().Add(10 * time.Second); ; {
				se, ok := err.(*proctest.StatusError)
				if !ok || se.Code != 503 || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
				a, err = s.window(key, win)
			}
			if err != nil {
				t.Fatalf("%s: reading %s: %v", s.Name, key, err)
			}
			if m := mismatch(o, key, a); m != "" {
				bad++
				if bad <= 10 {
					t.Errorf("%s: %s", s.Name, m)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("… %d keys disagree with the oracle in all", bad)
	}
}

// traffic produces latency events at a steady pace through the real kafka-go producer and
// records each in the oracle once the broker acknowledged its batch.
type traffic struct {
	p    *ingest.Producer
	o    *oracle
	rng  *rand.Rand
	keys int
}

func newTraffic(t *testing.T, brokers string, o *oracle, keys int, seed uint64) *traffic {
	t.Helper()
	p, err := ingest.NewProducer(ingest.ProducerConfig{Brokers: []string{brokers}, BatchTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &traffic{p: p, o: o, rng: rand.New(rand.NewPCG(seed, 1)), keys: keys}
}

// run produces perTick events every 10 ms until ctx ends or d passes, then flushes. Every
// event is acknowledged before run returns (it fails the test otherwise), so the oracle
// holds exactly what the broker has.
func (tr *traffic) run(t *testing.T, ctx context.Context, d time.Duration, perTick int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	evs := make([]window.Event, perTick)
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case now := <-tick.C:
			batch := make([]event, perTick)
			for i := range evs {
				k := fmt.Sprintf("k-%03d", tr.rng.IntN(tr.keys))
				v := float64(1 + tr.rng.IntN(2000)) // whole ms: exact float sums
				evs[i] = window.Event{TS: now.UnixMilli(), Metric: metric, Key: k, Value: v}
				batch[i] = event{key: k, ts: now.UnixMilli(), value: v}
			}
			// Not ctx: a send must not fail half done because the run ended meanwhile
			// (some records queued, none in the oracle).
			if err := tr.p.SendEvents(context.Background(), evs); err != nil {
				t.Errorf("producing: %v", err)
				return
			}
			tr.o.add(batch)
		}
	}
}

// close flushes the producer and checks the broker acknowledged every event.
func (tr *traffic) close(t *testing.T) {
	t.Helper()
	if err := tr.p.Close(); err != nil {
		t.Fatalf("closing the producer: %v", err)
	}
	st := tr.p.Stats()
	if st.Failed != 0 || int(st.Sent) != tr.o.count() {
		t.Fatalf("producer: %d acknowledged, %d failed (%v); oracle holds %d", st.Sent, st.Failed, st.LastErr, tr.o.count())
	}
}

// memoryBudget is the RSS slide may reach from baseline with series live: every series full
// (32 KiB each, well above the measured 13 KB), plus four partitions' 10 MiB fetch buffers,
// doubled for the garbage collector. It does not depend on how much the log holds.
func memoryBudget(baseline int64, series int) int64 {
	return baseline + int64(series)*32<<10 + 2*4*10<<20
}
