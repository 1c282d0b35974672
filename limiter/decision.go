package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/slide-metrics/slide/window"
)

// Decision is the answer to one admission request.
//
// Durations are relative to the instant the decision was taken (the `now`
// passed to AllowN, or Redis TIME for a Redis policy). The zero value is a
// denial with no quota, which is what a caller gets if it ignores an error.
type Decision struct {
	// Allowed reports whether the request may proceed. For a shadow policy it
	// is always true; Shadowed then tells whether the policy would have denied.
	Allowed bool
	// Limit is the policy's quota: requests per window (fixed_window,
	// sliding_log, sliding_counter) or the bucket capacity (token_bucket,
	// leaky_bucket).
	Limit int64
	// Remaining is the cost that could still be admitted at once after this
	// decision (never negative).
	Remaining int64
	// Used is, for a count or sum usage rule, the usage its window holds (rounded down),
	// which events recorded apart from admission can take past Limit; Remaining, never
	// negative, cannot tell that. 0 for a policy: its usage is Limit − Remaining.
	Used int64
	// RetryAfter is, for a denied request, how long until the same request
	// (same cost) would be admitted if nothing else happened; 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its initial state
	// (Remaining == Limit); 0 when it already is.
	ResetAfter time.Duration
	// Delay is set only by a leaky_bucket policy with max_delay: the request is
	// admitted but the caller must wait this long before serving it (shaping).
	Delay time.Duration
	// Window is the time over which Limit is measured (the policy window, or
	// capacity / rate for the buckets); it feeds the RateLimit-Policy `w`.
	Window time.Duration
	// Policy names the policy or rule that produced the decision.
	Policy string
	// Plan names the key's plan (Service.SetPlans); empty when it has none and the
	// policy's own numbers apply.
	Plan string
	// Level names the level of a policy with levels that denied the request (the key's
	// prefix, "org-1/team-a"); empty when it was admitted or the policy has no levels.
	Level string
	// Shadowed reports that a shadow policy would have denied the request.
	Shadowed bool
	// Degraded reports that the backend failed and the decision came from the
	// policy's on_backend_error mode (open or local) instead.
	Degraded bool
	// Remote reports that a usage rule read other instances' aggregates (several slide
	// instances in one consumer group); Stale is then the age of the oldest of them.
	Remote bool
	Stale  time.Duration

	// local: on_backend_error local decided it from the in-process count (Degraded too).
	local bool
}

// Untracked reports that d admitted a request nothing counted: the backend failed (or a
// memory store was full, or a usage rule's window could not be read) and the failure mode
// let it through at full quota. Nothing is then known of the key's quota, so the faces
// (rls, limithttp's headers) claim none for d rather than Remaining, which would invite a
// client pacing itself by it to spend the whole quota at once. A local fallback (on_backend_error
// local) counts in memory, so its decisions are tracked, a peek (cost 0) of a fresh key too: it
// reports the full local quota, which the local count then holds the key to.
func (d *Decision) Untracked() bool {
	return d.Degraded && d.Allowed && d.Remaining == d.Limit && !d.local
}

// Limiter decides admission for one policy. Memory and the Redis backend both
// implement it; the conformance suite in limitertest runs over any Limiter.
type Limiter interface {
	// AllowN decides whether cost units may be spent for key at now. A cost of
	// 0 peeks: it reports what a request of cost 1 would get without
	// consuming anything.
	AllowN(ctx context.Context, key string, now time.Time, cost int64) (Decision, error)
}

// Errors callers branch on. HTTP maps the first four to 400, the last to 503.
var (
	// ErrUnknownPolicy: the request names no configured policy or rule.
	ErrUnknownPolicy = errors.New("unknown policy")
	// ErrInvalidKey: the key is empty, too long, or not a window.ValidName.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidCost: the cost is negative.
	ErrInvalidCost = errors.New("invalid cost")
	// ErrCostOverLimit: the cost exceeds the policy's quota, so no amount of
	// waiting would admit it.
	ErrCostOverLimit = errors.New("cost exceeds the policy quota")
	// ErrBackendUnavailable: the backend failed or timed out and the policy's
	// on_backend_error is closed.
	ErrBackendUnavailable = errors.New("rate limit backend unavailable")
	// ErrInvalidPolicy wraps every policy validation problem.
	ErrInvalidPolicy = errors.New("invalid policy")
)

// MaxKeyLen is the longest key accepted, in bytes: the default of every door's names.
const MaxKeyLen = window.DefaultMaxNameLen

// ValidateKey reports whether key is acceptable: at most MaxKeyLen bytes and a
// window.ValidName (not empty, valid UTF-8, without C0 or C1 controls, DEL or bidi
// overrides and isolates), the rule ingest holds keys and metrics to. It allocates nothing.
func ValidateKey(key string) error {
	if len(key) > MaxKeyLen || !window.ValidName(key) {
		return ErrInvalidKey
	}
	return nil
}
