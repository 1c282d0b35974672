package limithttp

import (
	"errors"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// KeyFunc returns the limiter key of a request (client IP, API key, tenant).
// An error answers 400 bad_parameter with "param":"key".
type KeyFunc func(r *http.Request) (string, error)

// KeyByRemoteIP keys by the connection's peer address without the port. It
// ignores X-Forwarded-For, which clients can forge; behind a proxy, key by a
// header the proxy sets instead (KeyByHeader).
func KeyByRemoteIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr, nil
	}
	return host, nil
}

// KeyByHeader keys by the value of header name; a request without it is
// refused with 400.
func KeyByHeader(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", errors.New("missing header " + name)
		}
		return v, nil
	}
}

// MiddlewareOption configures a Middleware.
type MiddlewareOption func(*Middleware)

// WithPolicies names the policies (and checkers) every request is charged
// against, as one multi-policy decision. Required.
func WithPolicies(names ...string) MiddlewareOption {
	return func(m *Middleware) { m.policies = append([]string(nil), names...) }
}

// WithKeyFunc sets how a request is keyed. Default KeyByRemoteIP.
func WithKeyFunc(f KeyFunc) MiddlewareOption {
	return func(m *Middleware) { m.key = f }
}

// WithCost sets the cost of a request (e.g. by route). Default 1.
func WithCost(f func(r *http.Request) int64) MiddlewareOption {
	return func(m *Middleware) { m.cost = f }
}

// WithErrorHandler replaces the JSON answer to a failed decision (bad key,
// backend unavailable under a closed policy). The error wraps the sentinels
// of this package.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) MiddlewareOption {
	return func(m *Middleware) { m.onError = f }
}

// WithoutDelay makes the middleware pass a shaped request (leaky bucket with
// max_delay) on at once instead of waiting Decision.Delay first.
func WithoutDelay() MiddlewareOption {
	return func(m *Middleware) { m.noDelay = true }
}

// Middleware enforces a limiter.Service's policies in front of an http.Handler, for
// services that embed slide as a library. It writes the same statuses,
// headers and bodies as AllowHandler. Safe for concurrent use.
type Middleware struct {
	s        *limiter.Service
	policies []string
	key      KeyFunc
	cost     func(*http.Request) int64
	onError  func(http.ResponseWriter, *http.Request, error)
	noDelay  bool
}

// NewMiddleware returns a Middleware over s. It fails if no policy is named
// or a name is unknown.
func NewMiddleware(s *limiter.Service, opts ...MiddlewareOption) (*Middleware, error) {
	m := &Middleware{s: s, key: KeyByRemoteIP}
	for _, o := range opts {
		o(m)
	}
	if len(m.policies) == 0 {
		return nil, errors.New("creating limiter middleware: no policy named (use WithPolicies)")
	}
	known := s.Names()
	for _, n := range m.policies {
		if !slices.Contains(known, n) {
			return nil, errors.New("creating limiter middleware: " + limiter.ErrUnknownPolicy.Error() + " " + n)
		}
	}
	return m, nil
}

// Handler returns next behind the limiter: a denied request gets 429 with
// Retry-After and never reaches next; an allowed one reaches next with the
// rate-limit headers already set (after waiting Decision.Delay if shaped).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := m.key(r)
		if err == nil {
			err = limiter.ValidateKey(key)
		}
		if err != nil {
			m.fail(w, r, errors.Join(limiter.ErrInvalidKey, err))
			return
		}
		cost := int64(1)
		if m.cost != nil {
			cost = m.cost(r)
		}
		checks := make([]limiter.Charge, len(m.policies))
		for i, n := range m.policies {
			checks[i] = limiter.Charge{Policy: n, Key: key, Cost: cost}
		}
		out := make([]limiter.Decision, len(checks))
		now := m.s.Now()
		main, err := m.s.Decide(r.Context(), now, checks, out)
		if err != nil {
			m.fail(w, r, err)
			return
		}
		var all []limiter.Decision
		if len(out) > 1 {
			all = out
		}
		if !main.Allowed {
			writeDecision(w, now, main, all)
			return
		}
		WriteHeaders(w.Header(), now, main, all)
		if main.Delay > 0 && !m.noDelay {
			t := time.NewTimer(main.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client left while we shaped it
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (m *Middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	if m.onError != nil {
		m.onError(w, r, err)
		return
	}
	writeDecideError(w, err)
}
