package limithttp

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slide-metrics/slide/limiter"
)

// A key with an empty first level ("/u1") is a 400 naming the key and why, on
// /v1/allow and /v1/quota alike (it was a 429 of limit 0, and a 500 "store full").
func TestEmptyFirstLevelIsBadKey(t *testing.T) {
	s := newTestService(t, limiter.Config{Policies: []limiter.Policy{{Name: "org", Algorithm: limiter.FixedWindow,
		Window: time.Hour, Levels: limiter.Levels{Separator: "/", Limits: [limiter.MaxLevels]int64{6, 4}, N: 2}}}})
	w := post(AllowHandler(s), `{"policy":"org","key":"/u1"}`)
	q := httptest.NewRecorder()
	QuotaHandler(s).ServeHTTP(q, httptest.NewRequest("GET", "/v1/quota?policy=org&key=/u1", nil))
	for name, r := range map[string]*httptest.ResponseRecorder{"allow": w, "quota": q} {
		if b := r.Body.String(); r.Code != 400 || !strings.Contains(b, `"param":"key"`) || !strings.Contains(b, "first level is empty") {
			t.Errorf("%s: %d %s; want 400 naming the key's empty first level", name, r.Code, b)
		}
	}
}
