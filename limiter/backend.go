package limiter

import (
	"context"
	"sync"
	"time"
)

// BackendRequest is one admission request handed to a Backend.
type BackendRequest struct {
	// Policy must have passed Validate; the backend does not check it again.
	Policy *Policy
	// Key is the caller's key (user, tenant, API key), already validated.
	Key string
	// Now is the caller's clock. A Redis backend uses Redis TIME instead
	// unless configured otherwise.
	Now time.Time
	// Cost is 0 (peek) to Policy.Quota().
	Cost int64
}

// Backend decides requests whose state lives outside the process (Redis), or in another
// instance's (backend cluster: limiter/clusterlimit).
// Decide answers every request in one round trip (a pipelined or multi-key
// call), writing out[i] for reqs[i]; len(out) ≥ len(reqs). An error means no
// decision in out can be trusted: the caller applies each policy's failure
// mode. Implementations must not retry a call that may have reached the
// server, since a retried decision can count a request twice.
type Backend interface {
	Decide(ctx context.Context, reqs []BackendRequest, out []Decision) error
}

// DeadlineDecider is a Backend that bounds a call by a deadline itself (backend cluster:
// its batches' timers end every caller's wait at its deadline), so the Service derives no
// context with a timer for each call. ctx is the caller's; an answer not had by deadline
// is an error wrapping context.DeadlineExceeded. DecideBy keeps neither reqs nor out past
// its return (the Service reuses them).
type DeadlineDecider interface {
	DecideBy(ctx context.Context, deadline time.Time, reqs []BackendRequest, out []Decision) error
}

// remoteScratch holds the requests and answers of a DeadlineDecider's call of up to four
// decisions.
type remoteScratch struct {
	reqs [4]BackendRequest
	res  [4]Decision
}

var remoteScratches = sync.Pool{New: func() any { return new(remoteScratch) }}

// LocalDecider is a Backend that can decide some requests in this process, with no call
// and no context (backend cluster: the keys this instance owns). DecideLocal reports false
// when the request must go through Decide; it then changed nothing. (The decision is
// returned by value: a pointer into the caller's out would move it to the heap.)
type LocalDecider interface {
	DecideLocal(req BackendRequest) (Decision, bool)
}

// PolicyResolver is a Backend that decides for other instances (backend cluster: a key's
// owner decides what the others forward to it). NewService hands it EffectivePolicy, so
// that the owner decides a forwarded key by the numbers of the key's plan, as its caller
// did (a forwarded decision names its policy and a fingerprint of those numbers, not the
// numbers themselves).
type PolicyResolver interface {
	SetResolver(func(name, key string) (Policy, string, bool))
}
