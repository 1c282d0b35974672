package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slide-metrics/slide/internal/proctest"
)

// policies is the soak's policy file: two memory policies for the rate path and two usage
// rules that read the windows being written, so decisions race with ingest as in production.
// The allow workers ask for a tenth of the tenants, about 10 requests a second per key and
// body, so both policies allow some requests and deny others.
const policies = `policies:
  - name: api
    algorithm: token_bucket
    capacity: 10
    refill_per_second: 5
    backend: memory
  - name: window
    algorithm: sliding_counter
    limit: 50
    window: 10s
    backend: memory
rules:
  - name: quota
    metric: cost
    agg: sum
    window: 1h
    max: 1000000
  - name: shed-slow
    metric: latency_ms
    agg: p95
    window: 5m
    max: 800
`

// topic is the topic slide produce writes and slide serve reads by default.
const topic = "events"

// soak is one run: the processes, the load and what was measured.
type soak struct {
	cfg config
	out io.Writer

	dir        string
	bin        string
	broker     *proctest.Proc
	brokerAddr string
	serve      *proctest.Proc
	base       string // http://host:port of serve

	kafka       *kafka.Client // asks the broker for the log end, to measure lag independently of slide
	producerPID atomic.Int64  // the running produce process, 0 when none
	mon         monitor
}

// produceRun is one `slide produce` process and what it printed.
type produceRun struct {
	label  string
	target float64 // events/s asked for
	out    produceLine
}

// run performs the soak. An error means it could not be carried out (or was aborted) and
// the measurements are incomplete; broken promises are in the result's checks.
func (s *soak) run(ctx context.Context) (*result, error) {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	c := s.cfg
	res := &result{cfg: c}

	var err error
	if s.dir, err = os.MkdirTemp("", "slide-soak-"); err != nil {
		return nil, err
	}
	s.bin = c.bin
	if s.bin == "" {
		fmt.Fprintln(s.out, "soak: building ./cmd/slide")
		if s.bin, err = proctest.Build(s.dir); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(s.bin); err != nil {
		return nil, fmt.Errorf("--bin: %w", err)
	}
	polFile := filepath.Join(s.dir, "policies.yaml")
	if err := os.WriteFile(polFile, []byte(policies), 0o644); err != nil {
		return nil, fmt.Errorf("writing the policy file: %w", err)
	}

	// The broker, in its own process (see the package doc).
	if s.broker, err = proctest.StartProc("broker", s.bin, "broker", "--addr", "127.0.0.1:0",
		"--partitions", strconv.Itoa(c.partitions), "--log-level", "warn"); err != nil {
		return nil, err
	}
	line, err := s.broker.WaitOutput("broker listening on ", 15*time.Second)
	if err != nil {
		return nil, err
	}
	if s.brokerAddr = proctest.BrokerAddr(line); s.brokerAddr == "" {
		return nil, fmt.Errorf("no address in the broker's line %q", line)
	}
	s.kafka = &kafka.Client{Addr: kafka.TCP(s.brokerAddr), Timeout: 5 * time.Second}

	addr, err := proctest.FreeAddr()
	if err != nil {
		return nil, err
	}
	s.base = "http://" + addr
	if s.serve, err = proctest.StartProc("serve", s.bin, "serve", "--demo=false", "--addr", addr,
		"--brokers", s.brokerAddr, "--policies", polFile, "--log-level", "warn"); err != nil {
		return nil, err
	}
	if err := proctest.WaitStatus(ctx, s.base+"/readyz", http.StatusOK, 30*time.Second); err != nil {
		return nil, fmt.Errorf("serve did not become ready: %w", err)
	}
	if res.rssStart, err = proctest.RSSOf(s.serve.PID()); err != nil {
		return nil, err
	}
	res.series = int64(c.keys) * metricsPerKey
	res.bound = rssBound(res.rssStart, res.series)
	fmt.Fprintf(s.out, "soak: %s; broker %s (slide broker, %d partitions); serve %s\n", s.bin, s.brokerAddr, c.partitions, s.base)
	fmt.Fprintf(s.out, "soak: %d keys (%d series), %d /v1/window + %d /v1/allow workers, main run %s\n",
		c.keys, res.series, c.windowWorkers, c.allowWorkers, c.duration)
	fmt.Fprintf(s.out, "soak: RSS bound %s\n", res.boundFormula())

	// Everything from here on runs under the query load and the monitor.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	load := newLoad(s.base, c.keys)
	var wg sync.WaitGroup
	loadStart := time.Now()
	load.start(loadCtx, &wg, c.windowWorkers, c.allowWorkers)
	monCtx, stopMon := context.WithCancel(ctx)
	defer stopMon()
	monDone := make(chan struct{})
	go func() {
		defer close(monDone)
		s.monitorLoop(monCtx, abort, load)
	}()

	// The rate: flat out unless given or probed for.
	res.firstEvent = time.Now()
	target := c.rate
	if target == 0 && !c.probe {
		target = flatOut
	}
	if target == 0 {
		if target, err = s.probe(ctx, res); err != nil {
			stopLoad()
			wg.Wait()
			return nil, err
		}
	}

	// The main run, with serve's RSS sampled once after the warm-up.
	warm := min(warmUp, c.duration/2)
	warmTimer := time.AfterFunc(warm, func() {
		if v, err := proctest.RSSOf(s.serve.PID()); err == nil {
			s.mon.setWarm(v)
		}
	})
	fmt.Fprintf(s.out, "soak: main run: slide produce --rate %.0f --keys %d --duration %s\n", target, c.keys, c.duration)
	mainRun, err := s.produce(ctx, "main run", target, c.duration, 1)
	warmTimer.Stop()
	res.runs = append(res.runs, mainRun)
	if err != nil {
		stopLoad()
		wg.Wait()
		return nil, err
	}
	producedAt := time.Now()
	stopLoad()
	wg.Wait()
	res.loadTime = time.Since(loadStart)
	res.window, res.allow = load.results()

	// Drain: every produced event must arrive; time how long the lag takes to reach 0.
	for _, r := range res.runs {
		res.produced += r.out.sent
	}
	if err := s.drain(ctx, res, producedAt); err != nil {
		return nil, err
	}
	if err := s.count(res); err != nil {
		return nil, err
	}
	if res.rssEnd, err = proctest.RSSOf(s.serve.PID()); err != nil {
		return nil, err
	}
	stopMon()
	<-monDone
	m := s.mon.snapshot()
	res.maxLag, res.maxSlideLag, res.rssPeak, res.rssWarm, res.producerPeak = m.maxLag, m.maxSlideLag, max(m.peakRSS, res.rssEnd, res.rssStart), m.warmRSS, m.peakProducerRSS
	if b, err := proctest.RSSOf(s.broker.PID()); err == nil {
		res.brokerRSS = b
	}

	// SIGTERM: a clean exit is part of the promise.
	res.serveStopErr = s.serve.Stop(shutdownTimeout)
	res.serveLog = summarizeLog(s.serve.Output())
	if res.serveStopErr != nil || res.serveLog.errors > 0 {
		res.serveLogTail = proctest.Tail(s.serve.Output(), 4000)
	}
	return res, nil
}

// probe runs 2 s produce runs from probeStartRate, doubling while the producer keeps up, and
// returns the best delivered rate.
func (s *soak) probe(ctx context.Context, res *result) (float64, error) {
	fmt.Fprintf(s.out, "soak: rate probes: %s runs from %d events/s, doubling while ≥ %.0f%% is delivered\n",
		probeDuration, probeStartRate, keepUpShare*100)
	var best float64
	target := float64(probeStartRate)
	for i := range maxProbes {
		r, err := s.produce(ctx, fmt.Sprintf("probe %d", i+1), target, probeDuration, uint64(100+i))
		res.runs = append(res.runs, r)
		if err != nil {
			return 0, err
		}
		best = max(best, r.out.rate)
		kept := keptUp(target, r.out.rate)
		verdict := "kept up"
		if !kept {
			verdict = "fell behind"
		}
		fmt.Fprintf(s.out, "soak:   probe %d: target %s/s, delivered %s/s (%s)\n", i+1, comma(int64(target)), comma(int64(r.out.rate)), verdict)
		if !kept {
			break
		}
		target *= 2
	}
	res.probeBest = best
	return best, nil
}

// keptUp reports whether a run delivered at least keepUpShare of its target rate.
func keptUp(target, delivered float64) bool { return delivered >= keepUpShare*target }

// produce runs `slide produce` to completion and parses its summary line.
func (s *soak) produce(ctx context.Context, label string, rate float64, d time.Duration, seed uint64) (produceRun, error) {
	r := produceRun{label: label, target: rate}
	p, err := proctest.StartProc("produce", s.bin, "produce", "--brokers", s.brokerAddr,
		"--rate", strconv.FormatFloat(rate, 'f', 0, 64), "--keys", strconv.Itoa(s.cfg.keys),
		"--duration", d.String(), "--seed", strconv.FormatUint(seed, 10))
	if err != nil {
		return r, err
	}
	s.producerPID.Store(int64(p.PID()))
	defer s.producerPID.Store(0)
	done := make(chan error, 1)
	go func() { done <- p.Wait(d + drainTimeout) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		p.Kill()
		return r, fmt.Errorf("%s aborted: %w", label, context.Cause(ctx))
	}
	if !p.Exited() {
		p.Kill()
	}
	line, perr := parseProduce(p.Output())
	r.out = line
	if err != nil || perr != nil {
		return r, fmt.Errorf("%s (slide produce --rate %.0f --duration %s) failed: %w\n%s",
			label, rate, d, errors.Join(err, perr), indent(proctest.Tail(p.Output(), 2000), "  "))
	}
	return r, nil
}

// monitorLoop samples lag, events and RSS every second, prints progress every 10 s, and
// aborts the run when serve dies or the producer's RSS passes the guard.
func (s *soak) monitorLoop(ctx context.Context, abort context.CancelCauseFunc, load *load) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	start := time.Now()
	var lastEvents float64
	lastPrint := start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if s.serve.Exited() {
				abort(fmt.Errorf("serve exited during the run: %v", s.serve.Wait(time.Second)))
				return
			}
			if rss, err := proctest.RSSOf(s.serve.PID()); err == nil {
				s.mon.rss(rss)
			}
			if pid := s.producerPID.Load(); pid != 0 {
				if rss, err := proctest.RSSOf(int(pid)); err == nil {
					s.mon.producerRSS(rss)
					if rss > s.cfg.maxProducerRSS {
						abort(fmt.Errorf("the producer's RSS reached %s, past --max-producer-rss-mib", mib(rss)))
						return
					}
				}
			}
			lag, events, err := s.lag(ctx)
			if err != nil {
				continue // a slow scrape under load is not a failure; the counts at the end are
			}
			if now.Sub(lastPrint) >= 10*time.Second {
				m := s.mon.snapshot()
				w, a := load.counts()
				fmt.Fprintf(s.out, "soak: [%3.0fs] consumed %s (%s/s), lag %s, serve RSS %s, producer RSS %s, requests: window %s, allow %s\n",
					now.Sub(start).Seconds(), comma(int64(events)), comma(int64((events-lastEvents)/now.Sub(lastPrint).Seconds())),
					comma(int64(lag)), mib(m.lastRSS), mib(m.lastProducerRSS), comma(w), comma(a))
				lastEvents, lastPrint = events, now
			}
		}
	}
}

// lag samples the log end of the topic, then slide's metrics, and records both lags: the
// records in the log that slide_ingest_events_total does not count yet (every soak event is
// valid, so each record is one counted event), and slide_ingest_lag summed over partitions.
func (s *soak) lag(ctx context.Context) (logLag, events float64, err error) {
	end, err := s.logEnd(ctx)
	if err != nil {
		return 0, 0, err
	}
	expo, err := proctest.Scrape(s.base)
	if err != nil {
		return 0, 0, err
	}
	slideLag, _ := proctest.Metric(expo, "slide_ingest_lag")
	events, _ = proctest.Metric(expo, "slide_ingest_events_total")
	logLag = max(float64(end)-events, 0)
	s.mon.lag(logLag, slideLag)
	return logLag, events, nil
}

// logEnd is the sum of the topic's partitions' high watermarks: every record produced.
func (s *soak) logEnd(ctx context.Context) (int64, error) {
	reqs := make([]kafka.OffsetRequest, s.cfg.partitions)
	for p := range reqs {
		reqs[p] = kafka.LastOffsetOf(p)
	}
	resp, err := s.kafka.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return 0, fmt.Errorf("listing offsets: %w", err)
	}
	var end int64
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return 0, fmt.Errorf("listing offsets of partition %d: %w", po.Partition, po.Error)
		}
		end += po.LastOffset
	}
	return end, nil
}

// drain waits until the lag is 0 and slide_ingest_events_total reaches the produced count.
func (s *soak) drain(ctx context.Context, res *result, producedAt time.Time) error {
	var lastEvents float64 = -1
	lastChange := time.Now()
	for {
		lag, events, err := s.lag(ctx)
		if err == nil {
			if events != lastEvents {
				lastEvents, lastChange = events, time.Now()
			}
			if lag == 0 && int64(events) >= res.produced {
				res.drained, res.drainTime = true, time.Since(producedAt)
				return nil
			}
			if lag == 0 && time.Since(lastChange) > drainStall {
				res.drainTime = time.Since(producedAt)
				return nil // lost events: the count check reports them
			}
		}
		if time.Since(producedAt) > drainTimeout {
			res.drainTime = time.Since(producedAt)
			return nil
		}
		if s.serve.Exited() {
			return fmt.Errorf("serve exited while draining: %v", s.serve.Wait(time.Second))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("draining aborted: %w", context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// windowAnswer is the part of a /v1/window answer the count check reads.
type windowAnswer struct {
	From   int64 `json:"from"`
	Series int64 `json:"series"`
	Count  int64 `json:"count"`
}

// count reads what slide holds: the window counts over every key and the ingest counters.
func (s *soak) count(res *result) error {
	for _, m := range []string{"latency_ms", "cost"} {
		var a windowAnswer
		if err := proctest.GetJSON(s.base+"/v1/window?metric="+m+"&key=*&window=5m", &a); err != nil {
			return fmt.Errorf("reading the %s window over every key: %w", m, err)
		}
		res.windowCounts = append(res.windowCounts, metricCount{metric: m, count: a.Count, series: a.Series, from: a.From})
	}
	expo, err := proctest.Scrape(s.base)
	if err != nil {
		return err
	}
	f := func(name string) int64 { v, _ := proctest.Metric(expo, name); return int64(v) }
	res.eventsTotal = f("slide_ingest_events_total")
	res.rejected = f("slide_ingest_rejected_total")
	res.expired = f("slide_ingest_expired_total")
	res.seriesSeen = f("slide_ingest_series")
	res.rejectedBy = map[string]int64{}
	for _, line := range strings.Split(expo, "\n") {
		if rest, ok := strings.CutPrefix(line, `slide_ingest_rejected_total{reason="`); ok {
			reason, val, _ := strings.Cut(rest, `"} `)
			if v, err := strconv.ParseFloat(val, 64); err == nil && v > 0 {
				res.rejectedBy[reason] = int64(v)
			}
		}
	}
	return nil
}

// close stops whatever still runs and removes the temporary directory.
func (s *soak) close() {
	if s.serve != nil {
		s.serve.Kill()
	}
	if s.broker != nil && !s.broker.Exited() {
		if err := s.broker.Stop(10 * time.Second); err != nil {
			fmt.Fprintf(s.out, "soak: broker: %v\n", err)
		}
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// monitor holds what the sampling loop saw. Safe for concurrent use.
type monitor struct {
	mu sync.Mutex
	monitorSnapshot
}

type monitorSnapshot struct {
	maxLag, maxSlideLag              float64
	peakRSS, lastRSS, warmRSS        int64
	peakProducerRSS, lastProducerRSS int64
}

func (m *monitor) lag(logLag, slideLag float64) {
	m.mu.Lock()
	m.maxLag, m.maxSlideLag = max(m.maxLag, logLag), max(m.maxSlideLag, slideLag)
	m.mu.Unlock()
}

func (m *monitor) rss(v int64) {
	m.mu.Lock()
	m.peakRSS, m.lastRSS = max(m.peakRSS, v), v
	m.mu.Unlock()
}

func (m *monitor) setWarm(v int64) {
	m.mu.Lock()
	m.warmRSS = v
	m.peakRSS = max(m.peakRSS, v)
	m.mu.Unlock()
}

func (m *monitor) producerRSS(v int64) {
	m.mu.Lock()
	m.peakProducerRSS, m.lastProducerRSS = max(m.peakProducerRSS, v), v
	m.mu.Unlock()
}

func (m *monitor) snapshot() monitorSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.monitorSnapshot
}
