package limithttp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/slide-metrics/slide/limiter"
)

// BenchmarkAllowHandler is POST /v1/allow in process (no network): decode, decide, headers,
// body. It is most of what /v1/allow adds over the HTTP floor.
func BenchmarkAllowHandler(b *testing.B) {
	svc, err := limiter.NewService(limiter.Config{Policies: []limiter.Policy{{Name: "api", Algorithm: limiter.TokenBucket, Capacity: 1 << 40, RefillPerSecond: 1e6}}})
	if err != nil {
		b.Fatal(err)
	}
	h := AllowHandler(svc)
	body := []byte(`{"policy":"api","key":"tenant-42","cost":1}`)
	w := &discardWriter{h: http.Header{}}
	req := httptest.NewRequest("POST", "/v1/allow", nil)
	b.ReportAllocs()
	for b.Loop() {
		req.Body = io.NopCloser(bytes.NewReader(body))
		clear(w.h)
		h.ServeHTTP(w, req)
		if w.code != 200 {
			b.Fatalf("status %d", w.code)
		}
	}
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
