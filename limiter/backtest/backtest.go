package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/slide-metrics/slide/limiter"
	"github.com/slide-metrics/slide/limiter/usage"
	"github.com/slide-metrics/slide/window"
)

// Request is one recorded request: its time (the replay's now), key, cost (units spent; 0
// peeks, as in the server; ReadLog fills in 1 when the log has no cost) and, optionally, the
// one policy it was checked against ("" means every policy of the replay).
// Line is where it was read (1-based; 0 when it did not come from a file).
//
// A Request with Metric set is a metric event instead (Key's series of Metric gets Value at
// Time, Count times: 0 means 1, as in window.Event), which the usage rules read: it is
// recorded, not decided.
type Request struct {
	Time   time.Time
	Key    string
	Cost   int64
	Policy string
	Line   int64
	Metric string
	Value  float64
	Count  uint64
}

// Defaults of Config.
const (
	DefaultTopKeys = 10
	DefaultBucket  = time.Minute
)

// Config is a replay. Zero fields take the documented defaults.
type Config struct {
	// Policies are replayed side by side, each with its own in-memory state (the memory
	// backend's algorithms, which the Redis scripts mirror; a policy's backend is ignored).
	Policies []limiter.Policy
	// TopKeys is how many of the most denied keys each report lists; default 10.
	TopKeys int
	// Bucket is the width of the denial timeline's buckets, aligned to the Unix epoch;
	// default 1 minute.
	Bucket time.Duration
	// MaxKeys bounds the keys each policy holds (limiter.MemoryConfig.MaxKeys); default 1<<20.
	MaxKeys int
	// OnDecision, when set, sees every decision in replay order (err is
	// limiter.ErrCostOverLimit for a cost above the quota, which is counted as denied).
	OnDecision func(r Request, policy string, d limiter.Decision, err error)
	// Rules are usage rules (the "rules" of a policy file), replayed beside the policies:
	// the log's metric events are recorded into a window store with Store's rings (give
	// the rings slide serve runs with, so the windows are the same), each at its own time,
	// and each request is checked against the rules as the server would at its time.
	Rules []usage.Rule
	Store window.StoreConfig
	// Plans, when set, give each request's key its plan's numbers (limiter.Plans), as
	// slide serve --plans does; every name a plan lists must be a policy or rule here.
	Plans *limiter.Plans
}

// Validate reports a config New would refuse.
func (c *Config) Validate() error {
	if len(c.Policies) == 0 && len(c.Rules) == 0 {
		return errors.New("backtest: no policies or rules")
	}
	if c.TopKeys < 0 || c.Bucket < 0 || c.MaxKeys < 0 {
		return errors.New("backtest: negative top keys, bucket or max keys")
	}
	if c.Bucket > 0 && c.Bucket < time.Millisecond {
		return errors.New("backtest: bucket below 1ms")
	}
	for i := range c.Policies {
		if err := c.Policies[i].Validate(); err != nil {
			return err
		}
		for _, q := range c.Policies[:i] {
			if q.Name == c.Policies[i].Name {
				return fmt.Errorf("backtest: policy %q listed twice", q.Name)
			}
		}
	}
	return nil
}

// ErrUnsorted: a request earlier than the one before it. The limiters' clocks only go
// forward, so a replay needs the log in time order (slide never reorders it silently).
var ErrUnsorted = errors.New("request earlier than the previous one (the log must be sorted by time)")

// ErrUnknownPolicy: a request names a policy that is not in the replay.
var ErrUnknownPolicy = errors.New("unknown policy")

// KeyCount is a key and how many of its requests a policy denied.
type KeyCount struct {
	Key    string `json:"key"`
	Plan   string `json:"plan,omitempty"` // the key's plan (Config.Plans)
	Denied int64  `json:"denied"`
}

// Bucket is one interval of the denial timeline.
type Bucket struct {
	Start   time.Time `json:"start"`
	Allowed int64     `json:"allowed"`
	Denied  int64     `json:"denied"`
}

// Report is one policy's outcome. Denied counts every request the policy would refuse: for a
// shadow policy those it would have denied (Shadowed), and requests whose cost is above the
// quota (also in OverQuota).
type Report struct {
	Policy    string     `json:"policy"`
	Algorithm string     `json:"algorithm"`
	Shadow    bool       `json:"shadow,omitempty"`
	Requests  int64      `json:"requests"`
	Allowed   int64      `json:"allowed"`
	Denied    int64      `json:"denied"`
	OverQuota int64      `json:"over_quota,omitempty"`
	TopDenied []KeyCount `json:"top_denied"`
	// Timeline has the buckets with at least one denial, in time order.
	Timeline []Bucket `json:"timeline"`
}

type policyRun struct {
	p       limiter.Policy
	m       *limiter.Memory
	plans   map[string]planRun                           // plan name → its variant of m or its max (Config.Plans)
	levels  map[[limiter.MaxLevels]int64]*limiter.Memory // with levels: a variant per set of level limits
	check   limiter.Checker                              // a usage rule instead of m
	rep     Report
	denied  map[string]int64
	buckets map[int64]*Bucket
}

// Replayer replays requests in time order. Not safe for concurrent use.
type Replayer struct {
	cfg   Config
	runs  []*policyRun
	by    map[string]*policyRun
	last  time.Time
	n     int64
	store *window.Store
	// Events counts the metric events recorded; Refused those the store refused (late
	// beyond the ring's retention, bad values, too many series), by error.
	Events  int64
	Refused map[string]int64
}

// New returns a Replayer for cfg.
func New(cfg Config) (*Replayer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.TopKeys = cmp.Or(cfg.TopKeys, DefaultTopKeys)
	cfg.Bucket = cmp.Or(cfg.Bucket, DefaultBucket)
	r := &Replayer{cfg: cfg, by: map[string]*policyRun{}}
	for _, p := range cfg.Policies {
		p.Backend = limiter.BackendMemory
		// What only a remote backend reads goes with it: the replay has no hop to time out,
		// and memory refuses timeout and local. A store full of live keys then answers as
		// the memory default, open.
		p.Timeout = 0
		if p.OnBackendError == limiter.FailLocal {
			p.OnBackendError = limiter.FailOpen
		}
		// The clock is never read: every decision passes the request's time as now.
		m, err := limiter.NewMemory(p, limiter.MemoryConfig{MaxKeys: cfg.MaxKeys,
			Clock: func() time.Time { return time.Time{} }})
		if err != nil {
			return nil, err
		}
		run := &policyRun{p: p, m: m, denied: map[string]int64{}, buckets: map[int64]*Bucket{},
			rep: Report{Policy: p.Name, Algorithm: p.Algorithm.String(), Shadow: p.Shadow}}
		r.runs = append(r.runs, run)
		r.by[p.Name] = run
	}
	if len(cfg.Rules) > 0 {
		sc := cfg.Store
		sc.Now = func() int64 { return r.last.UnixMilli() }
		if sc.Ring.Slot == 0 {
			sc.Ring = window.RingConfig{Slot: window.DefaultSlot, Slots: window.DefaultSlots}
		}
		st, err := window.NewStore(sc)
		if err != nil {
			return nil, err
		}
		r.store = st
		checkers, err := usage.NewCheckers(st, cfg.Rules)
		if err != nil {
			return nil, err
		}
		for i, c := range checkers {
			rule := cfg.Rules[i]
			if _, dup := r.by[rule.Name]; dup {
				return nil, fmt.Errorf("backtest: %q is both a policy and a rule", rule.Name)
			}
			run := &policyRun{check: c, denied: map[string]int64{}, buckets: map[int64]*Bucket{},
				rep: Report{Policy: rule.Name, Algorithm: "usage " + rule.Agg.String() + " of " + rule.Metric}}
			run.p.Name = rule.Name
			r.runs = append(r.runs, run)
			r.by[rule.Name] = run
		}
	}
	if err := r.setPlans(); err != nil {
		return nil, err
	}
	return r, nil
}

// Replay decides req under its policy (or every policy) with req.Time as now.
func (r *Replayer) Replay(ctx context.Context, req Request) error {
	if y := req.Time.Year(); y < 0 || y > 9999 {
		// A log of unix micro- or nanoseconds read as ms: seconds apart become hours apart,
		// and every limit looks generous. RFC 3339's years bound every format's times.
		return fmt.Errorf("%w: %s: ts %d ms is outside the years 0000-9999 (unix microseconds or nanoseconds? want unix ms)",
			ErrLog, where(req), req.Time.UnixMilli())
	}
	if req.Time.Before(r.last) {
		return fmt.Errorf("%s: %w (%s < %s)", where(req), ErrUnsorted,
			req.Time.UTC().Format(time.RFC3339Nano), r.last.UTC().Format(time.RFC3339Nano))
	}
	r.last = req.Time
	if req.Metric != "" {
		r.Events++
		if r.store == nil {
			return nil // no rules read the windows
		}
		err := r.store.ObserveAt(req.Time.UnixMilli(), window.Event{TS: req.Time.UnixMilli(),
			Metric: req.Metric, Key: req.Key, Value: req.Value, Count: req.Count})
		if err != nil {
			if r.Refused == nil {
				r.Refused = map[string]int64{}
			}
			r.Refused[err.Error()]++
		}
		return nil
	}
	if req.Policy != "" {
		run, ok := r.by[req.Policy]
		if !ok {
			return fmt.Errorf("%s: %w %q (policies: %v)", where(req), ErrUnknownPolicy, req.Policy, r.names())
		}
		return r.decide(ctx, run, req)
	}
	for _, run := range r.runs {
		if err := r.decide(ctx, run, req); err != nil {
			return err
		}
	}
	return nil
}

func where(req Request) string {
	if req.Line > 0 {
		return fmt.Sprintf("line %d", req.Line)
	}
	return "request"
}

func (r *Replayer) names() []string {
	var out []string
	for _, run := range r.runs {
		out = append(out, run.p.Name)
	}
	return out
}

func (r *Replayer) decide(ctx context.Context, run *policyRun, req Request) error {
	var d limiter.Decision
	var err error
	pr, plan := r.planOf(run, req.Key)
	switch {
	case pr.m != nil:
		d, err = pr.m.AllowN(ctx, req.Key, req.Time, req.Cost)
	case pr.hasMax:
		d, err = run.check.(limiter.PlanChecker).CheckMax(ctx, req.Key, req.Time, req.Cost, pr.max)
	case run.check != nil:
		d, err = run.check.Check(ctx, req.Key, req.Time, req.Cost)
	default:
		d, err = run.m.AllowN(ctx, req.Key, req.Time, req.Cost)
	}
	d.Plan = plan
	switch {
	case err == nil:
	case errors.Is(err, limiter.ErrCostOverLimit):
		run.rep.OverQuota++
	default:
		return fmt.Errorf("%s: policy %s, key %q: %w", where(req), run.p.Name, req.Key, err)
	}
	if r.cfg.OnDecision != nil {
		r.cfg.OnDecision(req, run.p.Name, d, err)
	}
	allowed := err == nil && d.Allowed
	run.rep.Requests++
	b := r.bucket(run, req.Time)
	if allowed {
		run.rep.Allowed++
		b.Allowed++
		return nil
	}
	run.rep.Denied++
	b.Denied++
	run.denied[req.Key]++
	return nil
}

func (r *Replayer) bucket(run *policyRun, t time.Time) *Bucket {
	w := r.cfg.Bucket.Nanoseconds()
	i := window.FloorDiv(t.UnixNano(), w)
	b := run.buckets[i]
	if b == nil {
		b = &Bucket{Start: time.Unix(0, i*w).UTC()}
		run.buckets[i] = b
	}
	return b
}

// Reports returns each policy's report, in the order of Config.Policies.
func (r *Replayer) Reports() []Report {
	out := make([]Report, 0, len(r.runs))
	for _, run := range r.runs {
		rep := run.rep
		rep.TopDenied = []KeyCount{}
		for k, n := range run.denied {
			rep.TopDenied = append(rep.TopDenied, KeyCount{Key: k, Plan: r.planName(k), Denied: n})
		}
		slices.SortFunc(rep.TopDenied, func(a, b KeyCount) int {
			if c := cmp.Compare(b.Denied, a.Denied); c != 0 {
				return c
			}
			return cmp.Compare(a.Key, b.Key)
		})
		rep.TopDenied = rep.TopDenied[:min(len(rep.TopDenied), r.cfg.TopKeys)]
		rep.Timeline = []Bucket{}
		for _, b := range run.buckets {
			if b.Denied > 0 {
				rep.Timeline = append(rep.Timeline, *b)
			}
		}
		slices.SortFunc(rep.Timeline, func(a, b Bucket) int { return a.Start.Compare(b.Start) })
		out = append(out, rep)
	}
	return out
}
