package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/slide-metrics/slide/event"
	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/backtest"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

func cmdBacktest(ctx context.Context, args []string, s stdio) error {
	fs := newFlagSet("backtest", s.out)
	var (
		policies, format, rings string
		eventMap                string
		plans                   string
		slot, reorder           time.Duration
		slots                   int
		cfg                     backtest.Config
	)
	fs.StringVar(&policies, "policies", "", "YAML policy `FILE` (the format of slide serve --policies); required")
	fs.StringVar(&plans, "plans", "", "YAML plans `FILE` (the format of slide serve --plans): each key replays with its plan's numbers")
	fs.StringVar(&format, "format", "text", "output: text, or json (one object per policy)")
	fs.IntVar(&cfg.TopKeys, "top", backtest.DefaultTopKeys, "how many of the most denied keys to list per policy")
	fs.DurationVar(&cfg.Bucket, "bucket", backtest.DefaultBucket, "width of the denial timeline's buckets")
	fs.DurationVar(&reorder, "reorder", 0, "replay a log out of time order by up to this much in time order (a log written as requests end, stamped with their start: Envoy's, nginx's), holding that much of it; 0: the log must be sorted")
	windowVar(fs, &slot, "slot", window.DefaultSlot, "usage rules: slot width of every metric's ring (as slide serve --slot)")
	fs.IntVar(&slots, "slots", window.DefaultSlots, "usage rules: slots per ring (as slide serve --slots)")
	fs.StringVar(&rings, "rings", DefaultRings, "usage rules: per-metric rings METRIC=SLOT:SLOTS[:SKETCH][+SLOT:SLOTS...],... (as slide serve --rings)")
	fs.StringVar(&eventMap, "event-map", "", "read the log through an event map (envoy, nginx or a YAML `FILE`, as slide serve --event-map): each line is a request of cost 1 by its key at its time, and its events are metric events")
	var spans eventFormatFlags
	spans.register(fs)
	path, err := parseBatchArgs(fs, args)
	if err != nil {
		return err
	}
	usageErr := func(f string, a ...any) error { return usagef(fs, f, a...) }
	switch {
	case path == "":
		return usageErr("missing REQUESTS file (or - for stdin)")
	case policies == "":
		return usageErr("missing --policies FILE")
	case format != "text" && format != "json":
		return flagErrorf(fs, "format", "want text or json") // SLIDE_FORMAT=... when it came from there
	case cfg.TopKeys < 0 || cfg.Bucket < time.Millisecond:
		return usageErr("--top must be ≥ 0 and --bucket ≥ 1ms")
	case reorder < 0:
		return flagErrorf(fs, "reorder", "must not be negative")
	}
	read := backtest.ReadLog
	spanFormat, err := spans.newFormat(limiter.MaxKeyLen)
	switch {
	case logsFormats[spans.format] != nil:
		return flagErrorf(fs, "event-format", "%s is read by slide serve; replay the access log's JSON lines themselves with --event-map alone", spans.format)
	case err != nil:
		return asFlagError(fs, err)
	case spanFormat != nil && eventMap != "":
		return usageErr("--event-map reads JSON lines of its own shape: not with --event-format %s", spans.format)
	case spanFormat != nil: // OTLP spans: each a request of its key and a duration_ms event
		f, err := spanFormat()
		if err != nil {
			return err
		}
		read = func(r io.Reader, fn func(backtest.Request) error) error {
			return backtest.ReadSpans(r, f, spans.format == formatOTLPProto || spans.format == formatZipkinPB, fn)
		}
	case eventMap != "":
		newFormat, err := eventMapFormat(eventMap, event.Config{MaxKeyLen: limiter.MaxKeyLen})
		if err != nil {
			return err
		}
		f, err := newFormat()
		if err != nil {
			return err
		}
		read = func(r io.Reader, fn func(backtest.Request) error) error { return backtest.ReadFormatLog(r, f, fn) }
	}
	ps, rules, err := usage.LoadFile(policies)
	if err != nil {
		return err
	}
	if len(ps) == 0 && len(rules) == 0 {
		return fmt.Errorf("%s: no policies or rules to replay", policies)
	}
	cfg.Policies, cfg.Rules = ps, rules
	if plans != "" {
		if cfg.Plans, err = limiter.LoadPlans(plans); err != nil {
			return err
		}
	}
	mr, err := parseMetricRings(rings)
	if err != nil {
		return usageErr("--rings: %v", err)
	}
	cfg.Store = window.StoreConfig{Ring: window.RingConfig{Slot: slot, Slots: slots}, Metrics: mr}
	rp, err := backtest.New(cfg)
	if err != nil {
		return err
	}
	var in io.Reader = s.in
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	n := 0
	inOrder := backtest.NewReorder(reorder, func(r backtest.Request) error { return rp.Replay(ctx, r) })
	err = read(in, func(r backtest.Request) error {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return inOrder.Add(r)
	})
	if err == nil {
		err = inOrder.Flush()
	}
	if err == nil && n == 0 {
		// As slide batch: an export that came out empty is a failure upstream, not a week
		// in which nothing was denied.
		return fmt.Errorf("%s: no requests in the log", path)
	}
	if err != nil {
		if errors.Is(err, backtest.ErrUnsorted) && reorder == 0 {
			// An access log is written as requests end: nearly sorted, which --reorder takes.
			err = fmt.Errorf("%w; a log written as requests end (Envoy's, nginx's) replays with --reorder as long as its slowest request, e.g. --reorder 1m", err)
		}
		if errors.Is(err, backtest.ErrLog) || errors.Is(err, backtest.ErrUnsorted) || errors.Is(err, backtest.ErrUnknownPolicy) {
			return fmt.Errorf("%s: %w", path, err)
		}
		return err
	}
	reports := rp.Reports()
	if len(rp.Refused) > 0 {
		fmt.Fprintf(s.err, "slide backtest: %d metric events recorded, refused: %v\n", rp.Events, rp.Refused)
	}
	if format == "json" {
		for _, r := range reports {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(s.out, "%s\n", b)
		}
		return nil
	}
	byName := map[string]limiter.Policy{}
	for _, p := range ps {
		byName[p.Name] = p
	}
	for _, r := range reports {
		desc := r.Algorithm
		if p, ok := byName[r.Policy]; ok {
			desc = describePolicy(p)
		}
		kind := "policy"
		if _, ok := byName[r.Policy]; !ok {
			kind = "rule"
		}
		fmt.Fprintf(s.out, "%s %s (%s): %d requests, %d allowed, %d denied", kind, r.Policy, desc,
			r.Requests, r.Allowed, r.Denied)
		if r.OverQuota > 0 {
			fmt.Fprintf(s.out, " (%d above the quota)", r.OverQuota)
		}
		if r.Shadow {
			fmt.Fprint(s.out, " (shadow: would deny)")
		}
		fmt.Fprintln(s.out)
		if len(r.TopDenied) > 0 {
			parts := make([]string, len(r.TopDenied))
			for i, k := range r.TopDenied {
				parts[i] = fmt.Sprintf("%s %d", k.Key, k.Denied)
				if k.Plan != "" {
					parts[i] = fmt.Sprintf("%s (%s) %d", k.Key, k.Plan, k.Denied)
				}
			}
			fmt.Fprintf(s.out, "  most denied keys: %s\n", strings.Join(parts, ", "))
		}
		for _, b := range r.Timeline {
			fmt.Fprintf(s.out, "  %s  %d denied, %d allowed\n", b.Start.Format(time.RFC3339), b.Denied, b.Allowed)
		}
	}
	return nil
}

// describePolicy is "sliding_log 100/1m0s" or "token_bucket 10 +5/s".
func describePolicy(p limiter.Policy) string {
	switch p.Algorithm {
	case limiter.TokenBucket:
		return fmt.Sprintf("%s %d +%g/s", p.Algorithm, p.Capacity, p.RefillPerSecond)
	case limiter.LeakyBucket:
		return fmt.Sprintf("%s %d +%g/s", p.Algorithm, p.Capacity, p.LeakPerSecond)
	}
	per := p.Window.String()
	if p.Calendar != 0 {
		per = p.Calendar.String()
		if p.Location != nil && p.Location != time.UTC {
			per += " " + p.Location.String()
		}
	}
	if p.Levels.N > 0 {
		l := make([]string, p.Levels.N)
		for i, v := range p.Levels.Limits[:p.Levels.N] {
			l[i] = fmt.Sprint(v)
		}
		return fmt.Sprintf("%s %s/%s by level", p.Algorithm, strings.Join(l, p.Levels.Separator), per)
	}
	return fmt.Sprintf("%s %d/%s", p.Algorithm, p.Limit, per)
}
