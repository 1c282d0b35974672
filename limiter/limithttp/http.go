package limithttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/limiter"
)

// MaxBodyBytes is the largest /v1/allow body accepted (larger: 413).
const MaxBodyBytes = 64 << 10

// MaxPoliciesPerRequest bounds the "policies" list of one request.
const MaxPoliciesPerRequest = 16

// allowRequest is the body of POST /v1/allow.
type allowRequest struct {
	Policy   string   `json:"policy"`
	Policies []string `json:"policies"`
	Key      string   `json:"key"`
	Cost     *int64   `json:"cost"` // absent: 1
}

// DecisionJSON is one decision as /v1/allow and the middleware write it.
type DecisionJSON struct {
	Allowed      bool   `json:"allowed"`
	Policy       string `json:"policy"`
	Plan         string `json:"plan,omitempty"`  // the key's plan (limiter.Service.SetPlans)
	Level        string `json:"level,omitempty"` // the level that denied (a policy with levels)
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	DelayMs      int64  `json:"delay_ms,omitempty"`
	Shadowed     bool   `json:"shadowed,omitempty"`
	Degraded     bool   `json:"degraded,omitempty"`
	StaleMs      *int64 `json:"stale_ms,omitempty"` // set when a usage rule read other instances' aggregates
}

// AllowResponse is the body of a 200 or 429 from /v1/allow: the request's
// decision, plus one entry per policy when several were named.
type AllowResponse struct {
	DecisionJSON
	Decisions []DecisionJSON `json:"decisions,omitempty"`
}

func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// NewDecisionJSON returns d in the wire form (durations in milliseconds, rounded up).
// An untracked decision (limiter.Decision.Untracked) says "remaining":0: nothing
// counted it, so no quota can be vouched for, and 0 (as rls's limit_remaining)
// never invites a client to spend what it reads.
func NewDecisionJSON(d limiter.Decision) DecisionJSON {
	if d.Untracked() {
		d.Remaining = 0
	}
	return DecisionJSON{
		Allowed:      d.Allowed,
		Policy:       d.Policy,
		Plan:         d.Plan,
		Level:        d.Level,
		Limit:        d.Limit,
		Remaining:    d.Remaining,
		RetryAfterMs: ceilMillis(d.RetryAfter),
		ResetAfterMs: ceilMillis(d.ResetAfter),
		DelayMs:      ceilMillis(d.Delay),
		Shadowed:     d.Shadowed,
		Degraded:     d.Degraded,
		StaleMs:      staleMs(d),
	}
}

func staleMs(d limiter.Decision) *int64 {
	if !d.Remote {
		return nil
	}
	ms := d.Stale.Milliseconds()
	return &ms
}

// writeDecideError maps a Decide error to its HTTP answer.
func writeDecideError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, limiter.ErrUnknownPolicy):
		httperr.Write(w, httperr.BadParameter, "policy", `parameter "policy": `+err.Error())
	case errors.Is(err, limiter.ErrEmptyLevel):
		httperr.Write(w, httperr.BadParameter, "key", `parameter "key": `+limiter.ErrEmptyLevel.Error())
	case errors.Is(err, limiter.ErrInvalidKey):
		httperr.Write(w, httperr.BadParameter, "key",
			fmt.Sprintf(`parameter "key": must be 1 to %d bytes of UTF-8 without control characters`, limiter.MaxKeyLen))
	case errors.Is(err, limiter.ErrInvalidCost):
		httperr.Write(w, httperr.BadParameter, "cost", `parameter "cost": must be an integer ≥ 0 (0 peeks without consuming)`)
	case errors.Is(err, limiter.ErrCostOverLimit):
		httperr.Write(w, httperr.BadParameter, "cost", `parameter "cost": `+err.Error())
	case errors.Is(err, limiter.ErrBackendUnavailable):
		httperr.Write(w, httperr.Unavailable, "", err.Error())
	default:
		httperr.Write(w, httperr.Internal, "", err.Error())
	}
}

// contentTypeJSON is shared by every response; net/http only reads header values.
var contentTypeJSON = []string{"application/json"}

// writeDecision writes headers, status (200, or 429 when denied) and body.
func writeDecision(w http.ResponseWriter, now time.Time, main limiter.Decision, all []limiter.Decision) {
	h := w.Header()
	WriteHeaders(h, now, main, all)
	resp := AllowResponse{DecisionJSON: NewDecisionJSON(main)}
	var list [MaxPoliciesPerRequest]DecisionJSON
	if len(all) > 1 {
		resp.Decisions = list[:len(all)]
		for i := range all {
			resp.Decisions[i] = NewDecisionJSON(all[i])
		}
	}
	h["Content-Type"] = contentTypeJSON
	if main.Allowed {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	bp := bufPool.Get().(*[]byte)
	*bp = appendAllowResponse((*bp)[:0], &resp)
	_, _ = w.Write(*bp)
	bufPool.Put(bp)
}

// readBody reads r's body, at most MaxBodyBytes, appending to b.
func readBody(w http.ResponseWriter, r *http.Request, b []byte) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// decodeAllow parses a /v1/allow body: the hand parser for the common shape, the strict
// decoder (exact field names, no duplicates, no unknown fields, no trailing data, UTF-8
// refused rather than rewritten) for everything else and for errors.
func decodeAllow(data []byte) (allowRequest, error) {
	if req, ok := parseAllowFast(data); ok {
		return req, nil
	}
	return decodeAllowStrict(data)
}

var errTrailing = errors.New("body must be one JSON object")

// AllowHandler returns the handler of POST /v1/allow, deciding with s:
//
//	{"policy":"login","key":"u42","cost":1}
//	{"policies":["per-user","per-tenant"],"key":"u42"}
//
// cost defaults to 1; 0 peeks. It answers 200 (allowed) or 429 (denied)
// with an AllowResponse and the headers of WriteHeaders; errors are
// httperr's: 400 bad_parameter naming the field in "param" (policy, policies,
// key, cost, or an unknown one), 400 bad_body for a body that is not one JSON
// object, 405 method_not_allowed for a method other than POST, 413
// body_too_large over MaxBodyBytes, 503 unavailable (Retry-After: 1) when a
// closed policy's backend is down.
func AllowHandler(s *limiter.Service) http.Handler {
	return allowHandler{s}
}

type allowHandler struct{ s *limiter.Service }

func (h allowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httperr.Write(w, httperr.MethodNotAllowed, "", "use POST")
		return
	}
	bp := bufPool.Get().(*[]byte)
	data, err := readBody(w, r, (*bp)[:0])
	*bp = data[:0]
	var req allowRequest
	if err == nil {
		req, err = decodeAllow(data)
	}
	bufPool.Put(bp) // the request holds copies of its strings
	if err != nil {
		if err == errTrailing {
			httperr.Write(w, httperr.BadBody, "", err.Error())
			return
		}
		writeJSONError(w, err)
		return
	}
	names := req.Policies
	switch {
	case req.Policy != "" && len(req.Policies) > 0:
		httperr.Write(w, httperr.BadParameter, "policy", `give either "policy" or "policies", not both`)
		return
	case req.Policy != "":
		names = []string{req.Policy} // does not escape: read below only
	case len(names) == 0:
		httperr.Write(w, httperr.BadParameter, "policy", `parameter "policy" (or "policies") is required`)
		return
	case len(names) > MaxPoliciesPerRequest:
		httperr.Write(w, httperr.BadParameter, "policies",
			fmt.Sprintf(`parameter "policies": at most %d policies per request`, MaxPoliciesPerRequest))
		return
	}
	for i, n := range names {
		for _, m := range names[:i] {
			if n == m {
				httperr.Write(w, httperr.BadParameter, "policies", fmt.Sprintf(`parameter "policies": %q named twice`, n))
				return
			}
		}
	}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	var checkBuf [MaxPoliciesPerRequest]limiter.Charge
	var outBuf [MaxPoliciesPerRequest]limiter.Decision
	checks := checkBuf[:len(names)]
	for i, n := range names {
		checks[i] = limiter.Charge{Policy: n, Key: req.Key, Cost: cost}
	}
	out := outBuf[:len(checks)]
	now := s.Now()
	main, err := s.Decide(r.Context(), now, checks, out)
	if err != nil {
		writeDecideError(w, err)
		return
	}
	var all []limiter.Decision
	if len(out) > 1 {
		all = out
	}
	writeDecision(w, now, main, all)
}

func writeJSONError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var rqe *requestError
	switch {
	case errors.As(err, &rqe):
		httperr.Write(w, httperr.BadParameter, rqe.param, rqe.Error())
	case errors.As(err, &mbe):
		httperr.Write(w, httperr.BodyTooLarge, "",
			fmt.Sprintf("body exceeds %d bytes", MaxBodyBytes))
	case errors.As(err, &ute):
		httperr.Write(w, httperr.BadParameter, ute.Field,
			fmt.Sprintf("parameter %q: must be %s", ute.Field, jsonKind(ute.Field)))
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		httperr.Write(w, httperr.BadParameter, "",
			strings.TrimPrefix(err.Error(), "json: ")+` (known: "policy", "policies", "key", "cost")`)
	default:
		httperr.Write(w, httperr.BadBody, "", "body is not a JSON object: "+err.Error())
	}
}

func jsonKind(field string) string {
	switch field {
	case "cost":
		return "an integer"
	case "policies":
		return "an array of strings"
	}
	return "a string"
}
