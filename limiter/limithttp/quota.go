package limithttp

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/limiter"
)

// QuotaJSON is the body of GET /v1/quota.
type QuotaJSON struct {
	Policy    string           `json:"policy"`
	Key       string           `json:"key"`
	Plan      string           `json:"plan"`
	Limit     int64            `json:"limit"`
	Used      int64            `json:"used"`
	Remaining int64            `json:"remaining"`
	Reset     string           `json:"reset"` // RFC 3339, UTC, rounded up to the second
	Levels    []LevelQuotaJSON `json:"levels,omitempty"`
}

// LevelQuotaJSON is one level of a QuotaJSON.
type LevelQuotaJSON struct {
	Level     string `json:"level"`
	Limit     int64  `json:"limit"`
	Used      int64  `json:"used"`
	Remaining int64  `json:"remaining"`
	Reset     string `json:"reset"`
}

// rfc3339Up formats t in UTC to the second, rounded up so a client that waits for it is
// never early.
func rfc3339Up(t time.Time) string {
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

// NewQuotaJSON returns q in the wire form.
func NewQuotaJSON(q limiter.Quota) QuotaJSON {
	out := QuotaJSON{Policy: q.Policy, Key: q.Key, Plan: q.Plan, Limit: q.Limit, Used: q.Used,
		Remaining: q.Remaining, Reset: rfc3339Up(q.Reset)}
	for _, l := range q.Levels {
		out.Levels = append(out.Levels, LevelQuotaJSON{Level: l.Level, Limit: l.Limit, Used: l.Used,
			Remaining: l.Remaining, Reset: rfc3339Up(l.Reset)})
	}
	return out
}

// QuotaHandler returns the handler of GET /v1/quota?policy=P&key=K: how much of K's
// quota under P (a policy or usage rule) is left, charging nothing, as a QuotaJSON.
// Errors are httperr's: 400 bad_parameter naming policy or key, 405 for a method other
// than GET or HEAD, 503 unavailable when a closed policy's backend is down, or when a
// policy with levels cannot read them from its backend (Redis, the key's cluster owner).
func QuotaHandler(s *limiter.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httperr.Write(w, httperr.MethodNotAllowed, "", "use GET")
			return
		}
		q := r.URL.Query()
		policy, key := q.Get("policy"), q.Get("key")
		switch {
		case policy == "":
			httperr.Write(w, httperr.BadParameter, "policy", `parameter "policy" is required`)
			return
		case key == "":
			httperr.Write(w, httperr.BadParameter, "key", `parameter "key" is required`)
			return
		}
		quota, err := s.Quota(r.Context(), policy, key, s.Now())
		if err != nil {
			writeDecideError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(NewQuotaJSON(quota))
	})
}
