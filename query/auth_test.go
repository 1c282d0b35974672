package query_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/slide-metrics/slide/httperr"
	"github.com/slide-metrics/slide/promapi"
	"github.com/slide-metrics/slide/query"
)

const testToken = "s3cret-token-0123456789abcdefghij"

// TestAuthReadsOnEveryRoute walks every route × {no header, wrong token, wrong scheme, right
// token} × {AuthReads off, on}, with a token configured. Writes always need the token;
// reads and /metrics need it only with AuthReads; probes and the dashboard page never do.
func TestAuthReadsOnEveryRoute(t *testing.T) {
	type access int
	const (
		public access = iota // never a token
		read                 // a token with AuthReads
		write                // a token whenever one is configured
	)
	routes := []struct {
		method, path, body string
		access             access
	}{
		{"GET", "/v1/window?metric=latency_ms&key=a", "", read},
		{"GET", "/v1/top?metric=latency_ms&by=p95", "", read},
		{"GET", "/v1/series", "", read},
		{"GET", "/v1/metrics", "", read},
		{"GET", "/v1/range?metric=latency_ms&key=a", "", read},
		{"GET", "/v1/status", "", read},
		{"GET", "/metrics", "", read},
		{"GET", "/api/v1/query?query=1", "", read},
		{"GET", "/api/v1/labels", "", read},
		{"HEAD", "/v1/window?metric=latency_ms&key=a", "", read},
		{"POST", "/v1/events", event{ts: t0, key: "b", metric: "latency_ms", value: 1}.line(), write},
		{"POST", "/v1/allow", `{"policy":"per-tenant","key":"a"}`, write},
		{"GET", "/healthz", "", public},
		{"GET", "/readyz", "", public},
		{"GET", "/", "", public},
	}
	headers := []struct {
		name, value string
		wantAuthn   string // WWW-Authenticate of the 401; "" when the request is authorized
	}{
		{"no header", "", `Bearer realm="slide"`},
		{"wrong token", "Bearer " + testToken[:len(testToken)-1] + "X", `Bearer realm="slide", error="invalid_token"`},
		{"wrong scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+testToken)), `Bearer realm="slide"`},
		{"right token", "Bearer " + testToken, ""},
	}
	for _, authReads := range []bool{false, true} {
		e := allowEnv(t, func(c *query.Config) {
			c.AuthToken, c.AuthReads = testToken, authReads
			p, err := promapi.New(promapi.Config{Store: c.Store, Now: c.Now})
			if err != nil {
				t.Fatal(err)
			}
			c.PromAPI = p.Handler()
		})
		e.seed(event{ts: t0, key: "a", metric: "latency_ms", value: 1})
		for _, rt := range routes {
			needsToken := rt.access == write || (rt.access == read && authReads)
			for _, h := range headers {
				name := rt.method + " " + rt.path + " / " + h.name
				if authReads {
					name += " / auth-reads"
				}
				var hdr []string
				if h.value != "" {
					hdr = []string{"Authorization", h.value}
				}
				code, body, rh := e.do(rt.method, rt.path, []byte(rt.body), hdr...)
				if !needsToken || h.wantAuthn == "" {
					if code != http.StatusOK {
						t.Errorf("%s = %d %s, want 200", name, code, body)
					}
					if rh.Get("WWW-Authenticate") != "" {
						t.Errorf("%s: WWW-Authenticate %q on an authorized answer", name, rh.Get("WWW-Authenticate"))
					}
					continue
				}
				if code != http.StatusUnauthorized {
					t.Errorf("%s = %d %s, want 401", name, code, body)
					continue
				}
				if got := rh.Get("WWW-Authenticate"); got != h.wantAuthn {
					t.Errorf("%s: WWW-Authenticate %q, want %q", name, got, h.wantAuthn)
				}
				if rt.method == "HEAD" {
					continue // no body
				}
				var a errorAnswer
				if err := json.Unmarshal(body, &a); err != nil || a.Error.Code != string(httperr.Unauthorized) || a.Error.Message == "" {
					t.Errorf("%s: body %q, want a JSON error with code %q", name, body, httperr.Unauthorized)
				}
			}
		}
		// Refused POSTs recorded nothing: only the one with the right token reached the sink.
		if n := e.store.Len(); n != 2 {
			t.Errorf("auth-reads %v: %d series, want 2 (the seed and one authorized POST)", authReads, n)
		}
	}
}

// TestAuthReadsNeedsToken: AuthReads without a token is a config error, not a silent no-op.
func TestAuthReadsNeedsToken(t *testing.T) {
	st := newEnv(t, nil).store
	_, err := query.New(query.Config{Store: st, AuthReads: true})
	if !errors.Is(err, query.ErrConfig) || !strings.Contains(err.Error(), "auth reads needs an auth token") {
		t.Fatalf("New(AuthReads without AuthToken) = %v, want ErrConfig naming the problem", err)
	}
}
