package limiter

import (
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Algorithm selects how a policy counts. The zero value is invalid.
type Algorithm uint8

// The algorithms, named as in the policy file.
const (
	// FixedWindow counts per aligned window (floor(now/window)); cheap, but
	// admits up to 2× the limit across a window boundary.
	FixedWindow Algorithm = iota + 1
	// SlidingLog keeps one timestamp per admitted unit: exact, O(limit) memory.
	SlidingLog
	// SlidingCounter estimates the sliding window as prev×(1−elapsed)+cur:
	// two counters, error of about one request.
	SlidingCounter
	// TokenBucket refills lazily at RefillPerSecond up to Capacity: bursts up
	// to Capacity, long-run rate RefillPerSecond.
	TokenBucket
	// LeakyBucket is the leaky bucket as a meter (GCRA, as nginx limit_req and
	// redis_rate): Capacity is the burst, LeakPerSecond the rate; with
	// MaxDelay it shapes (admits with a Delay) instead of denying.
	LeakyBucket
)

var algorithmNames = [...]string{
	FixedWindow:    "fixed_window",
	SlidingLog:     "sliding_log",
	SlidingCounter: "sliding_counter",
	TokenBucket:    "token_bucket",
	LeakyBucket:    "leaky_bucket",
}

// String returns the policy-file name, e.g. "sliding_log".
func (a Algorithm) String() string { return nameOf(algorithmNames[:], a, "Algorithm") }

// ParseAlgorithm maps a policy-file name to its Algorithm.
func ParseAlgorithm(s string) (Algorithm, error) {
	if a, ok := parseName[Algorithm](algorithmNames[:], s); ok {
		return a, nil
	}
	return 0, fmt.Errorf("unknown algorithm %q (want fixed_window, sliding_log, sliding_counter, token_bucket or leaky_bucket)", s)
}

// BackendKind says where a policy keeps its state. The zero value is
// BackendMemory.
type BackendKind uint8

const (
	// BackendMemory keeps state in this process: fast, but every instance
	// counts on its own, so N instances admit up to N× the limit.
	BackendMemory BackendKind = iota
	// BackendRedis keeps state in Redis, shared by every instance.
	BackendRedis
	// BackendCluster keeps each key's state in the memory of one instance of the
	// consumer group, its owner; the others forward to it (limiter/clusterlimit).
	BackendCluster
)

var backendNames = [...]string{BackendMemory: "memory", BackendRedis: "redis", BackendCluster: "cluster"}

// String returns "memory", "redis" or "cluster".
func (b BackendKind) String() string { return nameOf(backendNames[:], b, "BackendKind") }

// ParseBackend maps a policy-file name ("memory", "redis", "cluster") to its BackendKind;
// ok is false for any other. Callers word the error in their file's terms.
func ParseBackend(s string) (BackendKind, bool) { return parseName[BackendKind](backendNames[:], s) }

// FailureMode says what a Redis policy decides when Redis fails or exceeds the
// policy timeout. The zero value is FailOpen.
type FailureMode uint8

const (
	// FailOpen admits the request (Decision.Degraded is set): an outage of
	// the limiter does not become an outage of the service.
	FailOpen FailureMode = iota
	// FailClosed refuses with ErrBackendUnavailable (HTTP 503): for endpoints
	// where failing open invites abuse (login, OTP).
	FailClosed
	// FailLocal decides with an in-process limiter of the same policy, so
	// each instance enforces the limit on its own share of traffic.
	FailLocal
)

var failureModeNames = [...]string{FailOpen: "open", FailClosed: "closed", FailLocal: "local"}

// String returns "open", "closed" or "local".
func (f FailureMode) String() string { return nameOf(failureModeNames[:], f, "FailureMode") }

// ParseFailureMode maps a policy-file name ("open", "closed", "local") to its
// FailureMode; ok is false for any other.
func ParseFailureMode(s string) (FailureMode, bool) {
	return parseName[FailureMode](failureModeNames[:], s)
}

// nameOf and parseName map the policy file's names of a small enum to and from its
// values, through a table indexed by value ("" where a value has no name).
func nameOf[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

func parseName[T ~uint8](names []string, s string) (T, bool) {
	for i, n := range names {
		if n != "" && n == s {
			return T(i), true
		}
	}
	return 0, false
}

// DefaultTimeout bounds each Redis call of a policy whose Timeout is zero.
const DefaultTimeout = 50 * time.Millisecond

// MinTimeout is the shortest Timeout a policy may set: a Redis round trip takes longer.
const MinTimeout = time.Millisecond

// Limits on policy values, so arithmetic cannot overflow in Go (int64 ns) or
// lose precision in Lua (float64 µs).
const (
	// MaxWindow is the longest window or max_delay.
	MaxWindow = 366 * 24 * time.Hour
	// MaxLogLimit caps sliding_log, which stores one entry per admitted unit.
	MaxLogLimit = 100_000
	// MaxQuota caps limit and capacity for the other algorithms.
	MaxQuota = 1 << 40
)

// Policy is one named limit. Build it by hand or with ParsePolicies, then call
// Validate (NewService and NewMemory do). Fields that do not apply to the
// algorithm must be zero; the zero Policy is invalid (no name, no algorithm).
// A Policy is a plain value: copy it freely, but do not change one a Service
// or backend already holds.
type Policy struct {
	// Name identifies the policy in requests, headers and metrics:
	// 1..64 of [A-Za-z0-9_.-].
	Name string
	// Algorithm is required.
	Algorithm Algorithm
	// Limit is the number of units per Window (fixed_window, sliding_log,
	// sliding_counter). Required there, ≥ 1.
	Limit int64
	// Window is the counting window (same algorithms). Required, ≥ 1 ms, unless
	// Calendar is set.
	Window time.Duration
	// Calendar (fixed_window only) counts per calendar day, week (from Monday) or month
	// of Location instead of per Window aligned to the epoch; Window is then 0.
	Calendar Calendar
	// Location is the time zone of Calendar's periods; nil is UTC.
	Location *time.Location
	// Levels (fixed_window only) charges every level of a key split by a separator
	// ("org-1", "org-1/team-a", "org-1/team-a/user-7"), each against its own limit, in
	// one decision; Limit is then 0 (Quota is the smallest level's).
	Levels Levels
	// Capacity is the burst (token_bucket, leaky_bucket). Required, ≥ 1.
	Capacity int64
	// RefillPerSecond is the token_bucket refill rate. Required, > 0.
	RefillPerSecond float64
	// LeakPerSecond is the leaky_bucket drain rate. Required, > 0.
	LeakPerSecond float64
	// MaxDelay (leaky_bucket only) admits a request that would overflow with
	// Decision.Delay up to this bound instead of denying it. Default 0: police.
	MaxDelay time.Duration
	// Backend is BackendMemory (default), BackendRedis or BackendCluster.
	Backend BackendKind
	// OnBackendError is what a decision falls back to when the backend cannot decide:
	// Redis down or slow, or, for a memory policy, its store's key or byte budget full of
	// live state for a new key (open admits it untracked, closed refuses it with
	// ErrBackendUnavailable; local is for Redis policies only). Default FailOpen.
	OnBackendError FailureMode
	// Timeout bounds each Redis call. Default DefaultTimeout (50 ms).
	Timeout time.Duration
	// Shadow decides and counts but never denies: Allowed is always true and
	// Shadowed reports would-be denials (metric result "shadow_denied").
	Shadow bool
	// Source is "file:line" of the policy in its file, set by ParsePolicies
	// and used to prefix later errors; empty for hand-built policies.
	Source string
}

// Quota returns the policy's quota: Limit or Capacity (with Levels, the smallest
// level's limit: no larger cost can ever be admitted).
func (p *Policy) Quota() int64 {
	if p.Algorithm == TokenBucket || p.Algorithm == LeakyBucket {
		return p.Capacity
	}
	if p.Levels.N > 0 {
		q := p.Levels.Limits[0]
		for _, l := range p.Levels.Limits[1:p.Levels.N] {
			q = min(q, l)
		}
		return q
	}
	return p.Limit
}

// QuotaWindow returns the time over which Quota is measured: Window, or the
// time a bucket takes to go from empty to full (Capacity / rate).
func (p *Policy) QuotaWindow() time.Duration {
	switch p.Algorithm {
	case TokenBucket:
		return time.Duration(math.Ceil(float64(p.Capacity) / p.RefillPerSecond * 1e9))
	case LeakyBucket:
		return time.Duration(math.Ceil(float64(p.Capacity) / p.LeakPerSecond * 1e9))
	}
	if p.Calendar != 0 {
		return p.Calendar.Longest()
	}
	return p.Window
}

// EffectiveTimeout returns Timeout or DefaultTimeout when it is zero.
func (p *Policy) EffectiveTimeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// PolicyError describes one problem of one policy. It wraps ErrInvalidPolicy.
type PolicyError struct {
	Source string // "file:line", may be empty
	Policy string // policy name, may be empty
	Field  string // policy-file field name, may be empty
	Msg    string
}

// ClipName shortens a name from a file or a request to at most 64 bytes, cut on a
// character boundary, for messages: an error must not echo a megabyte back.
func ClipName(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Error formats "source: policy \"name\": field: problem", omitting empty parts.
func (e *PolicyError) Error() string {
	s := ""
	if e.Source != "" {
		s = e.Source + ": "
	}
	if e.Policy != "" {
		s += fmt.Sprintf("policy %q: ", ClipName(e.Policy))
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Msg
}

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// ValidName reports a name a policy, a usage rule or an RLS descriptor's policy may have:
// 1 to 64 bytes, each a NameByte. Names go into metric labels and headers, so the set is
// small.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !NameByte(s[i]) {
			return false
		}
	}
	return true
}

// NameByte reports a byte a name may hold: A-Z a-z 0-9 _ . -
func NameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// Validate checks p and returns the first problem as a *PolicyError.
func (p *Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PolicyError{Source: p.Source, Policy: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if !ValidName(p.Name) {
		return bad("name", "must be 1 to 64 characters of A-Z a-z 0-9 _ . -")
	}
	if p.Backend > BackendCluster {
		return bad("backend", "must be memory, redis or cluster")
	}
	if p.OnBackendError > FailLocal {
		return bad("on_backend_error", "must be open, closed or local")
	}
	if p.Timeout != 0 && (p.Timeout < MinTimeout || p.Timeout > time.Minute) {
		// Under a millisecond no Redis round trip fits: every call would time out and
		// answer by on_backend_error with Redis healthy.
		return bad("timeout", "must be 0 (default 50ms) or between 1ms and 1m")
	}
	if p.Backend == BackendMemory && p.Timeout != 0 {
		return bad("timeout", "applies only to backend redis or cluster")
	}
	if p.Backend == BackendMemory && p.OnBackendError == FailLocal {
		return bad("on_backend_error", "local applies only to backend redis or cluster (a memory policy is open or closed when its store is full)")
	}
	windowed := func(maxLimit int64) error {
		if p.Levels.N > 0 {
			if err := p.Levels.validate(p.Algorithm, p.Limit); err != nil {
				return bad("levels", "%v", err)
			}
		} else if p.Limit < 1 || p.Limit > maxLimit {
			return bad("limit", "must be between 1 and %d", maxLimit)
		}
		if p.Calendar != 0 {
			if p.Window != 0 {
				return bad("window", "is %s: a calendar window has no length", p.Calendar)
			}
		} else if p.Window < time.Millisecond || p.Window > MaxWindow {
			return bad("window", "must be between 1ms and %s", MaxWindow)
		}
		if p.Window%time.Microsecond != 0 {
			return bad("window", "must be a whole number of microseconds (Redis keeps µs)")
		}
		if p.Capacity != 0 {
			return bad("capacity", "applies only to token_bucket and leaky_bucket")
		}
		if p.RefillPerSecond != 0 {
			return bad("refill_per_second", "applies only to token_bucket")
		}
		if p.LeakPerSecond != 0 {
			return bad("leak_per_second", "applies only to leaky_bucket")
		}
		if p.MaxDelay != 0 {
			return bad("max_delay", "applies only to leaky_bucket")
		}
		return nil
	}
	bucket := func(rate float64, rateField, otherField string, other float64) error {
		if p.Capacity < 1 || p.Capacity > MaxQuota {
			return bad("capacity", "must be between 1 and %d", int64(MaxQuota))
		}
		if !(rate > 0) || math.IsInf(rate, 0) || rate > 1e6 {
			return bad(rateField, "must be a number above 0 and at most 1000000")
		}
		if other != 0 {
			return bad(otherField, "does not apply to %s", p.Algorithm)
		}
		if p.Limit != 0 {
			return bad("limit", "does not apply to %s (use capacity)", p.Algorithm)
		}
		if p.Window != 0 {
			return bad("window", "does not apply to %s", p.Algorithm)
		}
		if float64(p.Capacity)/rate > MaxWindow.Seconds() {
			return bad("capacity", "takes longer than %s to refill at %g per second", MaxWindow, rate)
		}
		return nil
	}
	if p.Calendar > CalendarMonth {
		return bad("window", "calendar must be calendar_day, calendar_week or calendar_month")
	}
	if p.Calendar != 0 && p.Algorithm != FixedWindow {
		return bad("window", "%s applies only to fixed_window", p.Calendar)
	}
	if p.Levels.N != 0 && p.Algorithm != FixedWindow {
		return bad("levels", "apply only to fixed_window")
	}
	if p.Calendar == 0 && p.Location != nil && p.Location != time.UTC {
		return bad("timezone", "applies only to a calendar window")
	}
	var err error
	switch p.Algorithm {
	case FixedWindow, SlidingCounter:
		err = windowed(MaxQuota)
		if err == nil && p.Algorithm == SlidingCounter {
			// Lua computes limit × window_µs in float64: keep it exact.
			if float64(p.Limit)*float64(p.Window/time.Microsecond) > 1<<53 {
				err = bad("limit", "limit × window (in µs) must stay below 2^53 for sliding_counter")
			}
		}
	case SlidingLog:
		err = windowed(MaxLogLimit)
	case TokenBucket:
		err = bucket(p.RefillPerSecond, "refill_per_second", "leak_per_second", p.LeakPerSecond)
		if err == nil && p.MaxDelay != 0 {
			err = bad("max_delay", "applies only to leaky_bucket")
		}
	case LeakyBucket:
		err = bucket(p.LeakPerSecond, "leak_per_second", "refill_per_second", p.RefillPerSecond)
		if err == nil && (p.MaxDelay < 0 || p.MaxDelay > MaxWindow) {
			err = bad("max_delay", "must be between 0 and %s", MaxWindow)
		}
	default:
		err = bad("algorithm", "must be fixed_window, sliding_log, sliding_counter, token_bucket or leaky_bucket")
	}
	return err
}

// params are a validated policy in the units the algorithms compute with
// (nanoseconds, float rates). Shared by the memory backend and tests.
type params struct {
	quota     int64   // Limit or Capacity
	window    int64   // ns: Window (windowed algorithms)
	rate      float64 // units per second (buckets)
	interval  float64 // ns per unit (leaky bucket emission interval)
	nsPerUnit float64 // 1e9 / rate (token bucket): a multiply where a divide was
	slack     float64 // tokens a token bucket may be short of a whole number and hold it (tokenSlack)
	burstOff  int64   // ns: Capacity × interval (leaky bucket tolerance)
	maxDelay  int64   // ns (leaky bucket)
	quotaWin  time.Duration
	algorithm Algorithm
	cal       *calendar // fixed_window with a Calendar
	levels    []params  // with Levels: each level's (its quota the level's limit)
}

func newParams(p *Policy) params {
	pr := params{quota: p.Quota(), window: int64(p.Window), algorithm: p.Algorithm, quotaWin: p.QuotaWindow()}
	if p.Calendar != 0 {
		pr.cal = &calendar{c: p.Calendar, loc: p.Location}
	}
	if p.Levels.N > 0 {
		pr.levels = make([]params, p.Levels.N)
		for i := range pr.levels {
			pr.levels[i] = pr
			pr.levels[i].quota, pr.levels[i].levels = p.Levels.Limits[i], nil
		}
	}
	switch p.Algorithm {
	case TokenBucket:
		pr.rate = p.RefillPerSecond
		pr.nsPerUnit = 1e9 / p.RefillPerSecond
		pr.slack = tokenSlack(pr.quota)
	case LeakyBucket:
		pr.rate = p.LeakPerSecond
		pr.interval = 1e9 / p.LeakPerSecond
		pr.burstOff = int64(math.Round(float64(p.Capacity) * pr.interval))
		pr.maxDelay = int64(p.MaxDelay)
	}
	return pr
}
